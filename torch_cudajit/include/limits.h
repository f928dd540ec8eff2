// torch_cudajit: <limits.h> for NVRTC, which ships no C or C++ library headers.
//
// The ranges of the integer types (CHAR_BIT, INT_MAX, UINT_MAX, LLONG_MAX, ...) as macros in the
// global namespace, for NVRTC's LP64 data model. nvcc includes the host <limits.h> into every
// .cu file, so torch_cudajit's implicit prelude includes this header too; it therefore pulls in
// no libcu++ header: those bring internal-linkage definitions into every kernel, which some NVRTC
// versions name with a per-compile hash (so the same source would not compile to the same bytes).
// A kernel that later includes libcu++'s <cuda/std/climits> (cub does) gets its definitions
// again: each macro here is spelled token for token as libcu++ spells it for NVRTC, so that the
// second definition is identical and NVRTC does not warn of a redefinition.
#pragma once

#if defined(__CUDACC_RTC__)

#ifndef CHAR_BIT
#define CHAR_BIT 8
#endif
#ifndef SCHAR_MIN
#define SCHAR_MIN (-128)
#endif
#ifndef SCHAR_MAX
#define SCHAR_MAX 127
#endif
#ifndef UCHAR_MAX
#define UCHAR_MAX 255
#endif
// char is signed on the platforms CUDA supports.
#ifndef CHAR_MIN
#define CHAR_MIN SCHAR_MIN
#endif
#ifndef CHAR_MAX
#define CHAR_MAX SCHAR_MAX
#endif
#ifndef SHRT_MIN
#define SHRT_MIN (-SHRT_MAX - 1)
#endif
#ifndef SHRT_MAX
#define SHRT_MAX 0x7fff
#endif
#ifndef USHRT_MAX
#define USHRT_MAX 0xffff
#endif
#ifndef INT_MIN
#define INT_MIN (-INT_MAX - 1)
#endif
#ifndef INT_MAX
#define INT_MAX 0x7fffffff
#endif
#ifndef UINT_MAX
#define UINT_MAX 0xffffffff
#endif
#ifndef LONG_MIN
#define LONG_MIN (-LONG_MAX - 1)
#endif
#ifndef LONG_MAX
#define LONG_MAX LLONG_MAX
#endif
#ifndef ULONG_MAX
#define ULONG_MAX ULLONG_MAX
#endif
#ifndef LLONG_MIN
#define LLONG_MIN (-LLONG_MAX - 1)
#endif
#ifndef LLONG_MAX
#define LLONG_MAX 0x7fffffffffffffffLL
#endif
#ifndef ULLONG_MAX
#define ULLONG_MAX 0xffffffffffffffffUL
#endif
#ifndef MB_LEN_MAX
#define MB_LEN_MAX 16
#endif

#endif  // __CUDACC_RTC__
