// torch_cudajit: the kernel definition (see definition.h): bindings, effective options,
// fingerprint and pickled form, each computed once.
#include "definition.h"

#include "headers.h"

#include "reading.h"
#include "serialize.h"
#include "sha256.h"
#include "virtual_grid.h"

#include <algorithm>
#include <cctype>
#include <sstream>

namespace torch_cudajit {
namespace {

bool is_integer_literal(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

ParamBinding bind_param(const Param& p) {
  ParamBinding b;
  b.param = &p;
  b.role = param_role(p);
  b.element = type_code_of(p.element);
  b.scalar = type_code_of(scalar_type_of(p));
  if (p.kind == ParamKind::kArray && is_integer_literal(p.rank)) b.rank = std::stoi(p.rank);
  if (p.kind == ParamKind::kPointer) b.vector = vector_type_of(p.element);
  return b;
}

// Abbreviated function templates anywhere in the source need C++20 for the whole source.
std::string effective_std(const Program& program, const std::string& requested) {
  if (requested != "c++11" && requested != "c++14" && requested != "c++17") return requested;
  for (const auto& k : program.kernels())
    for (const auto& p : k.params)
      if (p.kind == ParamKind::kAuto) return "c++20";
  return requested;
}

constexpr const char* kStateFormat = "torch_cudajit kernel 1";
constexpr const char* kStateWhat = "a pickled cudajit.Kernel";

using State = KernelDefinition::State;

// with_state_args fills a State from its leading fields.
constexpr bool derived_fields_last() {
  bool derived = false, last = true;
#define CJ_CHECK_NOT_AFTER_DERIVED(...) last = last && !derived;
#define CJ_SEE_DERIVED(...) derived = true;
  CJ_KERNEL_STATE_FIELDS(CJ_CHECK_NOT_AFTER_DERIVED, CJ_CHECK_NOT_AFTER_DERIVED, CJ_SEE_DERIVED)
#undef CJ_CHECK_NOT_AFTER_DERIVED
#undef CJ_SEE_DERIVED
  return last;
}
static_assert(derived_fields_last(), "CJ_KERNEL_STATE_FIELDS: derived fields must come last");

// fingerprint_of hashes places 1, 2, ... up to the first that no field takes.
constexpr bool hash_places_are_one_to_n() {
#define CJ_HASH_PLACE(type, name, hash, ...) hash,
  const int places[] = {CJ_KERNEL_STATE_FIELDS(CJ_HASH_PLACE, CJ_HASH_PLACE, CJ_HASH_PLACE)};
#undef CJ_HASH_PLACE
  int hashed = 0;
  for (int p : places) hashed += p > 0;
  for (int want = 1; want <= hashed; ++want) {
    int seen = 0;
    for (int p : places) seen += p == want;
    if (seen != 1) return false;
  }
  return true;
}
static_assert(hash_places_are_one_to_n(),
              "CJ_KERNEL_STATE_FIELDS: the hashed fields take the places 1, 2, ... once each");

// For the rows of CJ_KERNEL_STATE_FIELDS that a use skips.
#define CJ_NOT_AN_OPTION(...)

// The fields the options and the declaration hold: everything but the program's.
State state_of(const KernelOptions& o, const std::string& requested_std, const std::string& kernel) {
  State s;
#define CJ_STATE_FROM_OPTION(type, name, hash, tag, member) s.name = o.member;
  CJ_KERNEL_STATE_FIELDS(CJ_NOT_AN_OPTION, CJ_STATE_FROM_OPTION, CJ_NOT_AN_OPTION)
#undef CJ_STATE_FROM_OPTION
  s.std = requested_std;  // o.compile.std is the effective standard
  s.name = kernel;
  return s;
}

// Encoding: each field is one "<length>:<bytes>" field (a flag "0" or "1", a number in decimal
// digits), a list its count and then its items.
void put(detail::Writer& w, const std::string& v) { w << v; }
void put(detail::Writer& w, bool v) { w << v; }
void put(detail::Writer& w, int64_t v) { w << std::to_string(v); }
void put(detail::Writer& w, const std::vector<std::string>& v) {
  w << v.size();
  for (const auto& item : v) w << item;
}

void get(detail::Reader& r, std::string& v) { v = r.text(); }
void get(detail::Reader& r, bool& v) { v = r.flag(); }
void get(detail::Reader& r, int64_t& v) { v = r.integer(); }
void get(detail::Reader& r, std::vector<std::string>& v) {
  v.resize(r.count(2));  // an item takes at least "0:"
  for (auto& item : v) item = r.text();
}

// Every text field was written from text (Python strings): bytes that are not UTF-8 are damage,
// and must not reach messages or names. The reflection is bytes.
void check_text(const char* field, const std::string& t) {
  TORCH_CHECK_VALUE(detail::utf8_text(t) == t, "torch_cudajit: ", kStateWhat, " has text that "
                    "is not UTF-8 in its field '", field, "'; it is damaged.");
}
void check_text(const char* field, const std::vector<std::string>& v) {
  for (const auto& t : v) check_text(field, t);
}
void check_text(const char*, const StateBytes&) {}
void check_text(const char*, bool) {}
void check_text(const char*, int64_t) {}

void hash(Sha256& h, const char*, const std::string& v) { h.field(v); }
void hash(Sha256& h, const char* tag, bool v) {
  TORCH_INTERNAL_ASSERT(tag, "a hashed flag of CJ_KERNEL_STATE_FIELDS needs a tag");
  h.field(v ? tag : "");
}
void hash(Sha256& h, const char*, int64_t v) { h.field(std::to_string(v)); }
void hash(Sha256& h, const char* tag, const std::vector<std::string>& v) {
  for (const auto& item : v) {
    if (tag) h.field(tag);
    h.field(item);
  }
}

// The program's digest (which stands for its source and file name), then the hashed fields in
// their places (StateField::hash: 1, 2, ...).
std::string fingerprint_of(const std::string& program_digest, const State& s) {
  Sha256 h;
  h.field(program_digest);
  for (int place = 1;; ++place) {
    bool found = false;
    s.for_each([&](const StateField& f, const auto& v) {
      if (f.hash != place) return;
      hash(h, f.tag, v);
      found = true;
    });
    if (!found) break;
  }
  return h.hex_digest().substr(0, 16);
}

}  // namespace

KernelDefinition::KernelDefinition(std::shared_ptr<const Program> program,
                                   const std::string& name, KernelOptions options)
    : program_(std::move(program)),
      decl_(&program_->kernel(name)),
      options_(std::move(options)),
      requested_std_(options_.compile.std) {
  TORCH_CHECK_VALUE(decl_->params.size() <= kMaxParams, "torch_cudajit: kernel '", decl_->name,
                    "' has ", decl_->params.size(), " parameters; at most ", kMaxParams,
                    " are supported.");
  options_.compile.std = effective_std(*program_, requested_std_);
  for (const Param& p : decl_->params) {
    bindings_.push_back(bind_param(p));
    roles_.push_back(bindings_.back().role);
  }
  // Decided once: the launch path only reads the flags.
  cooperative_ = options_.cooperative >= 0 ? options_.cooperative != 0
                                           : program_->cooperative(decl_->name);
  task_loop_ = program_->task_loop(decl_->name);
  if (options_.prebuilt)
    virtual_grid_refusal_ = "it is prebuilt code, which has no source to compile again";
  else if (cooperative_)
    virtual_grid_refusal_ = "it synchronizes the whole grid";
  else
    virtual_grid_refusal_ =
        torch_cudajit::virtual_grid_refusal(*program_, decl_->name, options_.compile);
  // Prebuilt code was instantiated when it was built.
  if (!options_.prebuilt) template_problem_ = template_args_problem(*decl_, options_.template_args);
  fingerprint_ = fingerprint_of(program_->digest(), state_of(options_, requested_std_, decl_->name));
}

CompileOptions KernelDefinition::compile_options() const {
  CompileOptions o = options_.compile;
  if (options_.prebuilt || !program_->uses_device_runtime()) return o;
  const std::string devrt = cudadevrt_library();
  TORCH_CHECK_VALUE(!devrt.empty(), "torch_cudajit: kernel '", decl_->name,
                    "' uses CUDA's device runtime (a launch from device code, or a function of "
                    "cuda_device_runtime_api.h), which needs the static library libcudadevrt.a; "
                    "it was not found beside the CUDA headers in use (",
                    cuda_include_dir(), "). Install the CUDA toolkit, or set CUDA_HOME to one.");
  if (std::find(o.link.begin(), o.link.end(), devrt) == o.link.end()) o.link.push_back(devrt);
  return o;
}

std::shared_ptr<const KernelDefinition> KernelDefinition::from_source(std::string source,
                                                                      const std::string& name,
                                                                      KernelOptions options,
                                                                      std::string filename) {
  auto program = read_program(std::move(source), std::move(filename), options.compile.extra,
                              options.compile.std, /*arch=*/0, options.cache);
  return std::make_shared<const KernelDefinition>(std::move(program), name, std::move(options));
}

KernelOptions KernelDefinition::options_of(const State& s) {
  KernelOptions o;
#define CJ_OPTION_FROM_STATE(type, name, hash, tag, member) \
  o.member = static_cast<decltype(o.member)>(s.name);
  CJ_KERNEL_STATE_FIELDS(CJ_NOT_AN_OPTION, CJ_OPTION_FROM_STATE, CJ_NOT_AN_OPTION)
#undef CJ_OPTION_FROM_STATE
  return o;
}

std::shared_ptr<const KernelDefinition> KernelDefinition::from_state(const State& s) {
  KernelOptions options = options_of(s);
  TORCH_CHECK_VALUE(!s.reflection.empty(), "torch_cudajit: ", kStateWhat, " has no "
                    "reflection; it is damaged. Pickle or script the kernel again.");
  auto program = load_program(s.source, s.filename, s.reflection, options.cache);
  return std::make_shared<const KernelDefinition>(std::move(program), s.name, std::move(options));
}

KernelDefinition::State KernelDefinition::state() const {
  State s = state_of(options_, requested_std_, decl_->name);
  s.source = program_->source();
  s.filename = program_->filename();
  s.reflection = program_->reflection();
  return s;
}

std::string KernelDefinition::encode(const State& s) {
  detail::Writer w;
  w << std::string(kStateFormat);
  s.for_each([&](const StateField&, const auto& v) { put(w, v); });
  return w.take();
}

KernelDefinition::State KernelDefinition::decode(const std::string& bytes) {
  detail::Reader r(bytes, kStateWhat);
  const std::string format = r.text();
  TORCH_CHECK_VALUE(format == kStateFormat, "torch_cudajit: ", kStateWhat, " has the format '",
                    detail::utf8_text(format.substr(0, 64)), "', expected '", kStateFormat,
                    "'; it is damaged or from a newer torch_cudajit.");
  State s;
  s.for_each([&](const StateField& f, auto& v) {
    r.field(f.name);
    get(r, v);
    check_text(f.name, v);
  });
  r.field(nullptr);
  TORCH_CHECK_VALUE(s.cooperative >= -1 && s.cooperative <= 1, "torch_cudajit: ", kStateWhat,
                    " has cooperative = ", s.cooperative, ", expected -1, 0 or 1; it is damaged.");
  TORCH_CHECK_VALUE(r.done(), "torch_cudajit: ", kStateWhat, " has trailing bytes; it is "
                    "damaged.");
  return s;
}

std::string KernelDefinition::describe_params() const {
  std::ostringstream os;
  for (const ParamBinding& b : bindings_)
    os << "\n  " << b.param->type << " " << b.param->name << " ("
       << (b.role == ParamRole::kOutput  ? "output: written"
           : b.role == ParamRole::kInput ? "input: const, read only"
           : b.role == ParamRole::kAuto  ? "auto: a number, or a tensor it writes"
                                         : "number")
       << ")";
  return os.str();
}

}  // namespace torch_cudajit
