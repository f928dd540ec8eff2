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

// CUDA's half types. The plugin defines these macros for a source that can use them (it names
// them, a float16 or bfloat16 argument instantiates it, or it includes headers of its own):
// the two headers are a large part of a small kernel's compile.
#if defined(CJ_HAVE_FP16)
#include <cuda_fp16.h>
#endif
#if defined(CJ_HAVE_BF16)
#include <cuda_bf16.h>
#endif

// Constants and layouts the plugin shares with this header (type codes, layout flags, the debug
// record, ...).
#include "abi.h"

#if defined(__CUDACC_RTC__)
// What nvcc's implicit includes give every .cu file (M_PI, INFINITY, FLT_MAX, std::sqrt, ...).
#include "prelude.cuh"
#endif

#if defined(CJ_DEBUG)
// Debug mode (jit(..., debug=True)): the first failed bounds check or cj_assert of a launch is
// recorded here, and the host raises it as a Python exception after the launch. Nothing traps,
// so the CUDA context stays usable. The record's layout is cj::abi::DebugRecord (cj/abi.h).
typedef ::cj::abi::DebugRecord CjDebugRecord;
// Defined once, by the kernel's own file; files linked in (link=[...]) only declare them.
#if defined(CJ_LINKED_FILE)
extern "C" {
extern __device__ CjDebugRecord cj_debug_record;
extern __device__ __align__(16) unsigned long long cj_debug_scratch[4];
}
#else
extern "C" {
__device__ CjDebugRecord cj_debug_record;
// Where an out-of-bounds access goes instead of outside the array (aligned for any element).
__device__ __align__(16) unsigned long long cj_debug_scratch[4];
}
#endif

namespace cj {
namespace detail {

__device__ __forceinline__ void debug_copy(char* dst, const char* src, int capacity) {
  int i = 0;
  for (; src && src[i] && i < capacity - 1; ++i) dst[i] = src[i];
  dst[i] = 0;
}

// Claims the record for this thread if nothing failed before in this launch.
__device__ __noinline__ inline bool debug_claim(unsigned int kind, const char* file, unsigned int line) {
  if (atomicCAS(&cj_debug_record.kind, 0u, kind) != 0u) return false;
  CjDebugRecord& r = cj_debug_record;
  r.line = line;
  r.thread[0] = threadIdx.x; r.thread[1] = threadIdx.y; r.thread[2] = threadIdx.z;
  r.block[0] = blockIdx.x; r.block[1] = blockIdx.y; r.block[2] = blockIdx.z;
  debug_copy(r.file, file, sizeof(r.file));
  return true;
}

__device__ __noinline__ inline void report_bounds(const char* file, unsigned int line, int dim, int rank,
                                                  long long index, const long long* shape) {
  if (!debug_claim(::cj::abi::kDebugBounds, file, line)) return;
  CjDebugRecord& r = cj_debug_record;
  r.dim = dim;
  r.rank = rank;
  r.index = index;
  for (int d = 0; d < rank && d < ::cj::abi::kDebugShapeDims; ++d) r.shape[d] = shape[d];
  r.message[0] = 0;
}

__device__ __noinline__ inline void report_assert(const char* condition, const char* message,
                                                  const char* file, unsigned int line) {
  if (!debug_claim(::cj::abi::kDebugAssert, file, line)) return;
  CjDebugRecord& r = cj_debug_record;
  r.rank = 0;
  char* out = r.message;
  int n = 0;
  const char separator[2] = {::cj::abi::kDebugMessageSeparator, 0};
  const char* parts[3] = {condition, separator, message};
  for (const char* p : parts)
    for (int i = 0; p && p[i] && n < (int)sizeof(r.message) - 1; ++i) out[n++] = p[i];
  out[n] = 0;
}

/// An index that remembers where it was written: the default arguments are evaluated at the
/// caller's line, so a failed bounds check names the user's file and line.
struct Index {
  long long value;
  const char* file;
  unsigned int line;
  template <class I>
  __device__ __forceinline__ Index(I i, const char* f = __builtin_FILE(), unsigned int l = __builtin_LINE())
      : value(static_cast<long long>(i)), file(f), line(l) {}
};

/// A flat element position for Array::load/store: in debug mode it remembers the caller's file
/// and line like Index.
using FlatIndex = Index;
__device__ __forceinline__ long long flat_value(const Index& cj_i) { return cj_i.value; }

/// Debug mode: a vector access must start at a multiple of its width and stay inside the array.
__device__ __noinline__ inline bool check_vector(const Index& cj_at, int cj_width, long long cj_numel) {
  if (cj_at.value >= 0 && cj_at.value % cj_width == 0 && cj_at.value + cj_width <= cj_numel) return true;
  report_bounds(cj_at.file, cj_at.line, 0, 1, cj_at.value, &cj_numel);
  return false;
}

}  // namespace detail
}  // namespace cj

/// Checks a condition in debug mode and reports the first failure of a launch as a Python
/// exception naming the kernel, file, line, thread and block. Compiles to nothing otherwise
/// (the condition is not evaluated).
#define cj_assert(cond, msg) \
  do { if (!(cond)) ::cj::detail::report_assert(#cond, msg, __FILE__, __LINE__); } while (0)
#else
#define cj_assert(cond, msg) do { } while (0)
#endif

namespace cj {

/// Layout tag of an Array, set by the plugin from each tensor argument (cj/abi.h: LayoutBits):
/// contiguous (row-major), a 16-byte aligned data pointer, and every element's offset in a
/// 32-bit int, so that indexing uses 32-bit arithmetic.
template <int Flags>
struct Layout {
  static constexpr int flags = Flags;
  static constexpr bool contiguous = (Flags & ::cj::abi::kLayoutContiguous) != 0;
  static constexpr bool aligned16 = (Flags & ::cj::abi::kLayoutAligned16) != 0;
  static constexpr bool index32 = (Flags & ::cj::abi::kLayoutIndex32) != 0;
};
using Strided = Layout<0>;
using Contiguous = Layout<1>;

/// V elements of type T as one aligned unit: what Array::load and Array::store move in a single
/// memory access.
template <class CjT, int CjV>
struct alignas(sizeof(CjT) * CjV <= ::cj::abi::kVectorBytes ? sizeof(CjT) * CjV : ::cj::abi::kVectorBytes) Vec {
  CjT v[CjV];
  __device__ __forceinline__ CjT& operator[](int cj_k) { return v[cj_k]; }
  __device__ __forceinline__ const CjT& operator[](int cj_k) const { return v[cj_k]; }
};

namespace detail {
template <bool CjCond, class CjT = void> struct enable_if {};
template <class CjT> struct enable_if<true, CjT> { using type = CjT; };
template <class CjT> struct remove_const { using type = CjT; };
template <class CjT> struct remove_const<const CjT> { using type = CjT; };
#if !defined(CJ_DEBUG)
using FlatIndex = long long;
__device__ __forceinline__ long long flat_value(long long cj_i) { return cj_i; }
#endif
template <bool CjSmall> struct offset_type { using type = long long; };
template <> struct offset_type<true> { using type = int; };
/// Whether V elements of T at a multiple of V from a 16-byte aligned pointer form one access.
template <class CjT, int CjV>
__device__ constexpr bool vector_ok(bool cj_aligned16) {
  return cj_aligned16 && CjV > 1 && (sizeof(CjT) * CjV == 2 || sizeof(CjT) * CjV == 4 ||
                                     sizeof(CjT) * CjV == 8 || sizeof(CjT) * CjV == ::cj::abi::kVectorBytes);
}
/// Whether a run of V elements of T moves as vector accesses: V * sizeof(T) is 2, 4 or 8 bytes
/// or a multiple of 16.
template <class CjT, int CjV>
__device__ constexpr bool run_vector() {
  constexpr int kBytes = static_cast<int>(sizeof(CjT)) * CjV;
  return kBytes == 2 || kBytes == 4 || kBytes == 8 || kBytes % ::cj::abi::kVectorBytes == 0;
}
/// Whether V elements of T at `p` form whole vector accesses: run_vector, and `p` is aligned to
/// the access (at most 16 bytes).
template <class CjT, int CjV>
__device__ __forceinline__ bool run_aligned(const void* cj_p) {
  constexpr int kBytes = static_cast<int>(sizeof(CjT)) * CjV;
  constexpr int kAlign = kBytes < ::cj::abi::kVectorBytes ? kBytes : ::cj::abi::kVectorBytes;
  if constexpr (run_vector<CjT, CjV>())
    return (reinterpret_cast<unsigned long long>(cj_p) & (kAlign - 1)) == 0;
  else
    return false;
}
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

  /// The element offset of an index: row-major from the shape for contiguous arrays, from the
  /// strides otherwise; in 32-bit arithmetic when the layout says every offset fits.
  template <class... I>
  __device__ __forceinline__ long long offset(I... idx) const {
    static_assert(sizeof...(I) == N, "cj::Array: number of indices must equal the rank");
    using CjOff = typename detail::offset_type<L::index32>::type;
    const CjOff i[N] = {static_cast<CjOff>(idx)...};
    CjOff off = 0;
    if constexpr (L::contiguous) {
#pragma unroll
      for (int d = 0; d < N; ++d) off = off * static_cast<CjOff>(shape_[d]) + i[d];
    } else {
#pragma unroll
      for (int d = 0; d < N; ++d) off += i[d] * static_cast<CjOff>(strides_[d]);
    }
    return off;
  }

  /// The offset of the element at position `flat` in row-major order (the order of numel()).
  __device__ __forceinline__ long long flat_offset(long long cj_flat) const {
    using CjOff = typename detail::offset_type<L::index32>::type;
    if constexpr (L::contiguous) {
      return cj_flat;
    } else {
      CjOff cj_rest = static_cast<CjOff>(cj_flat), cj_off = 0;
#pragma unroll
      for (int d = N - 1; d >= 0; --d) {
        const CjOff cj_n = static_cast<CjOff>(shape_[d]);
        cj_off += (cj_rest % cj_n) * static_cast<CjOff>(strides_[d]);
        cj_rest /= cj_n;
      }
      return cj_off;
    }
  }

  /// The stride of the last dimension: 1 for a contiguous array, known when compiling.
  __device__ __forceinline__ long long inner_stride() const {
    if constexpr (L::contiguous) {
      return 1;
    } else {
      return strides_[N - 1];
    }
  }

  /// The offset of row-major position `flat`, whose coordinates in this array's shape are
  /// `coord` (cj::unravel): `flat` itself for a contiguous array, coord . strides otherwise.
  /// Kernels over several arrays of one shape unravel each position once for all of them.
  __device__ __forceinline__ long long offset_at(long long cj_flat, const long long (&cj_coord)[N]) const {
    using CjOff = typename detail::offset_type<L::index32>::type;
    if constexpr (L::contiguous) {
      return cj_flat;
    } else {
      CjOff cj_off = 0;
#pragma unroll
      for (int d = 0; d < N; ++d) cj_off += static_cast<CjOff>(cj_coord[d]) * static_cast<CjOff>(strides_[d]);
      return cj_off;
    }
  }

  /// V consecutive elements starting at row-major position `flat` (a multiple of V), for a
  /// contiguous array: one V * sizeof(T)-byte access when the layout says the data is 16-byte
  /// aligned and V * sizeof(T) is 2, 4, 8 or 16, else V scalar accesses.
  template <int CjV>
  __device__ __forceinline__ Vec<typename detail::remove_const<T>::type, CjV> load(detail::FlatIndex cj_at) const {
    static_assert(L::contiguous, "cj::Array::load needs a contiguous array");
    using CjE = typename detail::remove_const<T>::type;
    const long long cj_flat = detail::flat_value(cj_at);
#if defined(CJ_DEBUG)
    if (!detail::check_vector(cj_at, CjV, numel())) return Vec<CjE, CjV>{};
#endif
    return load_consecutive<CjV, detail::vector_ok<CjE, CjV>(L::aligned16)>(cj_flat);
  }

  /// Stores V consecutive elements at row-major position `flat` (see load).
  template <int CjV>
  __device__ __forceinline__ void store(detail::FlatIndex cj_at, const Vec<T, CjV>& cj_v) const {
    static_assert(L::contiguous, "cj::Array::store needs a contiguous array");
    const long long cj_flat = detail::flat_value(cj_at);
#if defined(CJ_DEBUG)
    if (!detail::check_vector(cj_at, CjV, numel())) return;
#endif
    store_consecutive<CjV, detail::vector_ok<T, CjV>(L::aligned16)>(cj_flat, cj_v);
  }

  /// A run: the `len` elements (at most V) at offset `off`, `off + inner_stride()`, ... along the
  /// last dimension, as cj::for_each_run hands them out. One V-element access when the run is
  /// whole, the last stride is 1 and the address is aligned to the access; one load given to
  /// every element when the last stride is 0 (an expanded dimension); element by element
  /// otherwise. Elements past `len` are zero. Offsets are not checked, as with data().
  template <int CjV>
  __device__ __forceinline__ Vec<typename detail::remove_const<T>::type, CjV> load_run(long long cj_off, int cj_len) const {
    using CjE = typename detail::remove_const<T>::type;
    const long long cj_step = inner_stride();
    Vec<CjE, CjV> cj_v;
    if (cj_len == CjV && cj_step == 1 && detail::run_aligned<CjE, CjV>(data_ + cj_off))
      return *reinterpret_cast<const Vec<CjE, CjV>*>(data_ + cj_off);
    if (cj_step == 0 && cj_len > 0) {
      const CjE cj_x = data_[cj_off];
#pragma unroll
      for (int cj_k = 0; cj_k < CjV; ++cj_k) cj_v[cj_k] = cj_x;
      return cj_v;
    }
#pragma unroll
    for (int cj_k = 0; cj_k < CjV; ++cj_k) cj_v[cj_k] = cj_k < cj_len ? data_[cj_off + cj_k * cj_step] : CjE();
    return cj_v;
  }

  /// Stores the first `len` elements of `v` as the run at `off` (see load_run).
  template <int CjV>
  __device__ __forceinline__ void store_run(long long cj_off, const Vec<T, CjV>& cj_v, int cj_len) const {
    const long long cj_step = inner_stride();
    if (cj_len == CjV && cj_step == 1 && detail::run_aligned<T, CjV>(data_ + cj_off)) {
      *reinterpret_cast<Vec<T, CjV>*>(data_ + cj_off) = cj_v;
      return;
    }
#pragma unroll
    for (int cj_k = 0; cj_k < CjV; ++cj_k)
      if (cj_k < cj_len) data_[cj_off + cj_k * cj_step] = cj_v[cj_k];
  }

  /// The whole run of V elements at `off`, for a caller that knows the last stride is 1 and
  /// `off` a multiple of V (a contiguous array whose last size is a multiple of V, or a view
  /// whose other strides are): one V-element access when the layout says the data pointer is
  /// 16-byte aligned (16-byte accesses for a run longer than that), without load_run's checks
  /// of the stride, the length and the address; element by element otherwise. Debug mode checks
  /// the stride and the offset.
  template <int CjV>
  __device__ __forceinline__ Vec<typename detail::remove_const<T>::type, CjV> load_aligned_run(long long cj_off) const {
    using CjE = typename detail::remove_const<T>::type;
#if defined(CJ_DEBUG)
    cj_assert(inner_stride() == 1 && cj_off % CjV == 0,
              "cj::Array::load_aligned_run: the last stride is not 1 or the offset not a multiple of V");
#endif
    return load_consecutive<CjV, L::aligned16 && detail::run_vector<CjE, CjV>()>(cj_off);
  }

  /// Stores `v` as the whole run at `off` (see load_aligned_run).
  template <int CjV>
  __device__ __forceinline__ void store_aligned_run(long long cj_off, const Vec<T, CjV>& cj_v) const {
#if defined(CJ_DEBUG)
    cj_assert(inner_stride() == 1 && cj_off % CjV == 0,
              "cj::Array::store_aligned_run: the last stride is not 1 or the offset not a multiple of V");
#endif
    store_consecutive<CjV, L::aligned16 && detail::run_vector<T, CjV>()>(cj_off, cj_v);
  }

  /// (load, load_aligned_run) V consecutive elements at offset `off`: one access where the
  /// caller has established that it is a vector access, V element accesses otherwise.
  template <int CjV, bool CjVector>
  __device__ __forceinline__ Vec<typename detail::remove_const<T>::type, CjV> load_consecutive(long long cj_off) const {
    using CjE = typename detail::remove_const<T>::type;
    if constexpr (CjVector) {
      return *reinterpret_cast<const Vec<CjE, CjV>*>(data_ + cj_off);
    } else {
      Vec<CjE, CjV> cj_v;
#pragma unroll
      for (int cj_k = 0; cj_k < CjV; ++cj_k) cj_v[cj_k] = data_[cj_off + cj_k];
      return cj_v;
    }
  }

  /// (store, store_aligned_run) Stores `v` as the V consecutive elements at `off` (see
  /// load_consecutive).
  template <int CjV, bool CjVector>
  __device__ __forceinline__ void store_consecutive(long long cj_off, const Vec<T, CjV>& cj_v) const {
    if constexpr (CjVector) {
      *reinterpret_cast<Vec<T, CjV>*>(data_ + cj_off) = cj_v;
    } else {
#pragma unroll
      for (int cj_k = 0; cj_k < CjV; ++cj_k) data_[cj_off + cj_k] = cj_v[cj_k];
    }
  }

#if !defined(CJ_DEBUG)
  template <class... I>
  __device__ __forceinline__ T& operator()(I... idx) const { return data_[offset(idx...)]; }

  /// Rank-1 element access; for a contiguous array this is a plain pointer index.
  __device__ __forceinline__ T& operator[](long long i) const {
    static_assert(N == 1, "cj::Array::operator[] is for rank-1 arrays; use operator()(i, j, ...)");
    return (*this)(i);
  }
#else
  // Debug mode: every index is checked against the shape. A failure is recorded with the
  // caller's file and line (see detail::Index) and the access goes to a scratch word instead.
  __device__ T& checked(const detail::Index* idx) const {
    long long off = 0;
    for (int d = 0; d < N; ++d) {
      if (idx[d].value < 0 || idx[d].value >= shape_[d]) {
        detail::report_bounds(idx[d].file, idx[d].line, d, N, idx[d].value, shape_);
        return *reinterpret_cast<T*>(cj_debug_scratch);
      }
      off = L::contiguous ? off * shape_[d] + idx[d].value : off + idx[d].value * strides_[d];
    }
    return data_[off];
  }
  __device__ T& operator[](detail::Index i) const {
    static_assert(N == 1, "cj::Array::operator[] is for rank-1 arrays; use operator()(i, j, ...)");
    return checked(&i);
  }
  __device__ T& operator()(detail::Index i0) const {
    static_assert(N == 1, "cj::Array: number of indices must equal the rank");
    return checked(&i0);
  }
  __device__ T& operator()(detail::Index i0, detail::Index i1) const {
    static_assert(N == 2, "cj::Array: number of indices must equal the rank");
    const detail::Index i[2] = {i0, i1};
    return checked(i);
  }
  __device__ T& operator()(detail::Index i0, detail::Index i1, detail::Index i2) const {
    static_assert(N == 3, "cj::Array: number of indices must equal the rank");
    const detail::Index i[3] = {i0, i1, i2};
    return checked(i);
  }
  __device__ T& operator()(detail::Index i0, detail::Index i1, detail::Index i2, detail::Index i3) const {
    static_assert(N == 4, "cj::Array: number of indices must equal the rank");
    const detail::Index i[4] = {i0, i1, i2, i3};
    return checked(i);
  }
  template <class... I, class = typename detail::enable_if<(sizeof...(I) > 4)>::type>
  __device__ T& operator()(I... idx) const {
    static_assert(sizeof...(I) == N, "cj::Array: number of indices must equal the rank");
    const detail::Index i[N] = {detail::Index(idx, "<rank > 4 index>", 0)...};
    return checked(i);
  }
#endif
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

// The argument bytes the host packs for a cj::Array (cj/abi.h).
namespace detail {
using array3 = Array<float, 3>;
}  // namespace detail
static_assert(sizeof(Array<float, 0>) == ::cj::abi::array_bytes(0) &&
                  sizeof(detail::array3) == ::cj::abi::array_bytes(3) &&
                  CJ_ABI_OFFSETOF(detail::array3, shape_) == ::cj::abi::kArrayShapeOffset &&
                  CJ_ABI_OFFSETOF(detail::array3, strides_) == ::cj::abi::array_strides_offset(3),
              "cj::Array: its layout differs from the bytes the host packs (cj/abi.h)");

namespace detail {
template <class... CjT>
__device__ constexpr int max_size() {
  int cj_m = 1;
  ((cj_m = static_cast<int>(sizeof(CjT)) > cj_m ? static_cast<int>(sizeof(CjT)) : cj_m), ...);
  return cj_m;
}
/// out_vec[k] = f(in_vecs[k]...): the loads are the call's arguments, so they are all issued
/// before the first use.
template <class CjO, int CjV, class CjF, class... CjVs>
__device__ __forceinline__ Vec<CjO, CjV> apply_lanes(CjF& cj_f, const CjVs&... cj_vs) {
  Vec<CjO, CjV> cj_r;
#pragma unroll
  for (int cj_k = 0; cj_k < CjV; ++cj_k) cj_r[cj_k] = static_cast<CjO>(cj_f(cj_vs[cj_k]...));
  return cj_r;
}
}  // namespace detail

/// The coordinates of row-major position `flat` in `a`'s shape (in 32-bit arithmetic when the
/// array's layout allows it); see Array::offset_at.
template <class CjT, int CjN, class CjL>
__device__ __forceinline__ void unravel(const Array<CjT, CjN, CjL>& cj_a, long long cj_flat,
                                        long long (&cj_coord)[CjN]) {
  using CjOff = typename detail::offset_type<CjL::index32>::type;
  CjOff cj_rest = static_cast<CjOff>(cj_flat);
#pragma unroll
  for (int d = CjN - 1; d >= 0; --d) {
    const CjOff cj_n = static_cast<CjOff>(cj_a.size(d));
    cj_coord[d] = cj_rest % cj_n;
    cj_rest /= cj_n;
  }
}

/// Calls f(i) for every i in [0, n), spread over the whole grid (a grid-stride loop), so any
/// grid covers the work; kernel.forall(n) gives each thread one task.
template <class CjF>
__device__ __forceinline__ void for_each(long long cj_n, CjF cj_f) {
  const long long cj_threads = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long cj_i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; cj_i < cj_n;
       cj_i += cj_threads)
    cj_f(cj_i);
}

namespace detail {
/// for_each_run's loop, dividing in CjOff (int where every run's position fits). With CjAcross
/// >= 0, consecutive runs differ first in dimension CjAcross, then in the run's place along
/// the last dimension, then in the other dimensions (row-major).
template <class CjOff, int CjV, int CjAcross, class CjT, int CjN, class CjL, class CjF>
__device__ __forceinline__ void run_loop(const Array<CjT, CjN, CjL>& cj_a, long long cj_cols, long long cj_runs,
                                         CjF& cj_f) {
  const CjOff cj_per_row = static_cast<CjOff>((cj_cols + CjV - 1) / CjV);
  const long long cj_threads = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long cj_r = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; cj_r < cj_runs;
       cj_r += cj_threads) {
    long long cj_coord[CjN];
    CjOff cj_rest = static_cast<CjOff>(cj_r);
    if constexpr (CjAcross >= 0) {
      const CjOff cj_n = static_cast<CjOff>(cj_a.size(CjAcross));
      const CjOff cj_next = cj_rest / cj_n;
      cj_coord[CjAcross] = cj_rest - cj_next * cj_n;
      cj_rest = cj_next;
    }
    const CjOff cj_next = cj_rest / cj_per_row;
    const long long cj_col = static_cast<long long>(cj_rest - cj_next * cj_per_row) * CjV;
    cj_rest = cj_next;
    // The run's row-major row: this quotient where runs come in row-major order.
    long long cj_row = cj_next;
    cj_coord[CjN - 1] = cj_col;
#pragma unroll
    for (int d = CjN - 2; d >= 0; --d) {
      if (d == CjAcross) continue;
      const CjOff cj_n = static_cast<CjOff>(cj_a.size(d));
      cj_coord[d] = cj_rest % cj_n;
      cj_rest /= cj_n;
    }
    if constexpr (CjAcross >= 0) {  // runs out of row-major order: the row from the coordinates
      cj_row = 0;
#pragma unroll
      for (int d = 0; d < CjN - 1; ++d) cj_row = cj_row * cj_a.size(d) + cj_coord[d];
    }
    const long long cj_left = cj_cols - cj_col;
    cj_f(cj_row * cj_cols + cj_col, cj_coord, static_cast<int>(cj_left < CjV ? cj_left : CjV));
  }
}
}  // namespace detail

/// Calls f(flat, coord, len) for every run of `a`'s shape, spread over the whole grid: each row
/// of the last dimension cut into runs of V consecutive elements (the last run of a row may be
/// shorter). `flat` is the run's first row-major position, `coord` its coordinates (as
/// cj::unravel gives them) and `len` its element count, at most V; Array::load_run and
/// Array::store_run move a run of any array of that shape. A kernel launched with forall gets a
/// thread per task, so launch it over the number of runs: rows * ceil(last size / V).
///
///   cj::for_each_run<8>(out, [&](long long i, const long long (&at)[2], int len) {
///     auto v = x.load_run<8>(x.offset_at(i, at), len);
///     for (int k = 0; k < 8; ++k) v[k] = v[k] * 2;
///     out.store_run<8>(out.offset_at(i, at), v, len);
///   });
///
/// `Across`, a dimension other than the last, gives consecutive threads runs that differ in
/// that dimension first: an input whose stride 1 lies along it (a channels-last tensor read by
/// a kernel that walks NCHW) is then read a warp-wide contiguous span at a time, where runs in
/// row-major order would have each lane read its own sector.
template <int CjV, int CjAcross = -1, class CjT, int CjN, class CjL, class CjF>
__device__ __forceinline__ void for_each_run(const Array<CjT, CjN, CjL>& cj_a, CjF cj_f) {
  static_assert(CjN >= 1 && CjV >= 1, "cj::for_each_run: an array of rank 1 or more, runs of 1 or more");
  static_assert(CjAcross >= -1 && CjAcross < CjN - 1,
                "cj::for_each_run: Across is a dimension other than the last, or -1");
  const long long cj_cols = cj_a.size(CjN - 1);
  if (cj_cols == 0) return;
  const long long cj_runs = cj_a.numel() / cj_cols * ((cj_cols + CjV - 1) / CjV);
  // 32-bit division where every position fits (an expanded array may have more elements than
  // its offsets suggest). An index32 layout says so when compiling, and then the kernel holds
  // one loop: the 64-bit one would set the register count for both.
  if constexpr (!CjL::index32) {
    if (cj_a.numel() > 0x7fffffffLL) {
      detail::run_loop<long long, CjV, CjAcross>(cj_a, cj_cols, cj_runs, cj_f);
      return;
    }
  }
  detail::run_loop<int, CjV, CjAcross>(cj_a, cj_cols, cj_runs, cj_f);
}

/// out[i] = f(in[i]...) for every element, in row-major order, spread over the whole grid.
/// When every array is contiguous and 16-byte aligned (the key's layout flags), each thread moves
/// 16-byte vectors, several per loop iteration; 32-bit indices when every array allows them;
/// element by element through the strides otherwise. Arrays must have out's shape.
///
///   cj::elementwise(out, [=](T x, T y) { return a * x + y; }, x, y);
template <class CjF, class CjO, int CjN, class CjLO, class... CjI, class... CjLI>
__device__ __forceinline__ void elementwise(const Array<CjO, CjN, CjLO>& cj_out, CjF cj_f,
                                            const Array<CjI, CjN, CjLI>&... cj_in) {
  constexpr bool kVector = CjLO::contiguous && CjLO::aligned16 &&
                           ((CjLI::contiguous && CjLI::aligned16) && ...);
  using CjIdx = typename detail::offset_type<(CjLO::index32 && ... && CjLI::index32)>::type;
  constexpr int kLanes = ::cj::abi::kVectorBytes / detail::max_size<CjO, CjI...>() > 0
                             ? ::cj::abi::kVectorBytes / detail::max_size<CjO, CjI...>()
                             : 1;
  // Vectors in flight per thread and iteration; forall's grid gives each thread one iteration.
  constexpr int kUnroll = ::cj::abi::kElementwiseVectors;
  const CjIdx cj_n = static_cast<CjIdx>(cj_out.numel());
#if defined(CJ_DEBUG)
  cj_assert(((cj_in.numel() == cj_out.numel()) && ...), "cj::elementwise: arrays of different sizes");
#endif
  const CjIdx cj_threads = static_cast<CjIdx>(gridDim.x) * static_cast<CjIdx>(blockDim.x);
  const CjIdx cj_tid =
      static_cast<CjIdx>(blockIdx.x) * static_cast<CjIdx>(blockDim.x) + static_cast<CjIdx>(threadIdx.x);
  if constexpr (kVector && kLanes > 1) {
    const CjIdx cj_vectors = cj_n / kLanes;
    CjIdx cj_j = cj_tid;
    for (; cj_j + (kUnroll - 1) * cj_threads < cj_vectors; cj_j += kUnroll * cj_threads) {
      Vec<CjO, kLanes> cj_r[kUnroll];
#pragma unroll
      for (int cj_u = 0; cj_u < kUnroll; ++cj_u)
        cj_r[cj_u] = detail::apply_lanes<CjO, kLanes>(
            cj_f, cj_in.template load<kLanes>((cj_j + cj_u * cj_threads) * kLanes)...);
#pragma unroll
      for (int cj_u = 0; cj_u < kUnroll; ++cj_u)
        cj_out.template store<kLanes>((cj_j + cj_u * cj_threads) * kLanes, cj_r[cj_u]);
    }
    for (; cj_j < cj_vectors; cj_j += cj_threads)
      cj_out.template store<kLanes>(
          cj_j * kLanes, detail::apply_lanes<CjO, kLanes>(cj_f, cj_in.template load<kLanes>(cj_j * kLanes)...));
    for (CjIdx cj_i = cj_vectors * kLanes + cj_tid; cj_i < cj_n; cj_i += cj_threads)
      cj_out.data()[cj_i] = static_cast<CjO>(cj_f(cj_in.data()[cj_i]...));
  } else {
    for (CjIdx cj_i = cj_tid; cj_i < cj_n; cj_i += cj_threads)
      cj_out.data()[cj_out.flat_offset(cj_i)] = static_cast<CjO>(cj_f(cj_in.data()[cj_in.flat_offset(cj_i)]...));
  }
}

/// Reduces one value per thread over a one-dimensional thread block with `op` (associative and
/// commutative), and gives every thread the result. Every thread of the block must call it, and
/// blockDim.x must be a multiple of 32. It may be called several times in a kernel.
///
///   float total = cj::block_reduce(partial, [](float a, float b) { return a + b; });
template <class CjT, class CjF>
__device__ __forceinline__ CjT block_reduce(CjT cj_v, CjF cj_op) {
  __shared__ CjT cj_partials[32];
#pragma unroll
  for (int cj_o = 16; cj_o > 0; cj_o >>= 1) cj_v = cj_op(cj_v, __shfl_xor_sync(0xffffffffu, cj_v, cj_o));
  const int cj_warps = static_cast<int>(blockDim.x + 31) / 32;
  if (cj_warps == 1) return cj_v;
  __syncthreads();  // an earlier call's readers are done with the partials
  if ((threadIdx.x & 31) == 0) cj_partials[threadIdx.x / 32] = cj_v;
  __syncthreads();
  cj_v = cj_partials[0];
  for (int cj_w = 1; cj_w < cj_warps; ++cj_w) cj_v = cj_op(cj_v, cj_partials[cj_w]);
  return cj_v;
}

/// Scalar math with torch's semantics, for float and double (and integers where torch has
/// them): what kernels generated from torch programs call. Minimum and maximum propagate NaN,
/// as torch.minimum, torch.maximum, amin and amax do; round is to nearest even; remainder and
/// floordiv follow Python's signs.
namespace op {
#define CJ_OP_UNARY(name, f32, f64)                                                   \
  __device__ __forceinline__ float name(float cj_x) { return ::f32(cj_x); }           \
  __device__ __forceinline__ double name(double cj_x) { return ::f64(cj_x); }
CJ_OP_UNARY(exp, expf, exp)
CJ_OP_UNARY(exp2, exp2f, exp2)
CJ_OP_UNARY(expm1, expm1f, expm1)
CJ_OP_UNARY(log, logf, log)
CJ_OP_UNARY(log2, log2f, log2)
CJ_OP_UNARY(log10, log10f, log10)
CJ_OP_UNARY(log1p, log1pf, log1p)
CJ_OP_UNARY(sqrt, sqrtf, sqrt)
CJ_OP_UNARY(rsqrt, rsqrtf, rsqrt)
CJ_OP_UNARY(sin, sinf, sin)
CJ_OP_UNARY(cos, cosf, cos)
CJ_OP_UNARY(tan, tanf, tan)
CJ_OP_UNARY(tanh, tanhf, tanh)
CJ_OP_UNARY(sinh, sinhf, sinh)
CJ_OP_UNARY(cosh, coshf, cosh)
CJ_OP_UNARY(asin, asinf, asin)
CJ_OP_UNARY(acos, acosf, acos)
CJ_OP_UNARY(atan, atanf, atan)
CJ_OP_UNARY(asinh, asinhf, asinh)
CJ_OP_UNARY(acosh, acoshf, acosh)
CJ_OP_UNARY(atanh, atanhf, atanh)
CJ_OP_UNARY(erf, erff, erf)
CJ_OP_UNARY(erfc, erfcf, erfc)
CJ_OP_UNARY(erfinv, erfinvf, erfinv)
CJ_OP_UNARY(lgamma, lgammaf, lgamma)
CJ_OP_UNARY(floor, floorf, floor)
CJ_OP_UNARY(ceil, ceilf, ceil)
CJ_OP_UNARY(trunc, truncf, trunc)
CJ_OP_UNARY(round, rintf, rint)
#undef CJ_OP_UNARY
__device__ __forceinline__ float atan2(float cj_y, float cj_x) { return ::atan2f(cj_y, cj_x); }
__device__ __forceinline__ double atan2(double cj_y, double cj_x) { return ::atan2(cj_y, cj_x); }
__device__ __forceinline__ float pow(float cj_x, float cj_y) { return ::powf(cj_x, cj_y); }
__device__ __forceinline__ double pow(double cj_x, double cj_y) { return ::pow(cj_x, cj_y); }
__device__ __forceinline__ float fmod(float cj_x, float cj_y) { return ::fmodf(cj_x, cj_y); }
__device__ __forceinline__ double fmod(double cj_x, double cj_y) { return ::fmod(cj_x, cj_y); }
/// Integer powers (torch.pow of integer tensors): repeated squaring; negative exponents give 0
/// except for bases 1 and -1.
template <class CjT>
__device__ __forceinline__ CjT pow(CjT cj_x, CjT cj_y) {
  if (cj_y < 0) return cj_x == 1 ? CjT(1) : cj_x == -1 ? ((cj_y & 1) ? CjT(-1) : CjT(1)) : CjT(0);
  CjT cj_r = 1;
  for (; cj_y; cj_y >>= 1, cj_x *= cj_x)
    if (cj_y & 1) cj_r *= cj_x;
  return cj_r;
}
template <class CjT> __device__ __forceinline__ bool isnan(CjT cj_x) { return cj_x != cj_x; }
template <class CjT> __device__ __forceinline__ bool isinf(CjT cj_x) {
  return cj_x == cj_x && cj_x - cj_x != cj_x - cj_x;
}
template <class CjT> __device__ __forceinline__ CjT abs(CjT cj_x) { return cj_x < CjT(0) ? -cj_x : cj_x; }
__device__ __forceinline__ float abs(float cj_x) { return ::fabsf(cj_x); }
__device__ __forceinline__ double abs(double cj_x) { return ::fabs(cj_x); }
template <class CjT> __device__ __forceinline__ CjT maximum(CjT cj_a, CjT cj_b) {
  return (cj_a != cj_a || cj_a > cj_b) ? cj_a : cj_b;
}
template <class CjT> __device__ __forceinline__ CjT minimum(CjT cj_a, CjT cj_b) {
  return (cj_a != cj_a || cj_a < cj_b) ? cj_a : cj_b;
}
template <class CjT> __device__ __forceinline__ CjT sign(CjT cj_x) {
  return static_cast<CjT>((CjT(0) < cj_x) - (cj_x < CjT(0)));
}
template <class CjT> __device__ __forceinline__ CjT bitwise_not(CjT cj_x) { return ~cj_x; }
__device__ __forceinline__ bool bitwise_not(bool cj_x) { return !cj_x; }
template <class CjT> __device__ __forceinline__ CjT sigmoid(CjT cj_x) { return CjT(1) / (CjT(1) + exp(-cj_x)); }
/// Python's %: the result has the divisor's sign.
template <class CjT> __device__ __forceinline__ CjT remainder(CjT cj_a, CjT cj_b) {
  CjT cj_r = cj_a % cj_b;
  return (cj_r != 0 && ((cj_r < 0) != (cj_b < 0))) ? cj_r + cj_b : cj_r;
}
__device__ __forceinline__ float remainder(float cj_a, float cj_b) {
  float cj_r = ::fmodf(cj_a, cj_b);
  return (cj_r != 0.0f && ((cj_r < 0.0f) != (cj_b < 0.0f))) ? cj_r + cj_b : cj_r;
}
__device__ __forceinline__ double remainder(double cj_a, double cj_b) {
  double cj_r = ::fmod(cj_a, cj_b);
  return (cj_r != 0.0 && ((cj_r < 0.0) != (cj_b < 0.0))) ? cj_r + cj_b : cj_r;
}
/// Python's //: rounds toward negative infinity.
template <class CjT> __device__ __forceinline__ CjT floordiv(CjT cj_a, CjT cj_b) {
  CjT cj_q = cj_a / cj_b;
  return (cj_a % cj_b != 0 && ((cj_a < 0) != (cj_b < 0))) ? cj_q - 1 : cj_q;
}
__device__ __forceinline__ float floordiv(float cj_a, float cj_b) { return ::floorf(cj_a / cj_b); }
__device__ __forceinline__ double floordiv(double cj_a, double cj_b) { return ::floor(cj_a / cj_b); }
/// A float constant's bits (infinities and NaN have no literal).
__device__ __forceinline__ double bits(unsigned long long cj_b) { return __longlong_as_double(static_cast<long long>(cj_b)); }
}  // namespace op

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

#if defined(CJ_VIRTUAL_GRID)
namespace detail {
// forall's virtual grid (csrc/virtual_grid.h): the kernel's text is compiled as a __device__
// function whose `blockIdx`, `gridDim` and `blockDim` read the values below, and a generated __global__
// wrapper runs several virtual blocks per physical block, one after the other. The wrapper's
// pointers are __restrict__ (the launch checked that no written tensor overlaps another), so
// the loads of later virtual blocks can be issued before the stores of earlier ones.

/// The block size of every virtual-grid launch (cj/abi.h). As a constant, blockDim lets the
/// compiler fold each virtual block's addresses into offsets of the first one's, which keeps the
/// bodies small enough for ptxas to predicate and overlap.
constexpr unsigned int kVirtualBlockThreads = ::cj::abi::kVirtualBlockThreads;

/// Each thread's current virtual block; per thread, because the threads of a block may be in
/// different virtual blocks at any moment.
__shared__ unsigned int virtual_block_slot[kVirtualBlockThreads];
/// The virtual grid's size, the same for every thread.
__shared__ unsigned int virtual_grid_size;

__device__ __forceinline__ uint3 virtual_block_idx() {
  return make_uint3(virtual_block_slot[threadIdx.x], blockIdx.y, blockIdx.z);
}
__device__ __forceinline__ dim3 virtual_grid_dim() { return dim3(virtual_grid_size, gridDim.y, gridDim.z); }
__device__ __forceinline__ dim3 virtual_block_dim() { return dim3(kVirtualBlockThreads, 1, 1); }

/// The __restrict__ pointer the wrapper receives beside a tensor parameter. Parameters written
/// `const float* const x`, `float* __restrict__ out` or `const cj::Array<...> a` keep those
/// qualifiers in the resolved signature; they say nothing about the data, so they are peeled.
template <class CjP> struct restrict_of;
template <class CjP> struct restrict_of<const CjP> : restrict_of<CjP> {};
template <class CjT> struct restrict_of<CjT*> { using type = CjT* __restrict__; };
template <class CjT> struct restrict_of<CjT* __restrict__> { using type = CjT* __restrict__; };
template <class CjT, int CjN, class CjL> struct restrict_of<Array<CjT, CjN, CjL>> { using type = CjT* __restrict__; };
template <class CjP> using restrict_t = typename restrict_of<CjP>::type;

/// A tensor parameter whose data pointer is the wrapper's __restrict__ one.
template <class CjT, int CjN, class CjL>
__device__ __forceinline__ Array<CjT, CjN, CjL> with_data(Array<CjT, CjN, CjL> cj_a, CjT* cj_p) {
  cj_a.data_ = cj_p;
  return cj_a;
}
template <class CjT>
__device__ __forceinline__ CjT* with_data(CjT*, CjT* cj_p) { return cj_p; }

/// Asks the TMA unit to bring into L2 the elements that physical block blockIdx.x + `ahead` will
/// read of `data`, a tensor of `tasks` elements read one per virtual thread: elements
/// [(blockIdx.x + ahead) * K * kVirtualBlockThreads, ...) rounded out to 16 bytes, within the
/// tensor's 16-byte granules. A thread that loads one 1- or 2-byte element per instruction keeps
/// too few bytes in flight for HBM; when the loads find their data in L2, the shorter wait
/// makes up for it (benchmarks/virtual_grid_probe.py). A hint: it changes no result. Returns 0,
/// from the instruction itself (see below).
template <int CjK, class CjT>
__device__ __forceinline__ unsigned int prefetch_ahead(const CjT* cj_data, unsigned long long cj_tasks,
                                                       unsigned int cj_ahead) {
  unsigned int cj_zero = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr unsigned long long cj_span = CjK * kVirtualBlockThreads;
  const unsigned long long cj_begin = (static_cast<unsigned long long>(blockIdx.x) + cj_ahead) * cj_span;
  if (cj_begin >= cj_tasks) return 0;
  const unsigned long long cj_end = cj_begin + cj_span < cj_tasks ? cj_begin + cj_span : cj_tasks;
  const unsigned long long cj_lo = reinterpret_cast<unsigned long long>(cj_data + cj_begin) & ~15ull;
  const unsigned long long cj_hi = (reinterpret_cast<unsigned long long>(cj_data + cj_end) + 15ull) & ~15ull;
  // Neither volatile nor a "memory" clobber: either tells the compiler that memory may change,
  // and the loads of read-only data would lose the non-coherent path. The instruction has an
  // output instead (0), which the caller uses, so that it stays.
  asm("{\n\tcp.async.bulk.prefetch.L2.global [%1], %2;\n\tmov.u32 %0, 0;\n\t}"
      : "=r"(cj_zero) : "l"(cj_lo), "r"(static_cast<unsigned int>(cj_hi - cj_lo)));
#endif
  return cj_zero;
}

/// Runs `body` for virtual blocks [blockIdx.x * K, blockIdx.x * K + K) of a grid of `grid`
/// virtual blocks: unrolled when all K exist, so that their loads can overlap. Thread 0 first
/// runs `prefetch` (prefetch_ahead's, which return 0) before any load of the block.
template <int CjK, class CjP, class CjF>
__device__ __forceinline__ void run_virtual_blocks(unsigned int cj_grid, CjP&& cj_prefetch,
                                                   CjF&& cj_body) {
  // A volatile store: the compiler removes a plain one when the kernel never reads gridDim,
  // and the prefetches with it.
  if (threadIdx.x == 0)
    *static_cast<volatile unsigned int*>(&virtual_grid_size) = cj_grid | cj_prefetch();
  __syncthreads();
  const unsigned int cj_first = blockIdx.x * CjK;
  if (cj_first + CjK <= cj_grid) {
#pragma unroll
    for (int cj_j = 0; cj_j < CjK; ++cj_j) {
      virtual_block_slot[threadIdx.x] = cj_first + cj_j;
      cj_body();
    }
    // Every thread of the block takes this path. Without an instruction after the last block,
    // ptxas turns that block's bounds check into an early exit placed after the other blocks'
    // stores, and its loads then start only when theirs have finished.
    __syncwarp();
  } else {
    for (unsigned int cj_v = cj_first; cj_v < cj_grid; ++cj_v) {
      virtual_block_slot[threadIdx.x] = cj_v;
      cj_body();
    }
  }
}
}  // namespace detail
#endif

namespace detail {
// Everything below is used by the plugin's generated code, never by kernels.

template <int P> struct priority : priority<P - 1> {};
template <> struct priority<0> {};

/// Makes a parameter a non-deduced context, so that scalars follow the tensors' types.
template <class T> struct nondeduced { using type = T; };
// A value of any type (only in unevaluated deduction: the struct bytes of a parameter whose type
// the kernel's template parameters decide).
struct any_value {
  template <class CjU> __device__ operator CjU() const;
};

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

/// A resolved kernel signature with the kernel's address (named template arguments: the
/// deduction helper names the kernel with every template argument, deduced or given).
template <class F, F K, class... P>
struct KSig : Sig<P...> {
  static constexpr F kernel = K;
};

// Type codes shared with the host (cj/abi.h: TypeCodes).
// Another library's complex type (thrust::complex<T>, cuda::std::complex<T>, CuPy's
// thrust::complex): a class template of one floating-point type with real() and imag(), laid out
// as (real, imaginary) in twice the size of T, as torch's complex dtypes are.
template <class CjX, class CjY> struct same_type { static constexpr bool value = false; };
template <class CjX> struct same_type<CjX, CjX> { static constexpr bool value = true; };
template <class CjC, class = void> struct complex_like {
  static constexpr int value = ::cj::abi::kTypeUnknown;
};
template <template <class...> class CjTmpl, class CjT>
struct complex_like<CjTmpl<CjT>, decltype(void(::cj::detail::declval<const CjTmpl<CjT>&>().real()),
                                         void(::cj::detail::declval<const CjTmpl<CjT>&>().imag()))> {
  static constexpr int value =
      sizeof(CjTmpl<CjT>) != 2 * sizeof(CjT) || alignof(CjTmpl<CjT>) != 2 * sizeof(CjT)
          ? ::cj::abi::kTypeUnknown
      : same_type<CjT, float>::value  ? ::cj::abi::kTypeComplexFloat
      : same_type<CjT, double>::value ? ::cj::abi::kTypeComplexDouble
                                      : ::cj::abi::kTypeUnknown;
};
template <class CjT> struct type_code : complex_like<CjT> {};
template <class T> struct type_code<T*> { static constexpr int value = ::cj::abi::kTypePointer; };
template <class T, int N, class L> struct type_code<::cj::Array<T, N, L>> { static constexpr int value = ::cj::abi::kTypeArray; };
template <> struct type_code<bool> { static constexpr int value = ::cj::abi::kTypeBool; };
template <> struct type_code<signed char> { static constexpr int value = ::cj::abi::kTypeInt8; };
template <> struct type_code<char> { static constexpr int value = ::cj::abi::kTypeInt8; };
template <> struct type_code<unsigned char> { static constexpr int value = ::cj::abi::kTypeUInt8; };
template <> struct type_code<short> { static constexpr int value = ::cj::abi::kTypeInt16; };
template <> struct type_code<unsigned short> { static constexpr int value = ::cj::abi::kTypeUInt16; };
template <> struct type_code<int> { static constexpr int value = ::cj::abi::kTypeInt32; };
template <> struct type_code<unsigned int> { static constexpr int value = ::cj::abi::kTypeUInt32; };
template <> struct type_code<long> { static constexpr int value = ::cj::abi::kTypeInt64; };
template <> struct type_code<long long> { static constexpr int value = ::cj::abi::kTypeInt64; };
template <> struct type_code<unsigned long> { static constexpr int value = ::cj::abi::kTypeUInt64; };
template <> struct type_code<unsigned long long> { static constexpr int value = ::cj::abi::kTypeUInt64; };
template <> struct type_code<float> { static constexpr int value = ::cj::abi::kTypeFloat; };
template <> struct type_code<double> { static constexpr int value = ::cj::abi::kTypeDouble; };
template <> struct type_code<::cj::complex<float>> { static constexpr int value = ::cj::abi::kTypeComplexFloat; };
template <> struct type_code<::cj::complex<double>> { static constexpr int value = ::cj::abi::kTypeComplexDouble; };
#if defined(CJ_HAVE_FP16)
template <> struct type_code<__half> { static constexpr int value = ::cj::abi::kTypeHalf; };
#endif
#if defined(CJ_HAVE_BF16)
template <> struct type_code<__nv_bfloat16> { static constexpr int value = ::cj::abi::kTypeBFloat16; };
#endif
template <class T> struct type_code<const T> : type_code<T> {};
template <class T> struct type_code<volatile T> : type_code<T> {};
template <class T> struct type_code<const volatile T> : type_code<T> {};

/// Size and alignment of a type; 0 for void and incomplete types (a forward-declared struct),
/// which a pointer parameter may point to.
template <class T, class = void> struct layout_of {
  static constexpr unsigned long long size = 0, align = 0;
};
template <class T> struct layout_of<T, decltype(void(sizeof(T)))> {
  static constexpr unsigned long long size = sizeof(T), align = alignof(T);
};

/// What the host checks about a pointer parameter: its pointee's type code, size and alignment
/// (a float4* needs 16-byte aligned data whose size is a multiple of 16 bytes).
template <class P> struct pointee;
template <class T> struct pointee<T*> {
  static constexpr long long code = type_code<T>::value;
  static constexpr unsigned long long size = layout_of<T>::size, align = layout_of<T>::align;
};
template <class T> struct pointee<T* const> : pointee<T*> {};
template <class T> struct pointee<T* __restrict__> : pointee<T*> {};
template <class T> struct pointee<T* const __restrict__> : pointee<T*> {};

/// Its lowered (mangled) name tells the host a parameter's type code, size and alignment.
template <long long Code, unsigned long long Size, unsigned long long Align>
__device__ int probe = 0;

}  // namespace detail
}  // namespace cj
