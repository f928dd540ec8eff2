// torch_cudajit: <stddef.h> for NVRTC, which ships no C or C++ library headers.
//
// NVRTC already knows size_t, ptrdiff_t and NULL. This header adds offsetof and max_align_t.
// offsetof uses the EDG front end's __INTADDR__, which keeps it a constant expression (the
// null-pointer arithmetic libcu++ falls back on is not one, and NVRTC has no
// __builtin_offsetof); libcu++ defines offsetof only where it is not defined yet. nvcc's
// implicit includes make offsetof available everywhere, so torch_cudajit's implicit prelude
// includes this header too.
#pragma once

#if defined(__CUDACC_RTC__)

#ifndef offsetof
#define offsetof(type, member) ((::size_t)__INTADDR__(&(((type*)0)->member)))
#endif

// The type libcu++ uses for cuda::std::max_align_t in NVRTC mode, so that the two agree.
typedef long double max_align_t;

#endif  // __CUDACC_RTC__
