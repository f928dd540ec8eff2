// torch_cudajit C++ tests: specialization keys and type codes (csrc/specialization.h): SpecKey
// equality and hashing, type names and codes, the C++ types handed to the deduction helper,
// readable signatures, generated instantiation text and parsing of lowered probe names.
#include "specialization.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <string>
#include <unordered_set>
#include <vector>

namespace torch_cudajit {
namespace {

using cjtest::expect_throws;
using cjtest::make_spec_key;
using cjtest::number_sig;
using cjtest::aligned_sig;
using cjtest::tensor_sig;

SpecKey base_key() {
  return make_spec_key(90, {tensor_sig(TypeCode::kFloat, 2, true),
                            tensor_sig(TypeCode::kFloat, 2, false), number_sig(ArgKind::kFloat)});
}

TEST(SpecKeyTest, EqualKeysHashEqual) {
  SpecKey a = base_key();
  SpecKey b = base_key();
  EXPECT_TRUE(a == b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(SpecKeyHash()(a), a.hash());
  // Entries past `size` are not part of the key.
  b.args[5] = tensor_sig(TypeCode::kDouble, 3);
  EXPECT_TRUE(a == b);
  EXPECT_EQ(a.hash(), b.hash());
}

TEST(SpecKeyTest, DifferentKeysDiffer) {
  struct Case {
    const char* title;
    void (*change)(SpecKey&);
  };
  const std::vector<Case> cases = {
      {"dtype", [](SpecKey& k) { k.args[0].dtype = TypeCode::kDouble; }},
      {"rank", [](SpecKey& k) { k.args[1].rank = 3; }},
      {"contiguous flag", [](SpecKey& k) { k.args[1].flags = kContiguousFlag; }},
      {"argument kind", [](SpecKey& k) { k.args[2].kind = ArgKind::kInt; }},
      {"arch", [](SpecKey& k) { k.arch = 80; }},
      {"one more argument", [](SpecKey& k) { k.args[k.size++] = number_sig(ArgKind::kBool); }},
      {"one argument less", [](SpecKey& k) { --k.size; }},
  };
  const SpecKey base = base_key();
  std::unordered_set<size_t> hashes = {base.hash()};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    SpecKey k = base_key();
    c.change(k);
    EXPECT_FALSE(k == base);
    EXPECT_FALSE(base == k);
    EXPECT_NE(k.hash(), base.hash());
    hashes.insert(k.hash());
  }
  EXPECT_EQ(hashes.size(), cases.size() + 1);
}

TEST(SpecKeyTest, WorksAsUnorderedSetKey) {
  std::unordered_set<SpecKey, SpecKeyHash> set;
  set.insert(base_key());
  set.insert(base_key());
  SpecKey other = base_key();
  other.arch = 100;
  set.insert(other);
  EXPECT_EQ(set.size(), 2u);
  EXPECT_EQ(set.count(base_key()), 1u);
}

TEST(TypeCodeTest, TypeCodeOfNames) {
  const std::vector<std::pair<std::string, TypeCode>> cases = {
      {"bool", TypeCode::kBool},
      {"char", TypeCode::kInt8},
      {"signed char", TypeCode::kInt8},
      {"int8_t", TypeCode::kInt8},
      {"std::int8_t", TypeCode::kInt8},
      {"unsigned char", TypeCode::kUInt8},
      {"uint8_t", TypeCode::kUInt8},
      {"short", TypeCode::kInt16},
      {"int16_t", TypeCode::kInt16},
      {"unsigned short", TypeCode::kUInt16},
      {"int", TypeCode::kInt32},
      {"signed", TypeCode::kInt32},
      {"int32_t", TypeCode::kInt32},
      {"unsigned", TypeCode::kUInt32},
      {"unsigned int", TypeCode::kUInt32},
      {"uint32_t", TypeCode::kUInt32},
      {"long", TypeCode::kInt64},
      {"long long", TypeCode::kInt64},
      {"int64_t", TypeCode::kInt64},
      {"::std::int64_t", TypeCode::kInt64},
      {"ptrdiff_t", TypeCode::kInt64},
      {"unsigned long long", TypeCode::kUInt64},
      {"uint64_t", TypeCode::kUInt64},
      {"size_t", TypeCode::kUInt64},
      {"std::size_t", TypeCode::kUInt64},
      {"__half", TypeCode::kHalf},
      {"half", TypeCode::kHalf},
      {"__nv_bfloat16", TypeCode::kBFloat16},
      {"nv_bfloat16", TypeCode::kBFloat16},
      {"float", TypeCode::kFloat},
      {"double", TypeCode::kDouble},
      {"cj::complex<float>", TypeCode::kComplexFloat},
      {"::cj::complex<float>", TypeCode::kComplexFloat},
      {"cj::complex<double>", TypeCode::kComplexDouble},
      {"cuComplex", TypeCode::kComplexFloat},
      {"cuFloatComplex", TypeCode::kComplexFloat},
      {"cuDoubleComplex", TypeCode::kComplexDouble},
      {"thrust::complex<float>", TypeCode::kComplexFloat},
      {"::thrust::complex<double>", TypeCode::kComplexDouble},
      {"cuda::std::complex<float>", TypeCode::kComplexFloat},
      {"::cuda::std::complex<double>", TypeCode::kComplexDouble},
      {"std::complex<double>", TypeCode::kComplexDouble},
      {"c10::complex<float>", TypeCode::kComplexFloat},
      {"thrust::complex<half>", TypeCode::kUnknown},
      {"T", TypeCode::kUnknown},
      {"MyStruct", TypeCode::kUnknown},
      {"float4", TypeCode::kUnknown},
      {"", TypeCode::kUnknown},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE("'" + c.first + "'");
    EXPECT_EQ(static_cast<int>(type_code_of(c.first)), static_cast<int>(c.second));
  }
}

TEST(TypeCodeTest, NamesSizesAndCategories) {
  struct Case {
    TypeCode code;
    const char* cpp;
    const char* dtype;
    size_t size;
    bool integer, signed_integer, floating, complex;
  };
  const std::vector<Case> cases = {
      {TypeCode::kBool, "bool", "bool", 1, false, false, false, false},
      {TypeCode::kInt8, "signed char", "int8", 1, true, true, false, false},
      {TypeCode::kUInt8, "unsigned char", "uint8", 1, true, false, false, false},
      {TypeCode::kInt16, "short", "int16", 2, true, true, false, false},
      {TypeCode::kUInt16, "unsigned short", "uint16", 2, true, false, false, false},
      {TypeCode::kInt32, "int", "int32", 4, true, true, false, false},
      {TypeCode::kUInt32, "unsigned int", "uint32", 4, true, false, false, false},
      {TypeCode::kInt64, "long long", "int64", 8, true, true, false, false},
      {TypeCode::kUInt64, "unsigned long long", "uint64", 8, true, false, false, false},
      {TypeCode::kHalf, "__half", "float16", 2, false, false, true, false},
      {TypeCode::kBFloat16, "__nv_bfloat16", "bfloat16", 2, false, false, true, false},
      {TypeCode::kFloat, "float", "float32", 4, false, false, true, false},
      {TypeCode::kDouble, "double", "float64", 8, false, false, true, false},
      {TypeCode::kComplexFloat, "::cj::complex<float>", "complex64", 8, false, false, false, true},
      {TypeCode::kComplexDouble, "::cj::complex<double>", "complex128", 16, false, false, false,
       true},
      {TypeCode::kUnknown, "?", "?", 0, false, false, false, false},
      {TypeCode::kArray, "?", "?", 0, false, false, false, false},
      {TypeCode::kPointer, "?", "?", 0, false, false, false, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string("code ") + std::to_string(static_cast<int>(c.code)));
    EXPECT_STREQ(cpp_type_name(c.code), c.cpp);
    EXPECT_STREQ(dtype_name(c.code), c.dtype);
    EXPECT_EQ(type_size(c.code), c.size);
    EXPECT_EQ(is_integer(c.code), c.integer);
    EXPECT_EQ(is_signed_integer(c.code), c.signed_integer);
    EXPECT_EQ(is_floating(c.code), c.floating);
    EXPECT_EQ(is_complex(c.code), c.complex);
    // Every element type's C++ name maps back to its code.
    if (c.size > 0) EXPECT_EQ(static_cast<int>(type_code_of(c.cpp)), static_cast<int>(c.code));
  }
}

TEST(TypeCodeTest, VectorTypes) {
  struct Case {
    std::string name;
    TypeCode element;
    int lanes;  // 0: not a vector type
  };
  const std::vector<Case> cases = {
      {"float4", TypeCode::kFloat, 4},       {"float2", TypeCode::kFloat, 2},
      {"float3", TypeCode::kFloat, 3},       {"float1", TypeCode::kFloat, 1},
      {"int4", TypeCode::kInt32, 4},         {"uint2", TypeCode::kUInt32, 2},
      {"char4", TypeCode::kInt8, 4},         {"uchar4", TypeCode::kUInt8, 4},
      {"short2", TypeCode::kInt16, 2},       {"ushort4", TypeCode::kUInt16, 4},
      {"long2", TypeCode::kInt64, 2},        {"ulong3", TypeCode::kUInt64, 3},
      {"longlong2", TypeCode::kInt64, 2},    {"ulonglong4", TypeCode::kUInt64, 4},
      {"double2", TypeCode::kDouble, 2},     {"double4_32a", TypeCode::kDouble, 4},
      {"long4_16a", TypeCode::kInt64, 4},    {"::float4", TypeCode::kFloat, 4},
      {"__half2", TypeCode::kHalf, 2},       {"half2", TypeCode::kHalf, 2},
      {"__nv_bfloat162", TypeCode::kBFloat16, 2}, {"nv_bfloat162", TypeCode::kBFloat16, 2},
      {"float", TypeCode::kUnknown, 0},      {"float5", TypeCode::kUnknown, 0},
      {"cuComplex", TypeCode::kUnknown, 0},  {"Vec", TypeCode::kUnknown, 0},
      {"const float4", TypeCode::kUnknown, 0}, {"", TypeCode::kUnknown, 0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE("'" + c.name + "'");
    const VectorType* v = vector_type_of(c.name);
    if (c.lanes == 0) {
      EXPECT_EQ(v, nullptr);
      continue;
    }
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(static_cast<int>(v->element), static_cast<int>(c.element));
    EXPECT_EQ(v->lanes, c.lanes);
  }
}

// The declaration each parameter of `source` (one kernel) reflects to.
std::vector<Param> params_of(const std::string& source) {
  auto kernels = cjtest::reflect(source);
  EXPECT_EQ(kernels.size(), 1u);
  return kernels.empty() ? std::vector<Param>{} : kernels[0].params;
}

TEST(SpecializationTest, ArgumentCppType) {
  const std::vector<Param> p = params_of(
      "template <class T>\n"
      "__global__ void k(cj::Array<const float, 2> a, cj::Array<T, 1> b, const float* c, T* d,\n"
      "                  auto e, float s, long* g, MyStruct h) {}");
  ASSERT_EQ(p.size(), 8u);
  struct Case {
    const char* title;
    size_t param;
    ArgSig sig;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"const array, contiguous", 0, tensor_sig(TypeCode::kFloat, 2, true),
       "::cj::Array<const float, 2, ::cj::Layout<1>>"},
      {"const array, strided", 0, tensor_sig(TypeCode::kFloat, 2, false),
       "::cj::Array<const float, 2, ::cj::Layout<0>>"},
      {"template array takes the dtype's type", 1, tensor_sig(TypeCode::kHalf, 1, true),
       "::cj::Array<__half, 1, ::cj::Layout<1>>"},
      {"template array, int64", 1, tensor_sig(TypeCode::kInt64, 1, false),
       "::cj::Array<long long, 1, ::cj::Layout<0>>"},
      {"const pointer", 2, tensor_sig(TypeCode::kFloat, 1), "const float*"},
      {"template pointer", 3, tensor_sig(TypeCode::kDouble, 3), "double*"},
      {"auto", 4, tensor_sig(TypeCode::kInt32, 2, true), "::cj::Array<int, 2, ::cj::Layout<1>>"},
      {"0-d tensor to a scalar", 5, tensor_sig(TypeCode::kDouble, 0), "double"},
      {"declared element spelling kept", 6, tensor_sig(TypeCode::kInt64, 1), "long*"},
      {"Python int", 5, number_sig(ArgKind::kInt), "long long"},
      {"Python float", 5, number_sig(ArgKind::kFloat), "double"},
      {"Python bool", 5, number_sig(ArgKind::kBool), "bool"},
      {"Python complex", 5, number_sig(ArgKind::kComplex), "::cj::complex<double>"},
      {"extension bytes", 7, number_sig(ArgKind::kBytes), "MyStruct"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    EXPECT_EQ(argument_cpp_type(p[c.param], c.sig), c.want);
  }
}

// Concrete pointees go to the helper as written (the pointee probe checks them); dependent
// ones take the tensor's dtype; an address is a nullptr that converts to any pointer.
// A tag's value travels in the key and becomes the tag type's value argument.
TEST(SpecializationTest, TagValues) {
  struct Case {
    const char* type;
    bool is_bool;
    int16_t value;
    const char* want;
  };
  const std::vector<Case> cases = {
      {"std::bool_constant<B>", true, 1, "std::bool_constant<true>"},
      {"std::bool_constant<B>", true, 0, "std::bool_constant<false>"},
      {"cuda::std::integral_constant<int, N>", false, 7, "cuda::std::integral_constant<int, 7>"},
      {"std::integral_constant<int, N>", false, -32768, "std::integral_constant<int, (-32768)>"},
      {"std::integral_constant<int, N>", false, 32767, "std::integral_constant<int, 32767>"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.type) + " = " + std::to_string(c.value));
    Param p;
    p.name = "t";
    p.type = c.type;
    p.kind = ParamKind::kScalar;
    p.tag = true;
    ArgSig s;
    set_tag(s, c.is_bool, c.value);
    EXPECT_EQ(s.kind, ArgKind::kTag);
    EXPECT_EQ(tag_value(s), c.value);
    EXPECT_EQ(argument_cpp_type(p, s), c.want);
    KernelDecl d;
    d.name = "k";
    d.params = {p};
    SpecKey key;
    key.arch = 90;
    key.size = 1;
    key.args[0] = s;
    EXPECT_EQ(describe_signature(d, key), std::string("(") + c.want + ")");
    check_key(d, key, "a test key");  // valid
    d.params[0].tag = false;
    CJ_EXPECT_CONTAINS(expect_throws<c10::ValueError>([&] { check_key(d, key, "a test key"); }),
                       "a tag value, which only integral_constant and bool_constant parameters");
  }
}

TEST(SpecializationTest, ArgumentCppTypeOfPointees) {
  const std::vector<Param> p = params_of(
      "template <class T, int N>\n"
      "__global__ void k(const float4* a, Vec* b, scalar_t* c, T* d, const Box<T>* e,\n"
      "                  const cuComplex* f, void* g, cj::Array<T, N> h, float s) {}");
  ASSERT_EQ(p.size(), 9u);
  struct Case {
    const char* title;
    size_t param;
    ArgSig sig;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"vector type", 0, tensor_sig(TypeCode::kFloat, 1), "const float4*"},
      {"struct", 1, tensor_sig(TypeCode::kInt32, 1), "Vec*"},
      {"typedef", 2, tensor_sig(TypeCode::kHalf, 1), "scalar_t*"},
      {"template parameter", 3, tensor_sig(TypeCode::kHalf, 1), "__half*"},
      {"dependent template", 4, tensor_sig(TypeCode::kFloat, 1), "const float*"},
      {"complex spelling", 5, tensor_sig(TypeCode::kComplexFloat, 1), "const cuComplex*"},
      {"void", 6, tensor_sig(TypeCode::kDouble, 1), "void*"},
      {"address to a concrete pointer", 0, number_sig(ArgKind::kAddress), "decltype(nullptr)"},
      {"address to a template pointer", 3, number_sig(ArgKind::kAddress), "decltype(nullptr)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    EXPECT_EQ(argument_cpp_type(p[c.param], c.sig), c.want);
  }
  const std::vector<bool> dependent = {false, false, false, true, true, false, false, true, false};
  for (size_t i = 0; i < p.size(); ++i) {
    SCOPED_TRACE(p[i].name);
    EXPECT_EQ(p[i].element_dependent, dependent[i]);
  }
}

TEST(SpecializationTest, DescribeSignature) {
  auto kernels = cjtest::reflect(
      "__global__ void k(cj::Array<const float, 2> a, cj::Array<float, 1> b, float* c, float s,\n"
      "                  int n, bool f, auto z, MyStruct m) {}");
  ASSERT_EQ(kernels.size(), 1u);
  SpecKey key = make_spec_key(
      90, {aligned_sig(TypeCode::kFloat, 2, true), aligned_sig(TypeCode::kFloat, 1, false),
           tensor_sig(TypeCode::kFloat, 1), tensor_sig(TypeCode::kDouble, 0),
           number_sig(ArgKind::kInt), number_sig(ArgKind::kBool), number_sig(ArgKind::kComplex),
           number_sig(ArgKind::kBytes)});
  EXPECT_EQ(describe_signature(kernels[0], key),
            "(Array<const float32, 2, contiguous>, Array<float32, 1, strided>, float32*, float64, "
            "int, bool, complex, MyStruct)");
  // tensor_sig alone stands for unaligned data with 64-bit offsets: signatures name that.
  SpecKey floats = make_spec_key(
      90, {tensor_sig(TypeCode::kHalf, 2, false), aligned_sig(TypeCode::kBFloat16, 1, true),
           tensor_sig(TypeCode::kFloat, 1), number_sig(ArgKind::kFloat), number_sig(ArgKind::kInt),
           number_sig(ArgKind::kBool), aligned_sig(TypeCode::kInt64, 3, true),
           number_sig(ArgKind::kBytes)});
  EXPECT_EQ(describe_signature(kernels[0], floats),
            "(Array<const float16, 2, strided, unaligned, 64-bit index>, Array<bfloat16, 1, contiguous>, "
            "float32*, float, int, bool, Array<int64, 3, contiguous>, MyStruct)");
  SpecKey address = floats;
  address.args[2] = number_sig(ArgKind::kAddress);
  CJ_EXPECT_CONTAINS(describe_signature(kernels[0], address), "contiguous>, address, float,");

  auto vectors = cjtest::reflect("__global__ void v(const float4* a, __half2* b, Vec* c) {}");
  ASSERT_EQ(vectors.size(), 1u);
  EXPECT_EQ(describe_signature(vectors[0], make_spec_key(90, {tensor_sig(TypeCode::kFloat, 1),
                                                              tensor_sig(TypeCode::kHalf, 1),
                                                              tensor_sig(TypeCode::kInt32, 1)})),
            "(const float4*, __half2*, int32*)");
}

TEST(SpecializationTest, AddressKeyHasItsOwnHelper) {
  auto kernels = cjtest::reflect(
      "template <class T>\n__global__ void bias(T* out, const T* __restrict__ b, T s) {}");
  ASSERT_EQ(kernels.size(), 1u);
  const KernelDecl& k = kernels[0];
  SpecKey key = make_spec_key(90, {tensor_sig(TypeCode::kFloat, 1), number_sig(ArgKind::kAddress),
                                   number_sig(ArgKind::kFloat)});
  Instantiation inst = make_instantiation(k, key, "", "3");
  // Both overloads of the key's helper leave the address's parameter to the other arguments.
  const std::string nondeduced =
      "typename ::cj::detail::nondeduced<const T* __restrict__>::type cj_p1";
  CJ_EXPECT_CONTAINS(inst.alias_definition,
                     "template <class T>\n__device__ auto cj_detail_sig_bias_3(::cj::detail::"
                     "priority<1>, T* cj_p0, " + nondeduced +
                     ", typename ::cj::detail::nondeduced<T>::type cj_p2) -> ::cj::detail::Sig<");
  CJ_EXPECT_CONTAINS(inst.alias_definition, "cj_detail_sig_bias_3(::cj::detail::priority<0>, T* "
                                            "cj_p0, " + nondeduced + ", T cj_p2) -> ");
  CJ_EXPECT_CONTAINS(inst.alias_definition,
                     "using cj_detail_spec_3 = decltype(cj_detail_sig_bias_3(::cj::detail::"
                     "priority<1>{}, ::cj::detail::declval<float*>(), ::cj::detail::declval<"
                     "decltype(nullptr)>(), ::cj::detail::declval<double>()));\n");
  // The kernel's shared helper is untouched: keys without addresses keep deducing from it.
  EXPECT_EQ(deduction_helper(k).find("nondeduced<const T*"), std::string::npos);
  SpecKey tensors = key;
  tensors.args[1] = tensor_sig(TypeCode::kFloat, 1);
  CJ_EXPECT_CONTAINS(make_instantiation(k, tensors, "", "4").alias_definition,
                     "using cj_detail_spec_4 = decltype(cj_detail_sig_bias(");
  // Pointer parameters probe their pointee; others themselves.
  ASSERT_EQ(inst.probe_expressions.size(), 3u);
  EXPECT_EQ(inst.probe_expressions[1],
            "&::cj::detail::probe<::cj::detail::pointee<cj_detail_spec_3::arg<1>>::code, "
            "::cj::detail::pointee<cj_detail_spec_3::arg<1>>::size, "
            "::cj::detail::pointee<cj_detail_spec_3::arg<1>>::align>");
  CJ_EXPECT_CONTAINS(inst.probe_expressions[2], "type_code<cj_detail_spec_3::arg<2>>::value");
}

// Parameters whose probe the declaration and key fix get no probe expression: NVRTC is not
// asked to instantiate it, and the compile reports the same values (program_test).
TEST(SpecializationTest, KnownProbesNeedNoExpression) {
  auto kernels = cjtest::reflect(
      "struct Pair { int a, b; };\n"
      "template <class T> __global__ void k(cj::Array<float, 2> a, const float* p, double d, "
      "float4* v, T* t, T s, Pair* q, cj::Array<T, 1> b) {}");
  ASSERT_EQ(kernels.size(), 1u);
  const SpecKey key = make_spec_key(
      90, {tensor_sig(TypeCode::kFloat, 2), tensor_sig(TypeCode::kFloat, 1), number_sig(ArgKind::kFloat),
           tensor_sig(TypeCode::kFloat, 1), tensor_sig(TypeCode::kHalf, 1), number_sig(ArgKind::kFloat),
           tensor_sig(TypeCode::kInt32, 1), tensor_sig(TypeCode::kHalf, 1)});
  const Instantiation inst = make_instantiation(kernels[0], key, "", "1");
  struct Case {
    const char* param;
    bool known;
    TypeCode code;
    uint32_t size, align;
  };
  const Case cases[] = {{"a", true, TypeCode::kArray, 40, 8},  {"p", true, TypeCode::kFloat, 4, 4},
                        {"d", true, TypeCode::kDouble, 8, 8},  {"v", false, TypeCode::kUnknown, 0, 0},
                        {"t", false, TypeCode::kUnknown, 0, 0}, {"s", false, TypeCode::kUnknown, 0, 0},
                        {"q", false, TypeCode::kUnknown, 0, 0}, {"b", true, TypeCode::kArray, 24, 8}};
  ASSERT_EQ(inst.probe_expressions.size(), 8u);
  ASSERT_EQ(inst.known_probes.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    SCOPED_TRACE(cases[i].param);
    EXPECT_EQ(inst.probe_expressions[i].empty(), cases[i].known);
    if (!cases[i].known) continue;
    EXPECT_EQ(inst.known_probes[i].code, cases[i].code);
    EXPECT_EQ(inst.known_probes[i].size, cases[i].size);
    EXPECT_EQ(inst.known_probes[i].align, cases[i].align);
  }
}

TEST(SpecializationTest, InstantiationTagDependsOnKernelAndKeyAlone) {
  auto kernels = cjtest::reflect("template <class T> __global__ void a(T* x) {}\n"
                                 "template <class T> __global__ void b(T* x) {}");
  ASSERT_EQ(kernels.size(), 2u);
  const SpecKey f = make_spec_key(90, {tensor_sig(TypeCode::kFloat, 1)});
  const SpecKey d = make_spec_key(90, {tensor_sig(TypeCode::kDouble, 1)});
  const std::string tag = instantiation_tag(kernels[0], f);
  EXPECT_EQ(tag.size(), 12u);
  EXPECT_EQ(tag.find_first_not_of("0123456789abcdef"), std::string::npos);
  struct Case {
    const char* name;
    std::string other;
    bool same;
  };
  const Case cases[] = {
      {"same kernel and key", instantiation_tag(kernels[0], f), true},
      {"another key", instantiation_tag(kernels[0], d), false},
      {"another kernel", instantiation_tag(kernels[1], f), false},
      // The architecture is not in the source: one spelling for every target.
      {"another architecture", instantiation_tag(kernels[0], make_spec_key(80, {tensor_sig(TypeCode::kFloat, 1)})), true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.other == tag, c.same);
  }
}

TEST(SpecializationTest, CheckKey) {
  auto kernels = cjtest::reflect(
      "__global__ void k(const float* p, cj::Array<float, 1> a, float s) {}");
  ASSERT_EQ(kernels.size(), 1u);
  const KernelDecl& k = kernels[0];
  auto key = [](ArgSig p, ArgSig a, ArgSig s) { return make_spec_key(90, {p, a, s}); };
  const ArgSig t = tensor_sig(TypeCode::kFloat, 1), f = number_sig(ArgKind::kFloat);
  const ArgSig address = number_sig(ArgKind::kAddress);
  ArgSig address_with_dtype = address;
  address_with_dtype.dtype = TypeCode::kFloat;
  ArgSig kind_past_tag = address;
  kind_past_tag.kind = static_cast<ArgKind>(9);
  // What the call binder produces passes.
  check_key(k, key(t, t, f), "a test key");
  check_key(k, key(address, t, f), "a test key");
  struct Case {
    const char* title;
    SpecKey key;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"address to an Array", key(t, address, f),
       "parameter 'a' has an address (None or cj.DevicePointer), which only pointer parameters take"},
      {"address to a scalar", key(t, t, address), "parameter 's' has an address"},
      {"address with a dtype", key(address_with_dtype, t, f),
       "parameter 'p' has a dtype, rank or layout flags on a non-tensor argument"},
      {"unknown kind", key(kind_past_tag, t, f),
       "parameter 'p' has argument kind 9 (expected 1 to 8)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.title);
    std::string msg = expect_throws<c10::ValueError>([&] { check_key(k, c.key, "a test key"); });
    CJ_EXPECT_CONTAINS(msg, "a test key of kernel 'k' is damaged: " + c.message);
  }
}

TEST(SpecializationTest, DeductionHelperAndInstantiation) {
  auto kernels = cjtest::reflect(
      "template <class T>\n"
      "__global__ void axpy(cj::Array<T, 1> y, cj::Array<const T, 1> x, T a) {}");
  ASSERT_EQ(kernels.size(), 1u);
  const KernelDecl& k = kernels[0];
  const std::string helper = deduction_helper(k);
  // The preferred overload makes scalars non-deduced; the fallback deduces them.
  CJ_EXPECT_CONTAINS(helper, "template <class T, class CjL0, class CjL1>\n__device__ auto cj_detail_sig_axpy(");
  CJ_EXPECT_CONTAINS(helper,
                     "cj_detail_sig_axpy(::cj::detail::priority<1>, cj::Array<T, 1, CjL0> cj_p0, "
                     "cj::Array<const T, 1, CjL1> cj_p1, typename ::cj::detail::nondeduced<T>::type "
                     "cj_p2)");
  CJ_EXPECT_CONTAINS(helper, "cj_detail_sig_axpy(::cj::detail::priority<0>, cj::Array<T, 1, CjL0> "
                             "cj_p0, cj::Array<const T, 1, CjL1> cj_p1, T cj_p2)");
  CJ_EXPECT_CONTAINS(helper, "-> ::cj::detail::Sig<decltype(cj_p0), decltype(cj_p1), decltype(cj_p2)>;");

  SpecKey key = make_spec_key(90, {tensor_sig(TypeCode::kFloat, 1), tensor_sig(TypeCode::kFloat, 1),
                                   number_sig(ArgKind::kFloat)});
  Instantiation inst = make_instantiation(k, key, "", "7");
  EXPECT_EQ(inst.alias_definition,
            "using cj_detail_spec_7 = decltype(cj_detail_sig_axpy(::cj::detail::priority<1>{}, "
            "::cj::detail::declval<::cj::Array<float, 1, ::cj::Layout<1>>>(), "
            "::cj::detail::declval<::cj::Array<const float, 1, ::cj::Layout<1>>>(), "
            "::cj::detail::declval<double>()));\n");
  EXPECT_EQ(inst.kernel_expression, "static_cast<cj_detail_spec_7::fn>(axpy)");
  ASSERT_EQ(inst.probe_expressions.size(), 3u);
  EXPECT_EQ(inst.probe_expressions[2],
            "&::cj::detail::probe<::cj::detail::type_code<cj_detail_spec_7::arg<2>>::value, "
            "sizeof(cj_detail_spec_7::arg<2>), alignof(cj_detail_spec_7::arg<2>)>");

  // Explicit template arguments name the helper and the kernel.
  Instantiation explicit_args = make_instantiation(k, key, "float", "0");
  CJ_EXPECT_CONTAINS(explicit_args.alias_definition, "decltype(cj_detail_sig_axpy<float>(");
  EXPECT_EQ(explicit_args.kernel_expression, "static_cast<cj_detail_spec_0::fn>(axpy<float>)");
}

TEST(SpecializationTest, ParseProbe) {
  struct Case {
    std::string lowered;
    TypeCode code;
    uint32_t size, align;
  };
  const std::vector<Case> cases = {
      {"_ZN2cj6detail5probeILx3ELy4ELy4EEE", TypeCode::kInt16, 4, 4},
      {"_ZN2cj6detail5probeILx11ELy4ELy4EEE", TypeCode::kFloat, 4, 4},
      {"_ZN2cj6detail5probeILx0ELy1ELy1EEE", TypeCode::kBool, 1, 1},
      {"_ZN2cj6detail5probeILx14ELy16ELy16EEE", TypeCode::kComplexDouble, 16, 16},
      {"_ZN2cj6detail5probeILxn2ELy40ELy8EEE", TypeCode::kArray, 40, 8},
      {"_ZN2cj6detail5probeILxn3ELy8ELy8EEE", TypeCode::kPointer, 8, 8},
      {"_ZN2cj6detail5probeILxn1ELy24ELy8EEE", TypeCode::kUnknown, 24, 8},
      // The pointee probe of a void* (no size, no alignment).
      {"_ZN2cj6detail5probeILxn1ELy0ELy0EEE", TypeCode::kUnknown, 0, 0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.lowered);
    ParamProbe p = parse_probe(c.lowered);
    EXPECT_EQ(static_cast<int>(p.code), static_cast<int>(c.code));
    EXPECT_EQ(p.size, c.size);
    EXPECT_EQ(p.align, c.align);
  }
}

TEST(SpecializationTest, ParseProbeRejectsOtherNames) {
  for (const std::string bad : {"", "_Z5saxpyPf", "_ZN2cj6detail5probeILx3ELy4EEE"}) {
    SCOPED_TRACE("'" + bad + "'");
    std::string msg = expect_throws<c10::Error>([&] { parse_probe(bad); });
    CJ_EXPECT_CONTAINS(msg, "unexpected probe name");
  }
}

}  // namespace
}  // namespace torch_cudajit

namespace torch_cudajit {
namespace {

TEST(TemplateArgumentsTest, SplitsPositionalThenNamed) {
  struct Case {
    const char* text;
    std::vector<std::string> positional;
    std::vector<std::pair<std::string, std::string>> named;
  };
  const std::vector<Case> cases = {
      {"", {}, {}},
      {"float, 4", {"float", "4"}, {}},
      {"BLOCK=256", {}, {{"BLOCK", "256"}}},
      {"float, BLOCK = 2 * 128", {"float"}, {{"BLOCK", "2 * 128"}}},
      {"cj::Vec<float, 4>, N=(3 > 2)", {"cj::Vec<float, 4>"}, {{"N", "(3 > 2)"}}},
      {"(N == 4)", {"(N == 4)"}, {}},  // a comparison is no name
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const TemplateArguments got = split_template_args(c.text);
    EXPECT_EQ(got.positional, c.positional);
    EXPECT_EQ(got.named, c.named);
  }
  CJ_EXPECT_CONTAINS(cjtest::expect_throws<c10::ValueError>([] { split_template_args("N=1, float"); }),
                     "gives the positional argument 'float' after a named one");
}

TEST(TemplateArgumentsTest, NamesWhatKeepsAKernelFromBeingInstantiated) {
  const std::vector<KernelDecl> kernels = cjtest::reflect(
      "template <typename T, int BLOCK> __global__ void k(T* out) {}\n"
      "template <typename T, int N = 4> __global__ void d(T* out) {}\n"
      "template <typename... Ts> __global__ void p(Ts... xs) {}\n"
      "template <typename T, int> __global__ void u(T* out) {}\n");
  struct Case {
    size_t kernel;
    const char* template_args;
    const char* problem;  // "" for none
  };
  const std::vector<Case> cases = {
      {0, "", "has the template parameter 'BLOCK', which appears in none of its parameters' types"},
      {0, "BLOCK=128", ""},
      {0, "float, 128", ""},
      {0, "float, T=int", "gives its template parameter 'T' twice"},
      {0, "X=1", "has no template parameter 'X' (template_args names it); its template "
                 "parameters are 'T', 'BLOCK'."},
      {1, "", ""},  // a default
      {2, "", ""},  // a pack deduces an empty list at worst
      {2, "Ts=int", "names the parameter pack 'Ts'"},
      {3, "T=float", "has an unnamed template parameter ('int')"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(kernels[c.kernel].name + " with '" + c.template_args + "'");
    const std::string problem = template_args_problem(kernels[c.kernel], c.template_args);
    if (std::string(c.problem).empty())
      EXPECT_EQ(problem, "");
    else
      CJ_EXPECT_CONTAINS(problem, c.problem);
  }
}

}  // namespace
}  // namespace torch_cudajit
