// torch_cudajit: std::min and std::max for NVRTC, which ships no C++ library headers.
//
// <algorithm> is where these belong, but libstdc++'s <cmath> and nvcc's implicit includes make
// them visible without it, and real CUDA code relies on that. libcu++ has them too, but only
// behind its <type_traits>, which would make every kernel (the implicit prelude includes <cmath>)
// slower to compile, so they are written out here; <algorithm> maps everything else onto
// libcu++. They are constexpr, like the standard ones since C++14. CUDA's own ::min and ::max
// (non-templates) stay as they are and win overload resolution for their exact argument types.
#pragma once

#if defined(__CUDACC_RTC__)

namespace std {

template <class T>
__host__ __device__ constexpr const T& min(const T& a, const T& b) { return b < a ? b : a; }
template <class T, class Compare>
__host__ __device__ constexpr const T& min(const T& a, const T& b, Compare comp) { return comp(b, a) ? b : a; }
template <class T>
__host__ __device__ constexpr T min(initializer_list<T> values) {
  const T* best = values.begin();
  for (const T* p = values.begin() + 1; p < values.end(); ++p)
    if (*p < *best) best = p;
  return *best;
}
template <class T, class Compare>
__host__ __device__ constexpr T min(initializer_list<T> values, Compare comp) {
  const T* best = values.begin();
  for (const T* p = values.begin() + 1; p < values.end(); ++p)
    if (comp(*p, *best)) best = p;
  return *best;
}

template <class T>
__host__ __device__ constexpr const T& max(const T& a, const T& b) { return a < b ? b : a; }
template <class T, class Compare>
__host__ __device__ constexpr const T& max(const T& a, const T& b, Compare comp) { return comp(a, b) ? b : a; }
template <class T>
__host__ __device__ constexpr T max(initializer_list<T> values) {
  const T* best = values.begin();
  for (const T* p = values.begin() + 1; p < values.end(); ++p)
    if (*best < *p) best = p;
  return *best;
}
template <class T, class Compare>
__host__ __device__ constexpr T max(initializer_list<T> values, Compare comp) {
  const T* best = values.begin();
  for (const T* p = values.begin() + 1; p < values.end(); ++p)
    if (comp(*best, *p)) best = p;
  return *best;
}

}  // namespace std

#endif  // __CUDACC_RTC__
