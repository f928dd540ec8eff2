// torch_cudajit: the kernel definition (see definition.h): bindings, effective options,
// fingerprint and pickled form, each computed once.
#include "definition.h"

#include "reading.h"
#include "serialize.h"
#include "sha256.h"
#include "virtual_grid.h"

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
  Sha256 h;
  // The program's digest stands for its source and file name (hashed once per program).
  h.field(program_->digest()).field(decl_->name).field(requested_std_).field(options_.template_args);
  h.field(options_.compile.debug ? "debug" : "").field(options_.compile.lineinfo ? "lineinfo" : "");
  h.field(std::to_string(options_.cooperative));
  for (const auto& opt : options_.compile.extra) h.field(opt);
  for (const auto& file : options_.compile.link) h.field("link").field(file);
  fingerprint_ = h.hex_digest().substr(0, 16);
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
  o.compile.extra = std::get<2>(s);
  o.compile.std = std::get<3>(s);
  o.compile.debug = std::get<4>(s);
  o.compile.lineinfo = std::get<5>(s);
  o.template_args = std::get<6>(s);
  o.cache = std::get<7>(s);
  o.compile.link = std::get<8>(s);
  o.cooperative = static_cast<int>(std::get<10>(s));
  return o;
}

std::shared_ptr<const KernelDefinition> KernelDefinition::from_state(const State& s) {
  KernelOptions options = options_of(s);
  TORCH_CHECK_VALUE(!std::get<11>(s).empty(), "torch_cudajit: ", kStateWhat, " has no "
                    "reflection; it is damaged. Pickle or script the kernel again.");
  auto program = load_program(std::get<0>(s), std::get<9>(s), std::get<11>(s), options.cache);
  return std::make_shared<const KernelDefinition>(std::move(program), std::get<1>(s),
                                                  std::move(options));
}

KernelDefinition::State KernelDefinition::state() const {
  const CompileOptions& c = options_.compile;
  return State(program_->source(), decl_->name, c.extra, requested_std_, c.debug, c.lineinfo,
               options_.template_args, options_.cache, c.link, program_->filename(),
               options_.cooperative, program_->reflection());
}

std::string KernelDefinition::encode(const State& s) {
  detail::Writer w;
  w << std::string(kStateFormat) << std::get<0>(s) << std::get<1>(s) << std::get<2>(s).size();
  for (const auto& o : std::get<2>(s)) w << o;
  w << std::get<3>(s) << std::get<4>(s) << std::get<5>(s) << std::get<6>(s) << std::get<7>(s)
    << std::get<8>(s).size();
  for (const auto& f : std::get<8>(s)) w << f;
  w << std::get<9>(s) << std::to_string(std::get<10>(s)) << std::get<11>(s);
  return w.take();
}

KernelDefinition::State KernelDefinition::decode(const std::string& bytes) {
  detail::Reader r(bytes, kStateWhat);
  const std::string format = r.text();
  TORCH_CHECK_VALUE(format == kStateFormat, "torch_cudajit: ", kStateWhat, " has the format '",
                    detail::utf8_text(format.substr(0, 64)), "', expected '", kStateFormat,
                    "'; it is damaged or from a newer torch_cudajit.");
  State s;
  std::get<0>(s) = r.text();
  std::get<1>(s) = r.text();
  std::get<2>(s).resize(r.count(2));
  for (auto& o : std::get<2>(s)) o = r.text();
  std::get<3>(s) = r.text();
  std::get<4>(s) = r.flag();
  std::get<5>(s) = r.flag();
  std::get<6>(s) = r.text();
  std::get<7>(s) = r.flag();
  std::get<8>(s).resize(r.count(2));
  for (auto& f : std::get<8>(s)) f = r.text();
  std::get<9>(s) = r.text();
  std::get<10>(s) = r.integer();
  TORCH_CHECK_VALUE(std::get<10>(s) >= -1 && std::get<10>(s) <= 1, "torch_cudajit: ", kStateWhat,
                    " has cooperative = ", std::get<10>(s), ", expected -1, 0 or 1; it is "
                    "damaged.");
  std::get<11>(s) = r.text();
  TORCH_CHECK_VALUE(r.done(), "torch_cudajit: ", kStateWhat, " has trailing bytes; it is "
                    "damaged.");
  // Every text field was written from text (Python strings): bytes that are not UTF-8 are
  // damage, and must not reach messages or names.
  auto check_text = [](const std::string& t, const char* field) {
    TORCH_CHECK_VALUE(detail::utf8_text(t) == t, "torch_cudajit: ", kStateWhat, " has a ", field,
                      " that is not UTF-8 text; it is damaged.");
  };
  check_text(std::get<0>(s), "source");
  check_text(std::get<1>(s), "kernel name");
  for (const auto& o : std::get<2>(s)) check_text(o, "compile option");
  check_text(std::get<3>(s), "language standard");
  check_text(std::get<6>(s), "template argument list");
  for (const auto& f : std::get<8>(s)) check_text(f, "link file name");
  check_text(std::get<9>(s), "file name");
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
