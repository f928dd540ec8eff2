// torch_cudajit device header: cj::Array, fixed-width integers, complex numbers and the
// compile-time hooks the plugin uses to deduce and reflect kernel signatures.
// It is included automatically at the top of every kernel source compiled by torch_cudajit.
#pragma once

#if !defined(__CUDACC_RTC__)
#include <cstdint>
#else
// NVRTC ships no C library headers; give kernels the fixed-width integer names they expect.
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
namespace std {
using ::int8_t; using ::uint8_t; using ::int16_t; using ::uint16_t;
using ::int32_t; using ::uint32_t; using ::int64_t; using ::uint64_t;
}
#endif

#if defined(CJ_HAVE_FP16)
#include <cuda_fp16.h>
#endif
#if defined(CJ_HAVE_BF16)
#include <cuda_bf16.h>
#endif

#if defined(CJ_DEBUG)
#define CJ_BOUNDS_CHECK(cond, dim, idx, extent) \
  do { if (!(cond)) ::cj::detail::report_bounds(__FILE__, __LINE__, dim, idx, extent); } while (0)
#else
#define CJ_BOUNDS_CHECK(cond, dim, idx, extent) do { } while (0)
#endif

namespace cj {

/// Layout tag of an Array. Bit 0: contiguous (row-major). Later bits are reserved for
/// properties such as 16-byte alignment and 32-bit indexability.
template <int Flags>
struct Layout {
  static constexpr int flags = Flags;
  static constexpr bool contiguous = (Flags & 1) != 0;
};
using Strided = Layout<0>;
using Contiguous = Layout<1>;

namespace detail {
#if defined(CJ_DEBUG)
__device__ __noinline__ inline void report_bounds(const char* file, int line, int dim, long long idx,
                                                  long long extent) {
  printf("torch_cudajit: index %lld out of bounds for dimension %d with size %lld at %s:%d "
         "(block (%d,%d,%d), thread (%d,%d,%d))\n",
         idx, dim, extent, file, line, blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y,
         threadIdx.z);
  __trap();
}
#endif
}  // namespace detail

/// A view of a torch tensor inside a kernel: data pointer, shape and strides in elements.
/// Contiguous arrays (Layout = cj::Contiguous) index with row-major strides derived from the
/// shape, strided arrays with the runtime strides.
template <class T, int N, class L = Strided>
struct Array {
  using value_type = T;
  using layout = L;
  static constexpr int rank = N;

  T* data_;
  long long shape_[N];
  long long strides_[N];

  __device__ __forceinline__ T* data() const { return data_; }
  __device__ __forceinline__ long long size(int d) const { return shape_[d]; }
  __device__ __forceinline__ long long stride(int d) const { return strides_[d]; }
  __device__ __forceinline__ long long numel() const {
    long long n = 1;
#pragma unroll
    for (int d = 0; d < N; ++d) n *= shape_[d];
    return n;
  }

  template <class... I>
  __device__ __forceinline__ long long offset(I... idx) const {
    static_assert(sizeof...(I) == N, "cj::Array: number of indices must equal the rank");
    const long long i[N] = {static_cast<long long>(idx)...};
    long long off = 0;
    if constexpr (L::contiguous) {
#pragma unroll
      for (int d = 0; d < N; ++d) {
        CJ_BOUNDS_CHECK(i[d] >= 0 && i[d] < shape_[d], d, i[d], shape_[d]);
        off = off * shape_[d] + i[d];
      }
    } else {
#pragma unroll
      for (int d = 0; d < N; ++d) {
        CJ_BOUNDS_CHECK(i[d] >= 0 && i[d] < shape_[d], d, i[d], shape_[d]);
        off += i[d] * strides_[d];
      }
    }
    return off;
  }

  template <class... I>
  __device__ __forceinline__ T& operator()(I... idx) const { return data_[offset(idx...)]; }

  /// Rank-1 element access; for a contiguous array this is a plain pointer index.
  __device__ __forceinline__ T& operator[](long long i) const {
    static_assert(N == 1, "cj::Array::operator[] is for rank-1 arrays; use operator()(i, j, ...)");
    return (*this)(i);
  }
};

/// Rank-0 arrays (0-d tensors) carry only the data pointer.
template <class T, class L>
struct Array<T, 0, L> {
  using value_type = T;
  using layout = L;
  static constexpr int rank = 0;
  T* data_;
  __device__ __forceinline__ T* data() const { return data_; }
  __device__ __forceinline__ long long numel() const { return 1; }
  __device__ __forceinline__ T& operator()() const { return *data_; }
};

/// complex64 / complex128 element type, layout-compatible with torch's complex dtypes.
template <class T>
struct alignas(2 * sizeof(T)) complex {
  T re, im;
  complex() = default;
  __host__ __device__ constexpr complex(T r, T i = T(0)) : re(r), im(i) {}
  /// Converts between precisions (a Python complex arrives as complex<double>).
  template <class U>
  __host__ __device__ constexpr complex(const complex<U>& o) : re(T(o.re)), im(T(o.im)) {}
  __host__ __device__ constexpr T real() const { return re; }
  __host__ __device__ constexpr T imag() const { return im; }
  friend __host__ __device__ complex operator+(complex a, complex b) { return {a.re + b.re, a.im + b.im}; }
  friend __host__ __device__ complex operator-(complex a, complex b) { return {a.re - b.re, a.im - b.im}; }
  friend __host__ __device__ complex operator*(complex a, complex b) {
    return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
  }
  friend __host__ __device__ bool operator==(complex a, complex b) { return a.re == b.re && a.im == b.im; }
};

namespace detail {
// Everything below is used by the plugin's generated code, never by kernels.

template <int P> struct priority : priority<P - 1> {};
template <> struct priority<0> {};

/// Makes a parameter a non-deduced context, so that scalars follow the tensors' types.
template <class T> struct nondeduced { using type = T; };

template <class T> __device__ T&& declval();

template <int I, class... P> struct type_at;
template <class H, class... P> struct type_at<0, H, P...> { using type = H; };
template <int I, class H, class... P> struct type_at<I, H, P...> : type_at<I - 1, P...> {};

/// A resolved kernel signature.
template <class... P>
struct Sig {
  using fn = void (*)(P...);
  template <int I> using arg = typename type_at<I, P...>::type;
};

// Type codes shared with the host (csrc/specialization.h: TypeCode).
template <class T> struct type_code { static constexpr int value = -1; };
template <class T> struct type_code<T*> { static constexpr int value = -3; };
template <class T, int N, class L> struct type_code<::cj::Array<T, N, L>> { static constexpr int value = -2; };
template <> struct type_code<bool> { static constexpr int value = 0; };
template <> struct type_code<signed char> { static constexpr int value = 1; };
template <> struct type_code<char> { static constexpr int value = 1; };
template <> struct type_code<unsigned char> { static constexpr int value = 2; };
template <> struct type_code<short> { static constexpr int value = 3; };
template <> struct type_code<unsigned short> { static constexpr int value = 4; };
template <> struct type_code<int> { static constexpr int value = 5; };
template <> struct type_code<unsigned int> { static constexpr int value = 6; };
template <> struct type_code<long> { static constexpr int value = 7; };
template <> struct type_code<long long> { static constexpr int value = 7; };
template <> struct type_code<unsigned long> { static constexpr int value = 8; };
template <> struct type_code<unsigned long long> { static constexpr int value = 8; };
template <> struct type_code<float> { static constexpr int value = 11; };
template <> struct type_code<double> { static constexpr int value = 12; };
template <> struct type_code<::cj::complex<float>> { static constexpr int value = 13; };
template <> struct type_code<::cj::complex<double>> { static constexpr int value = 14; };
#if defined(CJ_HAVE_FP16)
template <> struct type_code<__half> { static constexpr int value = 9; };
#endif
#if defined(CJ_HAVE_BF16)
template <> struct type_code<__nv_bfloat16> { static constexpr int value = 10; };
#endif
template <class T> struct type_code<const T> : type_code<T> {};

/// Its lowered (mangled) name tells the host a parameter's type code, size and alignment.
template <long long Code, unsigned long long Size, unsigned long long Align>
__device__ int probe = 0;

}  // namespace detail
}  // namespace cj
