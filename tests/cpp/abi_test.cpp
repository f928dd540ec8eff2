// torch_cudajit C++ tests: cj/abi.h, what the host and the kernels share. The host's view of
// each fact (sizes and offsets as the host compiler lays them out, the host's enumerators) is
// written into a small program that NVRTC compiles with the device headers, whose
// static_asserts then hold the device's view against it: a disagreement fails to compile.
#include "cj/abi.h"
#include "cuda_api.h"
#include "headers.h"
#include "program.h"
#include "specialization.h"
#include "virtual_grid.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace torch_cudajit {
namespace {

using cj::abi::DebugRecord;

// The host reads the record with one copy from the device.
static_assert(std::is_standard_layout_v<DebugRecord> && std::is_trivially_copyable_v<DebugRecord>,
              "cj::abi::DebugRecord is copied from the device byte for byte");
static_assert(sizeof(DebugRecord::shape) / sizeof(DebugRecord::shape[0]) ==
                  cj::abi::kDebugShapeDims,
              "DebugRecord::shape holds kDebugShapeDims extents");
// The host's pack writes a cj::Array as a pointer, then int64 extents and strides.
static_assert(sizeof(void*) == cj::abi::kArrayShapeOffset && sizeof(int64_t) == 8,
              "a cj::Array begins with its data pointer");
static_assert(cj::abi::array_bytes(2) == cj::abi::array_strides_offset(2) + 2 * sizeof(int64_t),
              "a cj::Array ends with its strides");

// NVRTC's result and log for `text` (compiled with the device headers, in debug mode, with the
// virtual grid's and the half types' parts of cj/cj.cuh).
struct Compiled {
  bool ok;
  std::string log;
  std::string ptx;
};

Compiled nvrtc_compile(const std::string& text) {
  nvrtcProgram prog = nullptr;
  CJ_CHECK(nvrtcCreateProgram, &prog, text.c_str(), "abi_check.cu", 0, nullptr, nullptr);
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { detail::nvrtc().nvrtcDestroyProgram(p); }
  } destroy{&prog};
  std::vector<std::string> options = {"--std=c++17", "-DCJ_DEBUG", "-DCJ_VIRTUAL_GRID",
                                      "-DCJ_HAVE_FP16", "-DCJ_HAVE_BF16"};
  for (const auto& dir : default_include_dirs()) options.push_back("-I" + dir);
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  const nvrtcResult result =
      detail::nvrtc().nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  size_t size = 0;
  CJ_CHECK(nvrtcGetProgramLogSize, prog, &size);
  std::string log(size, '\0');
  if (size > 0) CJ_CHECK(nvrtcGetProgramLog, prog, &log[0]);
  std::string ptx;
  if (result == NVRTC_SUCCESS) {
    CJ_CHECK(nvrtcGetPTXSize, prog, &size);
    ptx.resize(size);
    CJ_CHECK(nvrtcGetPTX, prog, &ptx[0]);
  }
  return {result == NVRTC_SUCCESS, log, ptx};
}

// One device static_assert: `device` must equal the host's value.
struct Fact {
  std::string what;
  std::string device;
  long long host;
};

// The offset of DebugRecord's `field` on both sides.
#define CJ_RECORD_FIELD(field)                                                                \
  Fact {                                                                                      \
    "debug record " #field, "CJ_ABI_OFFSETOF(CjDebugRecord, " #field ")",                     \
        offsetof(DebugRecord, field)                                                          \
  }

std::vector<Fact> host_facts() {
  std::vector<Fact> facts = {
      {"debug record size", "sizeof(CjDebugRecord)", sizeof(DebugRecord)},
      {"debug record alignment", "alignof(CjDebugRecord)", alignof(DebugRecord)},
      CJ_RECORD_FIELD(kind),
      CJ_RECORD_FIELD(line),
      CJ_RECORD_FIELD(thread),
      CJ_RECORD_FIELD(block),
      CJ_RECORD_FIELD(dim),
      CJ_RECORD_FIELD(rank),
      CJ_RECORD_FIELD(index),
      CJ_RECORD_FIELD(shape),
      CJ_RECORD_FIELD(file),
      CJ_RECORD_FIELD(message),
      {"debug shape capacity", "sizeof(CjDebugRecord().shape) / 8", cj::abi::kDebugShapeDims},
      {"virtual block threads", "::cj::detail::kVirtualBlockThreads", kVirtualBlockThreads},
      {"elementwise vectors", "::cj::abi::kElementwiseVectors", kElementwiseVectors},
      {"contiguous flag", "::cj::Layout<" + std::to_string(kContiguousFlag) + ">::contiguous", 1},
      {"aligned16 flag", "::cj::Layout<" + std::to_string(kAligned16Flag) + ">::aligned16", 1},
      {"index32 flag", "::cj::Layout<" + std::to_string(kIndex32Flag) + ">::index32", 1},
      {"flags are apart", "::cj::Layout<" + std::to_string(kKnownLayoutFlags & ~kIndex32Flag) +
                              ">::index32", 0},
  };
  // A cj::Array argument of every rank a key allows, and of each layout, is what the host packs.
  for (int rank : {0, 1, 2, 5, 16})
    for (const char* layout : {"::cj::Strided", "::cj::Layout<7>"})
      facts.push_back({"array bytes of rank " + std::to_string(rank),
                       "sizeof(::cj::Array<double, " + std::to_string(rank) + ", " + layout + ">)",
                       cj::abi::array_bytes(rank)});
  struct Code {
    const char* type;
    TypeCode code;
  };
  const Code codes[] = {
      {"bool", TypeCode::kBool},
      {"signed char", TypeCode::kInt8},
      {"unsigned char", TypeCode::kUInt8},
      {"short", TypeCode::kInt16},
      {"unsigned short", TypeCode::kUInt16},
      {"int", TypeCode::kInt32},
      {"unsigned int", TypeCode::kUInt32},
      {"long long", TypeCode::kInt64},
      {"unsigned long long", TypeCode::kUInt64},
      {"__half", TypeCode::kHalf},
      {"__nv_bfloat16", TypeCode::kBFloat16},
      {"float", TypeCode::kFloat},
      {"double", TypeCode::kDouble},
      {"::cj::complex<float>", TypeCode::kComplexFloat},
      {"::cj::complex<double>", TypeCode::kComplexDouble},
      {"float4", TypeCode::kUnknown},
      {"::cj::Array<float, 2>", TypeCode::kArray},
      {"const float*", TypeCode::kPointer},
  };
  for (const Code& c : codes)
    facts.push_back({"type code", std::string("::cj::detail::type_code<") + c.type + ">::value",
                     static_cast<int>(c.code)});
  return facts;
}

// The program that holds the device to `facts`.
std::string check_program(const std::vector<Fact>& facts) {
  std::ostringstream os;
  os << "#include <cj/cj.cuh>\n";
  for (const Fact& f : facts)
    os << "static_assert((long long)(" << f.device << ") == " << f.host << "LL, \"" << f.what
       << ": the device's " << f.device << " is not the host's " << f.host << "\");\n";
  return os.str();
}

TEST(AbiTest, DeviceHeadersAgreeWithTheHost) {
  const std::vector<Fact> facts = host_facts();
  const Compiled c = nvrtc_compile(check_program(facts));
  EXPECT_TRUE(c.ok) << c.log;
}

TEST(AbiTest, ConstantsAreNotEmittedIntoModules) {
  // A namespace-scope variable would be a module global named differently by every compile, so
  // that the same kernel would compile to different code.
  const Compiled c = nvrtc_compile(
      "#include <cj/cj.cuh>\n"
      "__global__ void k(cj::Array<float, 2> a, int* p) {\n"
      "  a(0, 0) = ::cj::abi::kVectorBytes + ::cj::abi::kElementwiseVectors +\n"
      "            ::cj::abi::kDebugShapeDims + ::cj::abi::array_bytes(p[0]);\n"
      "  cj_assert(p[1], \"message\");\n"
      "}\n");
  ASSERT_TRUE(c.ok) << c.log;
  EXPECT_EQ(c.ptx.find("3abi"), std::string::npos) << c.ptx;
}

TEST(AbiTest, ADisagreementFailsToCompile) {
  // The check has teeth: each fact changed on the host side alone is refused by NVRTC.
  const std::vector<Fact> facts = host_facts();
  for (const char* name : {"debug record size", "debug record index", "virtual block threads",
                           "array bytes of rank 2", "type code"}) {
    SCOPED_TRACE(name);
    std::vector<Fact> wrong;
    for (const Fact& f : facts)
      if (f.what == name) wrong = {f};
    ASSERT_EQ(wrong.size(), 1u);
    wrong[0].host += 8;
    const Compiled compiled = nvrtc_compile(check_program(wrong));
    EXPECT_FALSE(compiled.ok);
    CJ_EXPECT_CONTAINS(compiled.log, "is not the host's");
  }
}

}  // namespace
}  // namespace torch_cudajit
