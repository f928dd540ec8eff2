// torch_cudajit: NVRTC compilation of reflected programs (see program.h).
#include "program.h"

#include "serialize.h"

#include "virtual_grid.h"

#include "cuda_api.h"
#include "headers.h"
#include "options.h"
#include "reading.h"
#include "sha256.h"

#include <algorithm>
#include <atomic>
#include <sstream>

namespace torch_cudajit {
namespace {

std::atomic<uint64_t> g_compiles{0};

}  // namespace

uint64_t nvrtc_compile_count() { return g_compiles.load(); }

namespace {
// What of a reflection decides how arguments bind and what the generated code names: the
// kernels, their template headers and their parameters.
std::string binding_signature(const std::vector<KernelDecl>& kernels) {
  std::string out;
  for (const KernelDecl& k : kernels) {
    out += k.name + '\0' + k.qualified_name + '\0' + k.template_params + '\0' +
           (k.is_template ? "t" : "") + '\0';
    for (const Param& p : k.params)
      out += p.name + '\0' + p.type + '\0' + to_string(p.kind) + (p.is_const ? "c" : "") +
             '\0' + p.element + '\0' + p.rank + '\0' + std::to_string(static_cast<int>(p.layout)) +
             '\0' + p.rewritten_type + (p.tag ? "t" : "") + '\0';
    out += '\n';
  }
  return out;
}

// What the front end's reading depends on besides the source, as a memo key.
std::string dependency_memo_key(int arch, const std::string& std,
                                const std::vector<std::string>& options) {
  std::string key = std::to_string(arch) + '\0' + std + '\0';
  for (const auto& o : options) key += o + '\0';
  return key;
}
}  // namespace

Program::Program(std::string source, std::string filename, const std::vector<std::string>& options,
                 const std::string& std, int arch, bool use_cache)
    : source_(std::move(source)), filename_(std::move(filename)), options_(options), std_(std),
      use_cache_(use_cache) {
  const size_t nul = source_.find('\0');
  TORCH_CHECK_VALUE(nul == std::string::npos, "torch_cudajit: the source of '", filename_,
                    "' has a NUL byte at offset ", nul, " (line ",
                    std::count(source_.begin(), source_.begin() + static_cast<std::ptrdiff_t>(nul), '\n') + 1,
                    "); NVRTC would read it only up to there. Remove the NUL byte (a source read "
                    "in binary mode, or a C string buffer passed whole?).");
  detail::check_program_name(filename_);
  detail::check_options(options_);
  if (arch <= 0) arch = detail::current_context_arch();
  if (arch <= 0) arch = kDefaultFrontendArch;
  SourceReading reading = read_source(source_, filename_, options_, std_, arch, use_cache_);
  kernels_ = std::move(reading.kernels);
  deps_.emplace(dependency_memo_key(arch, std_, options_), std::move(reading.deps));
  rewritten_ = rewrite_layouts(source_, kernels_);
  source_needs_ = detail::implicit_needs(rewritten_);
  digest_ = source_digest(filename_, source_);
}

std::shared_ptr<const Program> Program::from_reflection(std::string source, std::string filename,
                                                        const std::string& reflection,
                                                        const std::vector<std::string>& options,
                                                        const std::string& std, bool use_cache) {
  std::shared_ptr<Program> p(new Program());
  p->source_ = std::move(source);
  p->filename_ = std::move(filename);
  p->options_ = options;
  p->std_ = std;
  p->use_cache_ = use_cache;
  p->digest_ = source_digest(p->filename_, p->source_);
  const size_t n = p->digest_.size();
  TORCH_CHECK_VALUE(reflection.compare(0, n, p->digest_) == 0, "torch_cudajit: the serialized "
                    "reflection given for '", p->filename_, "' was read from another source (its "
                    "digest is '", detail::utf8_text(reflection.substr(0, n)),
                    "', the source's is '", p->digest_,
                    "'); pass the reflection that Program::reflection() gave for this source.");
  const std::string kernels = reflection.size() > 2 * n ? reflection.substr(2 * n) : "";
  TORCH_CHECK_VALUE(reflection.size() > 2 * n && sha256_hex(kernels) == reflection.substr(n, n),
                    "torch_cudajit: the serialized reflection given for '", p->filename_,
                    "' is damaged (its checksum does not match its ", reflection.size(),
                    " bytes); pickle or script the kernel again.");
  p->kernels_ = deserialize_kernels(kernels);
  p->rewritten_ = rewrite_layouts(p->source_, p->kernels_);
  p->source_needs_ = detail::implicit_needs(p->rewritten_);
  return p;
}

std::string Program::reflection() const {
  const std::string kernels = serialize_kernels(kernels_);
  return digest_ + sha256_hex(kernels) + kernels;
}

Dependencies Program::dependencies(const CompileOptions& options) const {
  const int arch = options.arch;
  const std::string memo_key = dependency_memo_key(arch, options.std, options.extra);
  std::lock_guard<std::mutex> lock(deps_mutex_);
  auto it = deps_.find(memo_key);
  const std::string toolkit = toolkit_include_dir();
  if (it != deps_.end() && it->second.exact() && files_unchanged(it->second.files, toolkit))
    return it->second;
  if (it != deps_.end() && !it->second.exact()) return it->second;
  // Not read for this architecture yet, or a file changed since: read it again. The
  // declarations must be those the kernel was bound with.
  std::vector<KernelDecl> kernels;
  Dependencies deps =
      read_dependencies(source_, filename_, options.extra, options.std, arch, use_cache_, &kernels);
  if (deps.exact() || !kernels.empty()) {
    if (binding_signature(kernels_) != binding_signature(kernels)) {
      std::string which;
      for (const KernelDecl& k : kernels_) {
        const KernelDecl* other = nullptr;
        for (const KernelDecl& o : kernels)
          if (o.name == k.name) other = &o;
        if (other == nullptr || binding_signature({k}) != binding_signature({*other})) {
          which = k.name;
          break;
        }
      }
      TORCH_CHECK_VALUE(false, "torch_cudajit: '", filename_, "' declares ",
                        which.empty() ? "its kernels" : "kernel '" + which + "'",
                        " differently when compiled for sm_", arch, " than when it was read for "
                        "the kernel (its declarations, or the headers they use, changed: an "
                        "`#if __CUDA_ARCH__` around parameters, or a header edited since). "
                        "Declare the parameters the same for every architecture, or define the "
                        "kernel again (cj.jit) after editing its headers.");
    }
  }
  deps_[memo_key] = deps;
  return deps;
}

namespace {
bool mentions_grid_sync(const std::string& text) {
  return text.find("this_grid") != std::string::npos || text.find("grid_group") != std::string::npos;
}
// Only the plugin's own grid-stride helpers count: a kernel that merely reads gridDim may still
// give each thread one task, and a grid that does not cover them would skip work.
bool mentions_grid_stride(const std::string& text) {
  return text.find("cj::for_each") != std::string::npos ||
         text.find("cj::elementwise") != std::string::npos;
}
}  // namespace

std::string Program::kernel_region(const std::string& kernel_name) const {
  // From the kernel's declaration to the next kernel's (or the end).
  std::vector<size_t> starts;
  for (const auto& k : kernels_) starts.push_back(k.decl_begin);
  std::sort(starts.begin(), starts.end());
  const KernelDecl& k = kernel(kernel_name);
  auto next = std::upper_bound(starts.begin(), starts.end(), k.decl_begin);
  const size_t end = next == starts.end() ? source_.size() : *next;
  return source_.substr(k.decl_begin, end - k.decl_begin);
}

bool Program::cooperative(const std::string& kernel_name) const {
  if (!mentions_grid_sync(source_)) return false;
  if (mentions_grid_sync(kernel_region(kernel_name))) return true;
  // Only helpers (outside every kernel) use it: the kernels may call them.
  for (const auto& k : kernels_)
    if (mentions_grid_sync(kernel_region(k.name))) return false;
  return true;
}

TaskLoop Program::task_loop(const std::string& kernel_name) const {
  if (!mentions_grid_stride(source_)) return TaskLoop::kOnePerThread;
  const std::string region = kernel_region(kernel_name);
  if (region.find("cj::for_each") != std::string::npos) return TaskLoop::kForEach;
  if (region.find("cj::elementwise") != std::string::npos) return TaskLoop::kElementwise;
  return TaskLoop::kOnePerThread;
}

const KernelDecl& Program::kernel(const std::string& name) const {
  for (const auto& k : kernels_)
    if (k.name == name) return k;
  std::string names;
  for (const auto& k : kernels_) names += (names.empty() ? "'" : ", '") + k.name + "'";
  TORCH_CHECK_VALUE(false, "torch_cudajit: no __global__ function named '", name,
                    "' in the source; it defines ", kernels_.empty() ? "none" : names,
                    ". Pass one of those as name=.");
}

GeneratedSource Program::generate(const std::vector<InstantiationRequest>& requests) const {
  GeneratedSource out{requests, instantiations(requests), {}};
  const bool virtual_grid = !requests.empty() && requests[0].virtual_blocks > 0;
  std::ostringstream tail;
  std::vector<std::string> helpers;
  for (const auto& r : requests) {
    TORCH_INTERNAL_ASSERT((r.virtual_blocks > 0) == virtual_grid,
                          "a compile mixes virtual-grid and plain instantiations");
    if (std::find(helpers.begin(), helpers.end(), r.kernel) != helpers.end()) continue;
    helpers.push_back(r.kernel);
    tail << deduction_helper(kernel(r.kernel));
  }
  for (const auto& inst : out.instantiations) tail << inst.alias_definition;
  if (virtual_grid) {
    // The wrapper calls the instantiation; it becomes the kernel NVRTC is asked for.
    for (size_t i = 0; i < requests.size(); ++i) {
      const InstantiationRequest& r = requests[i];
      const KernelDecl& d = kernel(r.kernel);
      const std::string tag = instantiation_tag(d, r.key);
      Instantiation& inst = out.instantiations[i];
      tail << virtual_grid_wrapper(d, r.key, inst, tag, r.virtual_blocks);
      inst.kernel_expression = virtual_grid_name(tag);
    }
  }
  const std::string generated = tail.str();
  // cj/cj.cuh's optional parts (the fp16/bf16 headers, the prelude's <math.h>) only where the
  // source or an instantiation (a float16 key, explicit template arguments) can use them: they
  // are a large part of a small kernel's compile.
  detail::ImplicitNeeds needs = source_needs_;
  needs |= detail::implicit_needs(generated);
  std::ostringstream os;
  for (const std::string& m : detail::implicit_macros(needs)) os << "#define " << m.substr(2) << " 1\n";
  // The #line directives keep NVRTC's line numbers those of the user's source.
  if (virtual_grid) os << "#define CJ_VIRTUAL_GRID 1\n";
  os << "#include <cj/cj.cuh>\n";
  if (virtual_grid) os << kVirtualGridPrologue;
  os << "#line 1 \"" << filename_ << "\"\n" << rewritten_ << "\n";
  if (virtual_grid) os << kVirtualGridEpilogue;
  os << "#line 1 \"torch_cudajit_generated\"\n" << generated;
  out.text = os.str();
  return out;
}

std::vector<Instantiation> Program::instantiations(
    const std::vector<InstantiationRequest>& requests) const {
  std::vector<Instantiation> out;
  for (const InstantiationRequest& r : requests) {
    const KernelDecl& d = kernel(r.kernel);
    out.push_back(make_instantiation(d, r.key, r.template_args, instantiation_tag(d, r.key)));
  }
  return out;
}

std::vector<std::string> Program::nvrtc_options(const CompileOptions& o) const {
  // Target the device's own machine code when this NVRTC knows it, else the newest PTX.
  std::vector<int> archs = detail::nvrtc_supported_archs();
  std::string target = "sm_" + std::to_string(o.arch);
  if (!archs.empty() && std::find(archs.begin(), archs.end(), o.arch) == archs.end()) {
    int best = 0;
    for (int a : archs)
      if (a <= o.arch) best = std::max(best, a);
    TORCH_CHECK_VALUE(best > 0, "torch_cudajit: NVRTC ", detail::nvrtc_version() / 1000, ".",
                      detail::nvrtc_version() % 1000 / 10, " cannot target sm_", o.arch,
                      "; the oldest architecture it supports is sm_", archs.front(), ".");
    target = "compute_" + std::to_string(best);
  }
  std::vector<std::string> opts = {"-arch=" + target, "-std=" + o.std, "-default-device"};
  const std::vector<std::string> include_dirs = default_include_dirs();
  for (const auto& dir : include_dirs) opts.push_back("-I" + dir);
  // A user macro or pre-included file may use cj/cj.cuh's optional parts (generate covers the
  // source); a pre-included file is not read, so it keeps them all.
  const UserOptions user = parse_user_options(o.extra);
  detail::ImplicitNeeds needs;
  for (const auto& macro : user.macros) needs |= detail::implicit_needs(macro);
  if (!user.pre_includes.empty()) needs = {true, true};
  for (const std::string& m : detail::implicit_macros(needs)) opts.push_back(m);
  if (o.debug) {
    opts.push_back("-G");
    opts.push_back("-DCJ_DEBUG");
  }
  if (o.lineinfo) opts.push_back("-lineinfo");
  if (!o.link.empty()) {
    // Relocatable LTO-IR, which nvJitLink links (and optimizes) with the other inputs.
    opts.push_back("-rdc=true");
    opts.push_back("-dlto");
  }
  opts.insert(opts.end(), o.extra.begin(), o.extra.end());
  return opts;
}

namespace {

// NVRTC's log of a program, without its trailing NULs and newlines.
std::string program_log(nvrtcProgram prog) {
  size_t size = 0;
  CJ_CHECK(nvrtcGetProgramLogSize, prog, &size);
  std::string log(size, '\0');
  if (size > 0) CJ_CHECK(nvrtcGetProgramLog, prog, &log[0]);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return detail::utf8_text(log);
}

// The PTX, and the CUBIN when the target is machine code (sm_XX).
void read_code(nvrtcProgram prog, CompiledProgram& out) {
  size_t ptx_size = 0;
  CJ_CHECK(nvrtcGetPTXSize, prog, &ptx_size);
  out.ptx.resize(ptx_size);
  CJ_CHECK(nvrtcGetPTX, prog, &out.ptx[0]);
  if (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  out.has_cubin = out.target.rfind("sm_", 0) == 0;
  if (out.has_cubin) {
    size_t cubin_size = 0;
    CJ_CHECK(nvrtcGetCUBINSize, prog, &cubin_size);
    out.cubin.resize(cubin_size);
    CJ_CHECK(nvrtcGetCUBIN, prog, &out.cubin[0]);
  }
}

// The lowered name of each instantiation's kernel, and the parameter types its probes report.
void read_names(nvrtcProgram prog, const std::vector<Instantiation>& insts, CompiledProgram& out) {
  for (const auto& inst : insts) {
    const char* lowered = nullptr;
    CJ_CHECK(nvrtcGetLoweredName, prog, inst.kernel_expression.c_str(), &lowered);
    out.lowered_names.emplace_back(lowered);
    out.name_expressions.push_back(inst.kernel_expression);
    std::vector<ParamProbe> probes;
    for (size_t i = 0; i < inst.probe_expressions.size(); ++i) {
      const std::string& p = inst.probe_expressions[i];
      if (p.empty()) {  // fixed by the declaration and the key
        probes.push_back(inst.known_probes[i]);
        continue;
      }
      CJ_CHECK(nvrtcGetLoweredName, prog, p.c_str(), &lowered);
      probes.push_back(parse_probe(lowered));
    }
    out.probes.push_back(std::move(probes));
  }
}

}  // namespace

CompileError Program::compile_failure(const GeneratedSource& generated,
                                      const CompiledProgram& out) const {
  std::string hint;
  if (out.log.find("torch_cudajit_generated") != std::string::npos) {
    hint = "The kernel could not be instantiated for the argument types of this call:";
    for (const auto& r : generated.requests)
      hint += "\n  " + r.kernel + describe_signature(kernel(r.kernel), r.key);
    // The one line that says why, before the full log and the follow-up errors in it.
    const std::string first = detail::first_error(out.log);
    if (!first.empty()) hint += "\nNVRTC's first error:\n" + first;
    hint += "\nCheck each argument's dtype, rank and layout against the kernel's parameters.\n";
  }
  hint += detail::missing_header_hint(out.log, cuda_include_dir());
  return CompileError(detail::kernel_names(generated.requests), out.target, out.options, out.log,
                      number_lines(source_), hint);
}

CompiledProgram Program::compile(const GeneratedSource& generated,
                                 const CompileOptions& options) const {
  CompiledProgram out;
  out.options = nvrtc_options(options);
  out.target = out.options[0].substr(6);
  g_compiles++;
  nvrtcProgram prog = nullptr;
  CJ_CHECK(nvrtcCreateProgram, &prog, generated.text.c_str(), filename_.c_str(), 0, nullptr,
           nullptr);
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { detail::nvrtc().nvrtcDestroyProgram(p); }
  } destroy{&prog};
  for (const auto& inst : generated.instantiations) {
    CJ_CHECK(nvrtcAddNameExpression, prog, inst.kernel_expression.c_str());
    for (const auto& p : inst.probe_expressions)
      if (!p.empty()) CJ_CHECK(nvrtcAddNameExpression, prog, p.c_str());
  }
  std::vector<const char*> argv;
  for (const auto& o : out.options) argv.push_back(o.c_str());
  const nvrtcResult result =
      detail::nvrtc().nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  out.log = program_log(prog);
  if (result != NVRTC_SUCCESS) throw compile_failure(generated, out);
  if (!options.link.empty())
    link(prog, generated.requests, options, out);
  else
    read_code(prog, out);
  read_names(prog, generated.instantiations, out);
  return out;
}

}  // namespace torch_cudajit
