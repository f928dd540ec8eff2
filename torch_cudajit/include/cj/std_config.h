// torch_cudajit: shared configuration of its C and C++ library headers (include/cmath, ...).
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
template <bool B> struct bool_ { enum : bool { value = B }; };

template <bool B, class T = void> struct enable_if {};
template <class T> struct enable_if<true, T> { typedef T type; };

template <class T> struct remove_cv { typedef T type; };
template <class T> struct remove_cv<const T> { typedef T type; };
template <class T> struct remove_cv<volatile T> { typedef T type; };
template <class T> struct remove_cv<const volatile T> { typedef T type; };

template <class T> struct is_integral_ : bool_<false> {};
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
template <class T> struct is_integral : is_integral_<typename remove_cv<T>::type> {};

template <class T> struct is_float_ : bool_<false> {};
template <> struct is_float_<float> : bool_<true> {};
template <class T> struct is_float : is_float_<typename remove_cv<T>::type> {};

template <class T> struct is_double_ : bool_<false> {};
template <> struct is_double_<double> : bool_<true> {};
template <class T> struct is_double : is_double_<typename remove_cv<T>::type> {};

/// An argument the <cmath> overloads take: an integer, float or double.
template <class T> struct is_math_arg {
  enum : bool { value = is_integral<T>::value || is_float<T>::value || is_double<T>::value };
};

/// True for the argument mixes of two- and three-argument math functions that NVRTC's float and
/// double built-ins leave ambiguous: float with double, or integers only. (C++14, no folds.)
template <class A, class B, class C = int> struct ambiguous_math_args {
  enum : bool {
    any_float = is_float<A>::value || is_float<B>::value || is_float<C>::value,
    any_double = is_double<A>::value || is_double<B>::value || is_double<C>::value,
    all_integral = is_integral<A>::value && is_integral<B>::value && is_integral<C>::value,
    value = is_math_arg<A>::value && is_math_arg<B>::value && is_math_arg<C>::value &&
            ((any_float && any_double) || all_integral)
  };
};

}  // namespace std_detail
}  // namespace cj

#endif  // __CUDACC_RTC__
