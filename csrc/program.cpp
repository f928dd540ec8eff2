// torch_cudajit: NVRTC compilation of reflected programs (see program.h).
#include "program.h"

#include "cuda_api.h"
#include "headers.h"
#include "log.h"
#include "options.h"
#include "serialize.h"
#include "sha256.h"

#include <algorithm>
#include <atomic>
#include <sstream>

namespace torch_cudajit {
namespace {

std::atomic<uint64_t> g_compiles{0};

}  // namespace

uint64_t nvrtc_compile_count() { return g_compiles.load(); }

std::string source_digest(const std::string& filename, const std::string& source) {
  Sha256 h;
  h.field(filename).field(source);
  return h.hex_digest();
}

void Program::check_source(const std::string& source, const std::string& filename,
                           const std::vector<std::string>& options) {
  const size_t nul = source.find('\0');
  TORCH_CHECK_VALUE(nul == std::string::npos, "torch_cudajit: the source of '", filename,
                    "' has a NUL byte at offset ", nul, " (line ",
                    std::count(source.begin(), source.begin() + static_cast<std::ptrdiff_t>(nul), '\n') + 1,
                    "); NVRTC would read it only up to there. Remove the NUL byte (a source read "
                    "in binary mode, or a C string buffer passed whole?).");
  detail::check_program_name(filename);
  detail::check_options(options);
}

Program::Program(std::string source, std::string filename, std::vector<KernelDecl> kernels)
    : source_(std::move(source)), filename_(std::move(filename)), kernels_(std::move(kernels)) {
  rewritten_ = rewrite_layouts(source_, kernels_);
  source_needs_ = detail::implicit_needs(rewritten_);
  device_runtime_ = torch_cudajit::uses_device_runtime(source_);
  digest_ = source_digest(filename_, source_);
}

Program Program::from_reflection(std::string source, std::string filename,
                                 const std::string& reflection) {
  const std::string digest = source_digest(filename, source);
  const size_t n = digest.size();
  TORCH_CHECK_VALUE(reflection.compare(0, n, digest) == 0, "torch_cudajit: the serialized "
                    "reflection given for '", filename, "' was read from another source (its "
                    "digest is '", detail::utf8_text(reflection.substr(0, n)),
                    "', the source's is '", digest,
                    "'); pass the reflection that Program::reflection() gave for this source.");
  const std::string kernels = reflection.size() > 2 * n ? reflection.substr(2 * n) : "";
  TORCH_CHECK_VALUE(reflection.size() > 2 * n && sha256_hex(kernels) == reflection.substr(n, n),
                    "torch_cudajit: the serialized reflection given for '", filename,
                    "' is damaged (its checksum does not match its ", reflection.size(),
                    " bytes); pickle or script the kernel again.");
  return Program(std::move(source), std::move(filename), deserialize_kernels(kernels));
}

std::string Program::reflection() const {
  const std::string kernels = serialize_kernels(kernels_);
  return digest_ + sha256_hex(kernels) + kernels;
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
  const KernelWrapping* wrapping = requests.empty() ? nullptr : requests[0].wrapping.get();
  std::ostringstream tail;
  std::vector<std::string> helpers;
  for (const auto& r : requests) {
    // One text of the user's source serves every request: they share its wrapping's text.
    TORCH_INTERNAL_ASSERT((r.wrapping != nullptr) == (wrapping != nullptr),
                          "a compile mixes wrapped and plain instantiations");
    TORCH_INTERNAL_ASSERT(!wrapping || (r.wrapping->macros == wrapping->macros &&
                                        r.wrapping->prologue == wrapping->prologue &&
                                        r.wrapping->epilogue == wrapping->epilogue),
                          "a compile mixes wrappings of different texts");
    if (std::find(helpers.begin(), helpers.end(), r.kernel) != helpers.end()) continue;
    helpers.push_back(r.kernel);
    tail << deduction_helper(kernel(r.kernel));
  }
  for (const auto& inst : out.instantiations) tail << inst.alias_definition;
  if (wrapping) {
    // The wrapper calls the instantiation; it becomes the kernel NVRTC is asked for.
    for (size_t i = 0; i < requests.size(); ++i) {
      const InstantiationRequest& r = requests[i];
      const KernelDecl& d = kernel(r.kernel);
      tail << r.wrapping->wrap(d, r.key, instantiation_tag(d, r.key), out.instantiations[i]);
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
  if (wrapping) os << wrapping->macros;
  os << "#include <cj/cj.cuh>\n";
  if (wrapping) os << wrapping->prologue;
  os << "#line 1 \"" << filename_ << "\"\n" << rewritten_ << "\n";
  if (wrapping) os << wrapping->epilogue;
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

NvrtcArguments Program::nvrtc_arguments(const CompileOptions& o) const {
  // Target the device's own machine code when this NVRTC knows it, else the newest PTX, which
  // the driver compiles for a GPU newer than NVRTC. (Python's compile(arch=...) refuses an
  // architecture NVRTC does not support before it gets here: no GPU asked for it.)
  std::vector<int> archs = detail::nvrtc_supported_archs();
  std::string target = "sm_" + std::to_string(o.arch);
  const UserOptions user = parse_user_options(o.extra);
  // An architecture-specific target (options=['-arch=sm_90a']) of the compute capability
  // compiled for: its machine code, reported as its target.
  if (!user.arch_variant.empty()) {
    const bool same = user.arch_variant.compare(0, target.size(), target) == 0 &&
                      user.arch_variant.size() == target.size() + 1;
    TORCH_CHECK_VALUE(same, "torch_cudajit: the options ask for ", user.arch_variant,
                      ", a target specific to another architecture than the one this compile is "
                      "for (", target, ": the GPU's, or compile(..., arch=...)'s). Compile for it "
                      "with arch='", user.arch_variant.substr(0, user.arch_variant.size() - 1),
                      "', or launch on such a GPU.");
    target = user.arch_variant;
    archs.clear();  // NVRTC lists compute capabilities; a variant of one it knows is taken as is
  }
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
  for (const std::string& m : host_platform_macros()) opts.push_back(m);
  // A user macro or pre-included file may use cj/cj.cuh's optional parts (generate covers the
  // source); a pre-included file is not read, so it keeps them all.
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
  // The user's options, but an architecture-specific -arch: the target above carries it.
  for (const std::string& e : o.extra)
    if (!is_arch_variant_option(e)) opts.push_back(e);
  return {std::move(target), std::move(opts)};
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
                                      const CompiledProgram& out, const std::string& dumped) const {
  std::string hint;
  if (!dumped.empty()) hint += "The source NVRTC compiled (TORCH_CUDAJIT_DUMP): " + dumped + "\n";
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
                      source_, filename_, hint);
}

CompiledProgram Program::compile(const GeneratedSource& generated,
                                 const CompileOptions& options) const {
  CompiledProgram out;
  NvrtcArguments arguments = nvrtc_arguments(options);
  out.target = std::move(arguments.target);
  out.options = std::move(arguments.options);
  g_compiles++;
  // Resolved before the program is made: the destructor below must not throw.
  const auto destroy_program = detail::nvrtc().nvrtcDestroyProgram.get();
  nvrtcProgram prog = nullptr;
  struct Destroy {
    decltype(destroy_program) destroy;
    nvrtcProgram* p;
    ~Destroy() { destroy(p); }
  } destroy{destroy_program, &prog};
  // The program with its name expressions (made again if a compile must be retried).
  auto make_program = [&] {
    if (prog != nullptr) CJ_CHECK(nvrtcDestroyProgram, &prog);
    CJ_CHECK(nvrtcCreateProgram, &prog, generated.text.c_str(), filename_.c_str(), 0, nullptr,
             nullptr);
    for (const auto& inst : generated.instantiations) {
      CJ_CHECK(nvrtcAddNameExpression, prog, inst.kernel_expression.c_str());
      for (const auto& p : inst.probe_expressions)
        if (!p.empty()) CJ_CHECK(nvrtcAddNameExpression, prog, p.c_str());
    }
  };
  make_program();
  std::vector<const char*> argv;
  for (const auto& o : out.options) argv.push_back(o.c_str());
  // NVRTC's automatic precompiled header: the first compile of this process with these options
  // keeps the parse of the leading #include <cj/cj.cuh> (and all it includes) in NVRTC's PCH
  // heap, and later compiles start from it. It changes no output, so it is not one of the
  // recorded options and not part of a cache key. NVRTC reports its PCH bookkeeping as
  // warnings in the compile's log (20283: the #line directives after the include end the
  // header part; 625-634: a PCH of the heap made with other options or another include
  // sequence is passed over); they say nothing about the user's code, so they are dropped.
  // A pre-included header would be part of the PCH, and NVRTC does not notice every edit of a
  // header (one within the same second of its modification time): such compiles go without.
  const bool pch = detail::use_pch() && parse_user_options(options.extra).pre_includes.empty();
  const size_t without_pch = argv.size();
  if (pch) {
    argv.push_back("--pch");
    argv.push_back("--pch-messages=false");
    argv.push_back("-diag-suppress=625,626,627,628,629,630,631,632,633,634,20283");
  }
  // TORCH_CUDAJIT_DUMP: the text NVRTC compiles, named by its digest, which errors cite.
  std::string dumped;
  if (!detail::dump_folder().empty()) {
    const std::string stem = filename_.substr(filename_.rfind('/') + 1);
    dumped = detail::dump_source(stem.substr(0, stem.rfind('.')) + "-" +
                                     sha256_hex(generated.text).substr(0, 12),
                                 generated.text);
  }
  const long long start = detail::now_ns();
  nvrtcResult result =
      detail::nvrtc().nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  out.log = program_log(prog);
  if (result != NVRTC_SUCCESS && pch && detail::pch_failure(out.log)) {
    // The PCH could not be made or mapped (a full temporary folder): this process compiles
    // without it from now on, starting with this program, made anew.
    detail::disable_pch();
    argv.resize(without_pch);
    make_program();
    result = detail::nvrtc().nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
    out.log = program_log(prog);
  }
  if (detail::log_enabled(LogLevel::kDebug)) {
    std::string line = "NVRTC compiled '" + filename_ + "' (" +
                       detail::kernel_names(generated.requests) + ") for " + out.target + " in " +
                       detail::elapsed_ms(start) + (result == NVRTC_SUCCESS ? "" : ", with errors");
    if (!dumped.empty()) line += "; generated source: " + dumped;
    line += "; options:";
    for (const auto& o : out.options) line += " " + o;
    detail::log(LogLevel::kDebug, line);
  }
  if (result != NVRTC_SUCCESS) throw compile_failure(generated, out, dumped);
  if (!options.link.empty())
    detail::link_program(*this, prog, generated.requests, options, out);
  else
    read_code(prog, out);
  read_names(prog, generated.instantiations, out);
  return out;
}

}  // namespace torch_cudajit
