// cj-corpus: name=scale_cast args=f16[256],f16[256],f32
// Templated elementwise kernel that picks its accumulation type with type traits.
#include <cuda_fp16.h>
#include <type_traits>

template <typename T>
using acc_type_t = typename std::conditional<std::is_same<T, __half>::value, float,
                                             typename std::conditional<std::is_same<T, double>::value, double, float>::type>::type;

template <typename T, typename std::enable_if<std::is_floating_point<T>::value, int>::type = 0>
__device__ __forceinline__ acc_type_t<T> to_acc(T v) { return static_cast<acc_type_t<T>>(v); }

template <typename T, typename std::enable_if<!std::is_floating_point<T>::value, int>::type = 0>
__device__ __forceinline__ acc_type_t<T> to_acc(T v) { return __half2float(v); }

template <typename T>
__global__ void scale_cast(T* __restrict__ out, const T* __restrict__ in, float alpha) {
  static_assert(std::is_trivially_copyable<T>::value, "elements are copied bitwise");
  using acc_t = acc_type_t<T>;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  acc_t v = to_acc(in[i]) * static_cast<acc_t>(alpha);
  if constexpr (std::is_same_v<T, __half>) {
    out[i] = __float2half_rn(v);
  } else {
    out[i] = static_cast<T>(v);
  }
}
