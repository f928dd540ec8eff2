// torch_cudajit: <string.h> for NVRTC, which ships no C or C++ library headers.
//
// NVRTC already declares memcpy and memset in the global namespace (the device has no string
// functions such as strlen). With libcu++ available, this header adds its device versions of
// memmove, memcmp and memchr to the global namespace; libcu++'s <cuda/std/cstring> is small,
// and its memcpy and memset are NVRTC's.
#pragma once

#if defined(__CUDACC_RTC__)

#include "cj/std_config.h"

#if CJ_STD_LIBCUDACXX && __has_include(<cuda/std/cstring>)
#include <cuda/std/cstring>
using ::cuda::std::memmove;
using ::cuda::std::memcmp;
using ::cuda::std::memchr;
#define CJ_STD_HAVE_MEMMOVE_ 1
#endif

#endif  // __CUDACC_RTC__
