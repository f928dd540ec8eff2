// torch_cudajit: what the plugin (csrc/, the host compiler) and the kernels it compiles (cj/cj.cuh,
// NVRTC) both rely on: launch constants, type codes, layout flags, the bytes of a cj::Array
// argument and the debug record a kernel writes. Each is defined here once and both sides use
// it. Plain C++11 with no includes, so that NVRTC, libclang's front end and the host compiler
// all read the same text; the static_asserts at the end check the layouts on every side.
// Constants are enumerators, never variables: a namespace-scope variable would be emitted into
// every module under a name that differs from compile to compile, and the compiled code with it.
#pragma once

namespace cj {
namespace abi {

// --- Launch constants ------------------------------------------------------------------------

/// What the host's launch choices and the device's loops assume alike.
enum LaunchConstants : int {
  /// The bytes of one vector access: cj::Array::load/store and cj::elementwise move vectors of
  /// at most this many bytes, and kLayoutAligned16 says a data pointer is a multiple of it.
  kVectorBytes = 16,
  /// The vectors one step of cj::elementwise's loop moves per thread and array (its unroll); a
  /// forall launch of such a kernel gives each thread one step.
  kElementwiseVectors = 4,
  /// The block size of every virtual-grid launch of forall (csrc/virtual_grid.h), a constant of
  /// the compiled variant (cj::detail::kVirtualBlockThreads).
  kVirtualBlockThreads = 256,
};

// --- Type codes --------------------------------------------------------------------------------

/// The codes a resolved signature's probes give the host for a scalar, element or pointee type
/// (device: cj::detail::type_code; host: torch_cudajit::TypeCode, which takes these values).
enum TypeCodes : int {
  kTypeBool = 0,
  kTypeInt8 = 1,
  kTypeUInt8 = 2,
  kTypeInt16 = 3,
  kTypeUInt16 = 4,
  kTypeInt32 = 5,
  kTypeUInt32 = 6,
  kTypeInt64 = 7,
  kTypeUInt64 = 8,
  kTypeHalf = 9,
  kTypeBFloat16 = 10,
  kTypeFloat = 11,
  kTypeDouble = 12,
  kTypeComplexFloat = 13,
  kTypeComplexDouble = 14,
  kTypeUnknown = -1,  ///< a type the plugin does not convert values to (user structs)
  kTypeArray = -2,    ///< a cj::Array
  kTypePointer = -3,  ///< a pointer
};

// --- Layout flags ------------------------------------------------------------------------------

/// The bits of cj::Layout<Flags>, which the host sets from each tensor argument
/// (torch_cudajit::LayoutFlags takes these values).
enum LayoutBits : int {
  kLayoutContiguous = 1,  ///< row-major contiguous
  kLayoutAligned16 = 2,   ///< the data pointer is a multiple of kVectorBytes
  kLayoutIndex32 = 4,     ///< every element's offset fits in a 32-bit int
};

/// Functions both sides call: host and device functions under CUDA compilers.
#if defined(__CUDACC__)
#define CJ_ABI_FUNCTION __host__ __device__
#else
#define CJ_ABI_FUNCTION
#endif

// --- cj::Array argument ------------------------------------------------------------------------

/// Where the extents of a cj::Array<T, N> argument start: after its 8-byte data pointer. The
/// extents, then the strides (in elements), are N 8-byte integers each; rank 0 has only the
/// pointer.
enum ArrayLayout : unsigned int { kArrayShapeOffset = 8 };
/// Where the strides of a cj::Array of rank `rank` start.
CJ_ABI_FUNCTION constexpr unsigned int array_strides_offset(int rank) { return kArrayShapeOffset + 8u * rank; }
/// The bytes of a cj::Array argument of rank `rank`.
CJ_ABI_FUNCTION constexpr unsigned int array_bytes(int rank) { return kArrayShapeOffset + 16u * rank; }

// --- Debug record ------------------------------------------------------------------------------

/// What DebugRecord::kind says.
enum DebugKind : unsigned int {
  kDebugNothing = 0,  ///< nothing failed in the launch
  kDebugBounds = 1,   ///< an index was out of bounds
  kDebugAssert = 2,   ///< a cj_assert failed
};

/// The capacities of DebugRecord's arrays, and the separator of its message.
enum DebugSizes : int {
  /// The extents a bounds failure records (the first ones of a larger rank).
  kDebugShapeDims = 8,
  /// The bytes of the file name a failure records, with its terminating zero.
  kDebugFileBytes = 128,
  /// The bytes of a cj_assert failure's text, with its terminating zero.
  kDebugMessageBytes = 256,
  /// Separates a failed cj_assert's condition from its message in DebugRecord::message.
  kDebugMessageSeparator = 0x1f,
};

/// Debug mode (jit(..., debug=True)): the first failed bounds check or cj_assert of a launch,
/// which the kernel writes into its global cj_debug_record and the host reads after the launch.
/// Types of the same size on both sides: no <stdint.h> under NVRTC.
struct DebugRecord {
  unsigned int kind;  ///< a DebugKind
  unsigned int line;
  unsigned int thread[3];
  unsigned int block[3];
  int dim;   ///< the dimension whose index failed (bounds)
  int rank;  ///< the rank of the array (bounds)
  long long index;
  long long shape[kDebugShapeDims];
  char file[kDebugFileBytes];
  char message[kDebugMessageBytes];  ///< condition, kDebugMessageSeparator, message (cj_assert)
};

// --- Checks, on both sides -----------------------------------------------------------------------

/// offsetof as a constant expression, without <stddef.h>: NVRTC's front end has no
/// __builtin_offsetof, but its __INTADDR__ keeps the address arithmetic constant.
#if defined(__CUDACC_RTC__) && !defined(__clang__)
#define CJ_ABI_OFFSETOF(type, member) ((unsigned long)__INTADDR__(&(((type*)0)->member)))
#else
#define CJ_ABI_OFFSETOF(type, member) __builtin_offsetof(type, member)
#endif

static_assert(sizeof(int) == 4 && sizeof(long long) == 8 && sizeof(void*) == 8,
              "cj/abi.h: the host and the device agree on 4-byte int, 8-byte long long and "
              "pointers; this compiler differs");
static_assert(CJ_ABI_OFFSETOF(DebugRecord, index) == 40 &&
                  CJ_ABI_OFFSETOF(DebugRecord, shape) == 48 &&
                  CJ_ABI_OFFSETOF(DebugRecord, file) == 48 + 8 * kDebugShapeDims &&
                  CJ_ABI_OFFSETOF(DebugRecord, message) == 48 + 8 * kDebugShapeDims + kDebugFileBytes &&
                  sizeof(DebugRecord) == 496,
              "cj/abi.h: DebugRecord has another layout under this compiler");
static_assert(array_bytes(0) == kArrayShapeOffset && array_strides_offset(3) + 8u * 3 == array_bytes(3),
              "cj/abi.h: a cj::Array is its pointer, its extents and its strides");

}  // namespace abi
}  // namespace cj
