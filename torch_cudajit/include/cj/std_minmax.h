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

template <class CjT>
__host__ __device__ constexpr const CjT& min(const CjT& cj_a, const CjT& cj_b) {
  return cj_b < cj_a ? cj_b : cj_a;
}
template <class CjT, class CjCompare>
__host__ __device__ constexpr const CjT& min(const CjT& cj_a, const CjT& cj_b, CjCompare cj_comp) {
  return cj_comp(cj_b, cj_a) ? cj_b : cj_a;
}
template <class CjT>
__host__ __device__ constexpr CjT min(initializer_list<CjT> cj_values) {
  const CjT* cj_best = cj_values.begin();
  for (const CjT* cj_p = cj_values.begin() + 1; cj_p < cj_values.end(); ++cj_p)
    if (*cj_p < *cj_best) cj_best = cj_p;
  return *cj_best;
}
template <class CjT, class CjCompare>
__host__ __device__ constexpr CjT min(initializer_list<CjT> cj_values, CjCompare cj_comp) {
  const CjT* cj_best = cj_values.begin();
  for (const CjT* cj_p = cj_values.begin() + 1; cj_p < cj_values.end(); ++cj_p)
    if (cj_comp(*cj_p, *cj_best)) cj_best = cj_p;
  return *cj_best;
}

template <class CjT>
__host__ __device__ constexpr const CjT& max(const CjT& cj_a, const CjT& cj_b) {
  return cj_a < cj_b ? cj_b : cj_a;
}
template <class CjT, class CjCompare>
__host__ __device__ constexpr const CjT& max(const CjT& cj_a, const CjT& cj_b, CjCompare cj_comp) {
  return cj_comp(cj_a, cj_b) ? cj_b : cj_a;
}
template <class CjT>
__host__ __device__ constexpr CjT max(initializer_list<CjT> cj_values) {
  const CjT* cj_best = cj_values.begin();
  for (const CjT* cj_p = cj_values.begin() + 1; cj_p < cj_values.end(); ++cj_p)
    if (*cj_best < *cj_p) cj_best = cj_p;
  return *cj_best;
}
template <class CjT, class CjCompare>
__host__ __device__ constexpr CjT max(initializer_list<CjT> cj_values, CjCompare cj_comp) {
  const CjT* cj_best = cj_values.begin();
  for (const CjT* cj_p = cj_values.begin() + 1; cj_p < cj_values.end(); ++cj_p)
    if (cj_comp(*cj_best, *cj_p)) cj_best = cj_p;
  return *cj_best;
}

}  // namespace std

#endif  // __CUDACC_RTC__
