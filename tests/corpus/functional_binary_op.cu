// cj-corpus: name=binary_op_kernel args=f32[1024],f32[1024],f32[1024],i32
// Generic elementwise binary kernel parameterized by a standard function object.
#include <functional>
#include <type_traits>

template <typename T, typename Op>
__device__ __forceinline__ T apply_op(Op op, T a, T b) {
  return std::invoke(op, a, b);
}

template <typename T>
__global__ void binary_op_kernel(T* out, const T* a, const T* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  T s = apply_op(std::plus<T>(), a[i], b[i]);
  T p = apply_op(std::multiplies<>(), a[i], b[i]);
  out[i] = std::less<T>()(s, p) ? p : s;
  static_assert(std::is_arithmetic<T>::value, "arithmetic element types only");
}
