// torch_cudajit: what its C and C++ library headers for NVRTC (<cmath>, <limits>, ...) share.
//
// NVRTC ships no C or C++ library headers, so torch_cudajit provides small ones (<cmath>,
// <type_traits>, <cstdio>, ...) that map the standard names onto what NVRTC already knows (its
// built-in math functions, printf, memcpy, malloc) and onto libcu++ (cuda/std/...), which
// implements most of the C++ library for device code. This file decides whether libcu++ can be
// used: it needs C++17, and its headers are on the include path only where the CUDA headers that
// came with NVRTC include CCCL. It also holds the few type traits the self-contained headers
// (<cmath>) need, so that those do not pull in libcu++'s <type_traits>, which every kernel would
// then pay for in compile time.
#pragma once

#if defined(__CUDACC_RTC__)

#if !defined(CJ_STD_LIBCUDACXX)
#if __cplusplus >= 201703L && defined(__has_include)
#if __has_include(<cuda/std/version>)
#define CJ_STD_LIBCUDACXX 1
#endif
#endif
#endif
#if !defined(CJ_STD_LIBCUDACXX)
#define CJ_STD_LIBCUDACXX 0
#endif

namespace cj {
namespace std_detail {

// The traits hold their values as enumerators rather than static constexpr members: NVRTC emits
// a device global for every static constexpr data member of a class it instantiates, which
// would add symbols to every kernel.
template <bool CjValue> struct bool_ { enum : bool { value = CjValue }; };

template <bool CjValue, class CjT = void> struct enable_if {};
template <class CjT> struct enable_if<true, CjT> { typedef CjT type; };

template <class CjT> struct remove_cv { typedef CjT type; };
template <class CjT> struct remove_cv<const CjT> { typedef CjT type; };
template <class CjT> struct remove_cv<volatile CjT> { typedef CjT type; };
template <class CjT> struct remove_cv<const volatile CjT> { typedef CjT type; };

template <class CjT> struct is_integral_ : bool_<false> {};
template <> struct is_integral_<bool> : bool_<true> {};
template <> struct is_integral_<char> : bool_<true> {};
template <> struct is_integral_<signed char> : bool_<true> {};
template <> struct is_integral_<unsigned char> : bool_<true> {};
template <> struct is_integral_<wchar_t> : bool_<true> {};
template <> struct is_integral_<char16_t> : bool_<true> {};
template <> struct is_integral_<char32_t> : bool_<true> {};
template <> struct is_integral_<short> : bool_<true> {};
template <> struct is_integral_<unsigned short> : bool_<true> {};
template <> struct is_integral_<int> : bool_<true> {};
template <> struct is_integral_<unsigned int> : bool_<true> {};
template <> struct is_integral_<long> : bool_<true> {};
template <> struct is_integral_<unsigned long> : bool_<true> {};
template <> struct is_integral_<long long> : bool_<true> {};
template <> struct is_integral_<unsigned long long> : bool_<true> {};
template <class CjT> struct is_integral : is_integral_<typename remove_cv<CjT>::type> {};

template <class CjT> struct is_float_ : bool_<false> {};
template <> struct is_float_<float> : bool_<true> {};
template <class CjT> struct is_float : is_float_<typename remove_cv<CjT>::type> {};

template <class CjT> struct is_double_ : bool_<false> {};
template <> struct is_double_<double> : bool_<true> {};
template <class CjT> struct is_double : is_double_<typename remove_cv<CjT>::type> {};

/// An argument the <cmath> overloads take: an integer, float or double.
template <class CjT> struct is_math_arg {
  enum : bool { value = is_integral<CjT>::value || is_float<CjT>::value || is_double<CjT>::value };
};

/// True for the argument mixes of two- and three-argument math functions that NVRTC's float and
/// double built-ins leave ambiguous: float with double, or integers only. (C++14, no folds.)
template <class CjA, class CjB, class CjC = int> struct ambiguous_math_args {
  enum : bool {
    cj_any_float = is_float<CjA>::value || is_float<CjB>::value || is_float<CjC>::value,
    cj_any_double = is_double<CjA>::value || is_double<CjB>::value || is_double<CjC>::value,
    cj_all_integral =
        is_integral<CjA>::value && is_integral<CjB>::value && is_integral<CjC>::value,
    value = is_math_arg<CjA>::value && is_math_arg<CjB>::value && is_math_arg<CjC>::value &&
            ((cj_any_float && cj_any_double) || cj_all_integral)
  };
};

}  // namespace std_detail
}  // namespace cj

#endif  // __CUDACC_RTC__
