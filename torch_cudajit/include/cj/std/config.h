// torch_cudajit: shared configuration of the C and C++ library headers in this folder's parent.
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

template <bool B, class T = void> struct enable_if {};
template <class T> struct enable_if<true, T> { typedef T type; };

template <class T> struct remove_cv { typedef T type; };
template <class T> struct remove_cv<const T> { typedef T type; };
template <class T> struct remove_cv<volatile T> { typedef T type; };
template <class T> struct remove_cv<const volatile T> { typedef T type; };

template <class T> struct is_integral_ { static constexpr bool value = false; };
template <> struct is_integral_<bool> { static constexpr bool value = true; };
template <> struct is_integral_<char> { static constexpr bool value = true; };
template <> struct is_integral_<signed char> { static constexpr bool value = true; };
template <> struct is_integral_<unsigned char> { static constexpr bool value = true; };
template <> struct is_integral_<wchar_t> { static constexpr bool value = true; };
template <> struct is_integral_<char16_t> { static constexpr bool value = true; };
template <> struct is_integral_<char32_t> { static constexpr bool value = true; };
template <> struct is_integral_<short> { static constexpr bool value = true; };
template <> struct is_integral_<unsigned short> { static constexpr bool value = true; };
template <> struct is_integral_<int> { static constexpr bool value = true; };
template <> struct is_integral_<unsigned int> { static constexpr bool value = true; };
template <> struct is_integral_<long> { static constexpr bool value = true; };
template <> struct is_integral_<unsigned long> { static constexpr bool value = true; };
template <> struct is_integral_<long long> { static constexpr bool value = true; };
template <> struct is_integral_<unsigned long long> { static constexpr bool value = true; };
template <class T> struct is_integral : is_integral_<typename remove_cv<T>::type> {};

template <class T> struct is_float_ { static constexpr bool value = false; };
template <> struct is_float_<float> { static constexpr bool value = true; };
template <class T> struct is_float : is_float_<typename remove_cv<T>::type> {};

template <class T> struct is_double_ { static constexpr bool value = false; };
template <> struct is_double_<double> { static constexpr bool value = true; };
template <class T> struct is_double : is_double_<typename remove_cv<T>::type> {};

/// An argument the <cmath> overloads take: an integer, float or double.
template <class T> struct is_math_arg {
  static constexpr bool value = is_integral<T>::value || is_float<T>::value || is_double<T>::value;
};

/// True for the argument mixes of two- and three-argument math functions that NVRTC's float and
/// double built-ins leave ambiguous: float with double, or integers only. (C++14, no folds.)
template <class A, class B, class C = int> struct ambiguous_math_args {
  static constexpr bool any_float = is_float<A>::value || is_float<B>::value || is_float<C>::value;
  static constexpr bool any_double = is_double<A>::value || is_double<B>::value || is_double<C>::value;
  static constexpr bool all_integral = is_integral<A>::value && is_integral<B>::value && is_integral<C>::value;
  static constexpr bool value = is_math_arg<A>::value && is_math_arg<B>::value && is_math_arg<C>::value &&
                                ((any_float && any_double) || all_integral);
};

}  // namespace std_detail
}  // namespace cj

#endif  // __CUDACC_RTC__
