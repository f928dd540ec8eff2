// torch_cudajit: <stdlib.h> for NVRTC, which ships no C or C++ library headers.
//
// NVRTC already declares malloc, free, abs, labs and llabs in the global namespace (abs with
// int, long, long long, float and double overloads). This header adds EXIT_SUCCESS and
// EXIT_FAILURE and, with libcu++ available, its calloc and div/ldiv/lldiv with their result
// types. nvcc includes the host <stdlib.h> into every .cu file, so torch_cudajit's implicit
// prelude includes this header too.
#pragma once

#if defined(__CUDACC_RTC__)

#include "cj/std_config.h"

#ifndef EXIT_SUCCESS
#define EXIT_SUCCESS 0
#endif
#ifndef EXIT_FAILURE
#define EXIT_FAILURE 1
#endif

#if CJ_STD_LIBCUDACXX && __has_include(<cuda/std/cstdlib>)
#include <cuda/std/cstdlib>
using ::cuda::std::calloc;
using ::cuda::std::div_t;
using ::cuda::std::ldiv_t;
using ::cuda::std::lldiv_t;
using ::cuda::std::div;
using ::cuda::std::ldiv;
using ::cuda::std::lldiv;
#define CJ_STD_HAVE_DIV_ 1
#endif

#endif  // __CUDACC_RTC__
