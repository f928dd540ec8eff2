// torch_cudajit: the implicit prelude, what nvcc's implicit includes give every .cu file.
//
// nvcc includes <cuda_runtime.h> into every .cu file, and through it the host's <math.h>,
// <stdlib.h>, <stdio.h>, <string.h>, <limits.h>, <cmath> and <cstdlib>, so CUDA code uses M_PI,
// INFINITY, NAN, INT_MAX, offsetof or std::sqrt (and, with --expt-relaxed-constexpr, std::max)
// without including anything. NVRTC already knows the math functions, printf, memcpy, memset,
// malloc, size_t and assert; cj/cj.cuh includes this header so that the rest is there as well:
// the <math.h> macros (INFINITY, NAN, HUGE_VAL, FP_*, M_PI, ...), its std:: functions, integer
// overloads and classification functions, std::min and std::max, the <limits.h> and <float.h>
// macros (nvcc's host headers do not always bring float.h, but FLT_MAX is used as if they did),
// offsetof, EXIT_SUCCESS/EXIT_FAILURE, memmove/memcmp and the std:: names of <cstdlib>.
// Everything here is cheap to compile (of libcu++ it includes only the small climits, cstdlib and
// cstring headers): libcu++'s <type_traits>-based headers, which <limits>, <type_traits>,
// <utility> and the other C++ headers here map onto, would make every kernel markedly slower to
// compile and emit device globals into every module, so they are left to explicit includes.
#pragma once

#if defined(__CUDACC_RTC__)
// <math.h> is the costly part: the plugin asks for it (CJ_IMPLICIT_MATH) where the source can use
// it (csrc/headers.h: ImplicitNeeds). A source that includes <cmath> or <math.h> gets it anyway.
#if defined(CJ_IMPLICIT_MATH)
#include "../math.h"
#endif
#include "../float.h"
#include "../limits.h"
#include "../stddef.h"
#include "../stdio.h"

// The short unsigned names glibc's <sys/types.h> declares, which nvcc's implicit host headers
// bring to every .cu file and CUDA code uses in device code (`uint idx = ...`).
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned long ulong;
typedef unsigned char u_char;
typedef unsigned short u_short;
typedef unsigned int u_int;
typedef unsigned long u_long;
#endif
