// torch_cudajit: NVRTC compilation of reflected programs (see program.h).
#include "program.h"

#include "cuda_api.h"
#include "options.h"
#include "sha256.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <cstdlib>
#include <mutex>
#include <sstream>

#ifndef CJ_SOURCE_INCLUDE_DIR
#define CJ_SOURCE_INCLUDE_DIR ""
#endif

namespace torch_cudajit {
namespace {

bool file_exists(const std::string& p) {
  struct stat st;
  return !p.empty() && stat(p.c_str(), &st) == 0;
}

std::string dirname(const std::string& p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? "." : p.substr(0, s);
}

std::atomic<uint64_t> g_compiles{0};

std::mutex& include_mutex() {
  static std::mutex m;
  return m;
}
std::string& package_include_override() {
  static std::string dir;
  return dir;
}

std::string find_package_include_dir() {
  {
    std::lock_guard<std::mutex> lock(include_mutex());
    if (!package_include_override().empty()) return package_include_override();
  }
  if (const char* env = std::getenv("TORCH_CUDAJIT_INCLUDE_DIR")) return env;
  // Next to the library holding this code: the pip package (torch_cudajit/lib/libtorch_cudajit.so
  // -> torch_cudajit/include), an installed CMake prefix (lib/ -> include/torch_cudajit).
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&find_package_include_dir), &info) && info.dli_fname) {
    std::string lib_dir = dirname(info.dli_fname);
    for (const std::string& c : {lib_dir + "/../include", lib_dir + "/../include/torch_cudajit",
                                 lib_dir + "/include", lib_dir + "/torch_cudajit/include"})
      if (file_exists(c + "/cj/cj.cuh")) return c;
  }
  return CJ_SOURCE_INCLUDE_DIR;
}

// The CUDA major version of an NVRTC library from its file name (libnvrtc.so.13.0.88 -> 13).
int nvrtc_major_from_file(const std::string& path) {
  const size_t at = path.rfind(".so.");
  if (at == std::string::npos) return 0;
  return std::atoi(path.c_str() + at + 4);
}

// CUDA_VERSION / 1000 of the cuda.h in a folder, 0 when unknown.
int cuda_header_major(const std::string& dir) {
  std::ifstream f(dir + "/cuda.h");
  std::string line;
  while (std::getline(f, line)) {
    const size_t at = line.find("#define CUDA_VERSION ");
    if (at != std::string::npos) return std::atoi(line.c_str() + at + 21) / 1000;
  }
  return 0;
}

std::string find_cuda_include_dir() {
  std::vector<std::string> candidates;
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(env)) candidates.push_back(std::string(v) + "/include");
  // The headers that ship with the NVRTC we loaded (toolkit or NVIDIA wheel) match it best.
  const std::string nvrtc_path = detail::nvrtc_library_file();
  if (nvrtc_path.find('/') != std::string::npos)
    candidates.push_back(dirname(dirname(nvrtc_path)) + "/include");
  candidates.push_back("/usr/local/cuda/include");
  // Headers of NVRTC's own CUDA major version first; among those, a folder that also has
  // libcu++ (CCCL), which cooperative_groups.h and the cuda/std headers need (NVIDIA's runtime
  // wheels ship the CUDA headers without it).
  const int major = nvrtc_major_from_file(nvrtc_path);
  auto has_cccl = [](const std::string& c) {
    return file_exists(c + "/cccl/cuda/std/type_traits") || file_exists(c + "/cuda/std/type_traits");
  };
  for (int pass = 0; pass < 4; ++pass) {
    const bool want_version = pass < 2, want_cccl = pass % 2 == 0;
    for (const auto& c : candidates) {
      if (!file_exists(c + "/cuda_fp16.h")) continue;
      if (want_version && (major <= 0 || cuda_header_major(c) != major)) continue;
      if (want_cccl && !has_cccl(c)) continue;
      return c;
    }
  }
  return "";
}

}  // namespace

namespace detail {

std::string missing_header_hint(const std::string& log, const std::string& cuda) {
  const std::string marker = "cannot open source file \"";
  const size_t at = log.find(marker);
  if (at == std::string::npos) return "";
  const size_t start = at + marker.size();
  const std::string header = log.substr(start, log.find('"', start) - start);
  auto starts = [&](const char* prefix) { return header.rfind(prefix, 0) == 0; };
  if (starts("cuda/") || starts("nv/") || starts("cub/") || starts("thrust/")) {
    if (!cuda.empty() && file_exists(cuda + "/cccl/cuda/std/type_traits")) return "";
    if (!cuda.empty() && file_exists(cuda + "/cuda/std/type_traits")) return "";
    return "'" + header + "' is part of CCCL (libcu++, CUB, Thrust), which was not found" +
           (cuda.empty() ? std::string() : " next to the CUDA headers in '" + cuda + "'") +
           ". Install it with `pip install nvidia-cuda-cccl` (torch's CUDA 13 wheels; "
           "nvidia-cuda-cccl-cu12 for CUDA 12), or set CUDA_HOME to a CUDA toolkit.\n";
  }
  if (cuda.empty() && (starts("cuda") || starts("cooperative_groups") || starts("mma.h") ||
                       starts("math_constants.h") || starts("sm_"))) {
    return "'" + header + "' is a CUDA header, and none were found (no cuda_fp16.h under "
           "CUDA_HOME, next to the NVRTC library in use, or in /usr/local/cuda). Install torch's "
           "CUDA wheels (`pip install nvidia-cuda-runtime`) or set CUDA_HOME to a CUDA toolkit.\n";
  }
  return "";
}

std::string first_error(const std::string& log) {
  std::istringstream is(log);
  std::string line, out;
  bool in_error = false;
  while (std::getline(is, line)) {
    if (in_error) {
      // Only the argument list of a failed overload resolution belongs to the error; the code
      // excerpt and the candidates follow in the full log.
      const size_t at = line.find("argument types are: (");
      if (at == std::string::npos) break;
      std::string types = line.substr(at);
      const std::string tag = "cj::detail::priority<1>, ";
      const size_t t = types.find(tag);
      if (t != std::string::npos) types.erase(t, tag.size());
      out += "\n    " + types;
      break;
    }
    const bool error = line.find(": error: ") != std::string::npos ||
                       line.find(": catastrophic error: ") != std::string::npos;
    if (!error || line.rfind("__nv_name_map", 0) == 0) continue;
    out = "  " + line;
    in_error = true;
  }
  return out;
}

std::string condensed_log(const std::string& log) {
  std::istringstream is(log);
  std::string line, out;
  size_t follow_ups = 0;
  bool skipping = false;
  while (std::getline(is, line)) {
    if (line.rfind("__nv_name_map", 0) == 0) {
      follow_ups += line.find(": error: ") != std::string::npos;
      skipping = true;
      continue;
    }
    // A name-map error's excerpt and caret run up to the blank line that ends it.
    if (skipping) {
      const bool excerpt = !line.empty() && (line[0] == ' ' || line[0] == '\t');
      skipping = excerpt;
      if (excerpt || line.empty()) continue;
    }
    out += line + "\n";
  }
  if (follow_ups > 0)
    out += "(" + std::to_string(follow_ups) + " follow-on error(s) of NVRTC's name map "
           "(__nv_name_map), caused by the errors above, are left out here; CompileError.log "
           "has the whole log.)\n";
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace detail

CompileError::CompileError(std::string kernel_name, std::string arch,
                           std::vector<std::string> options, std::string log,
                           std::string numbered_source, std::string hint)
    : c10::Error(
          [&] {
            std::ostringstream os;
            os << "torch_cudajit: kernel '" << kernel_name << "' failed to compile for " << arch
               << ".\n" << hint << "NVRTC options:";
            for (const auto& o : options) os << " " << o;
            os << "\nNVRTC log:\n" << detail::condensed_log(log) << "\nSource:\n" << numbered_source;
            return os.str();
          }(),
          /*backtrace=*/nullptr),
      kernel_name_(std::move(kernel_name)),
      arch_(std::move(arch)),
      options_(std::move(options)),
      log_(std::move(log)),
      numbered_source_(std::move(numbered_source)) {}

void set_package_include_dir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(include_mutex());
  package_include_override() = dir;
}

std::vector<std::string> default_include_dirs() {
  std::vector<std::string> dirs;
  std::string pkg = find_package_include_dir();
  TORCH_CHECK(file_exists(pkg + "/cj/cj.cuh"),
              "torch_cudajit: cannot find the device header cj/cj.cuh (looked in '", pkg,
              "'). Set TORCH_CUDAJIT_INCLUDE_DIR to the torch_cudajit/include folder.");
  dirs.push_back(pkg);
  std::string cuda = find_cuda_include_dir();
  if (!cuda.empty()) {
    // CUDA 13 keeps libcu++ (cuda/std/...) in include/cccl.
    if (file_exists(cuda + "/cccl/cuda/std/type_traits")) dirs.push_back(cuda + "/cccl");
    dirs.push_back(cuda);
  }
  return dirs;
}

uint64_t nvrtc_compile_count() { return g_compiles.load(); }

std::string number_lines(const std::string& source) {
  std::ostringstream os;
  std::istringstream is(source);
  std::string line;
  size_t n = 0;
  size_t total = static_cast<size_t>(std::count(source.begin(), source.end(), '\n')) + 1;
  int width = static_cast<int>(std::to_string(total).size());
  while (std::getline(is, line)) {
    std::string num = std::to_string(++n);
    os << std::string(static_cast<size_t>(width) - num.size(), ' ') << num << " | " << line << "\n";
  }
  return os.str();
}

std::vector<std::string> frontend_args(const std::vector<std::string>& options,
                                       const std::string& std) {
  std::vector<std::string> args = {"-std=" + (std.empty() ? std::string("c++17") : std)};
  const std::vector<std::string> include_dirs = default_include_dirs();
  for (const auto& dir : include_dirs) args.push_back("-I" + dir);
  if (include_dirs.size() > 1) {  // as in nvrtc_options
    args.push_back("-DCJ_HAVE_FP16");
    args.push_back("-DCJ_HAVE_BF16");
  }
  const int version = detail::nvrtc_version();
  args.push_back("-D__CUDACC_VER_MAJOR__=" + std::to_string(version / 1000));
  args.push_back("-D__CUDACC_VER_MINOR__=" + std::to_string(version % 1000 / 10));
  args.push_back("-D__CUDACC_VER_BUILD__=0");
  args.push_back("-include");
  args.push_back("cj/cj.cuh");
  // The preprocessor options, in Clang's spelling; the others do not change declarations.
  const UserOptions user = parse_user_options(options);
  for (const auto& dir : user.include_dirs) args.push_back("-I" + dir);
  args.insert(args.end(), user.macros.begin(), user.macros.end());
  for (const auto& file : user.pre_includes) {
    args.push_back("-include");
    args.push_back(file);
  }
  return args;
}

Program::Program(std::string source, std::string filename, const std::vector<std::string>& options,
                 const std::string& std)
    : source_(std::move(source)), filename_(std::move(filename)) {
  const size_t nul = source_.find('\0');
  TORCH_CHECK_VALUE(nul == std::string::npos, "torch_cudajit: the source of '", filename_,
                    "' has a NUL byte at offset ", nul, " (line ",
                    std::count(source_.begin(), source_.begin() + static_cast<std::ptrdiff_t>(nul), '\n') + 1,
                    "); NVRTC would read it only up to there. Remove the NUL byte (a source read "
                    "in binary mode, or a C string buffer passed whole?).");
  kernels_ = reflect_kernels(source_, frontend_args(options, std), filename_);
  rewritten_ = rewrite_layouts(source_, kernels_);
  digest_ = source_digest(filename_, source_);
}

std::shared_ptr<const Program> Program::from_reflection(std::string source, std::string filename,
                                                        const std::string& reflection) {
  std::shared_ptr<Program> p(new Program());
  p->source_ = std::move(source);
  p->filename_ = std::move(filename);
  p->digest_ = source_digest(p->filename_, p->source_);
  const size_t n = p->digest_.size();
  TORCH_CHECK_VALUE(reflection.compare(0, n, p->digest_) == 0, "torch_cudajit: the serialized "
                    "reflection given for '", p->filename_, "' was read from another source (its "
                    "digest is '", reflection.substr(0, n), "', the source's is '", p->digest_,
                    "'); pass the reflection that Program::reflection() gave for this source.");
  p->kernels_ = deserialize_kernels(reflection.substr(n));
  p->rewritten_ = rewrite_layouts(p->source_, p->kernels_);
  return p;
}

std::string Program::source_digest(const std::string& filename, const std::string& source) {
  Sha256 h;
  h.field(filename).field(source);
  return h.hex_digest();
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

bool Program::grid_strides(const std::string& kernel_name) const {
  return mentions_grid_stride(source_) && mentions_grid_stride(kernel_region(kernel_name));
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

std::string Program::generated_source(const std::vector<InstantiationRequest>& requests) const {
  return generated_source(requests, instantiations(requests));
}

std::string Program::generated_source(const std::vector<InstantiationRequest>& requests,
                                      const std::vector<Instantiation>& insts) const {
  // The #line directives keep NVRTC's line numbers those of the user's source.
  std::ostringstream os;
  os << "#include <cj/cj.cuh>\n#line 1 \"" << filename_ << "\"\n" << rewritten_ << "\n";
  os << "#line 1 \"torch_cudajit_generated\"\n";
  std::vector<std::string> helpers;
  for (const auto& r : requests) {
    if (std::find(helpers.begin(), helpers.end(), r.kernel) != helpers.end()) continue;
    helpers.push_back(r.kernel);
    os << deduction_helper(kernel(r.kernel));
  }
  for (const auto& inst : insts) os << inst.alias_definition;
  return os.str();
}

std::vector<Instantiation> Program::instantiations(
    const std::vector<InstantiationRequest>& requests) const {
  std::vector<Instantiation> out;
  for (size_t i = 0; i < requests.size(); ++i)
    out.push_back(make_instantiation(kernel(requests[i].kernel), requests[i].key,
                                     requests[i].template_args, i));
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
  if (include_dirs.size() > 1) {  // the CUDA headers were found
    opts.push_back("-DCJ_HAVE_FP16");
    opts.push_back("-DCJ_HAVE_BF16");
  }
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

std::string extension_of(const std::string& path) {
  size_t dot = path.rfind('.');
  size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string ext = path.substr(dot);
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

std::string read_whole_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  TORCH_CHECK_VALUE(f.good(), "torch_cudajit: link file '", path,
                    "' cannot be read; pass existing .cu, .ptx, .cubin, .fatbin, .ltoir, .o or .a "
                    "files.");
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string link_log(nvJitLinkHandle h) {
  size_t size = 0;
  std::string log;
  if (detail::nvjitlink().nvJitLinkGetErrorLogSize(h, &size) == NVJITLINK_SUCCESS && size > 1) {
    log.resize(size);
    detail::nvjitlink().nvJitLinkGetErrorLog(h, &log[0]);
  }
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// Compiles a linked .cu file to LTO-IR with the kernel's options.
std::string compile_cu_to_ltoir(const std::string& path, const std::vector<std::string>& options) {
  const std::string text = read_whole_file(path);
  nvrtcProgram prog = nullptr;
  CJ_CHECK(nvrtcCreateProgram, &prog, text.c_str(), path.c_str(), 0, nullptr, nullptr);
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { detail::nvrtc().nvrtcDestroyProgram(p); }
  } destroy{&prog};
  std::vector<std::string> opts = options;
  opts.push_back("-I" + dirname(path));
  opts.push_back("-DCJ_LINKED_FILE");  // cj.cuh's debug globals are defined by the kernel's file
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  nvrtcResult r = detail::nvrtc().nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  CJ_CHECK(nvrtcGetProgramLogSize, prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) CJ_CHECK(nvrtcGetProgramLog, prog, &log[0]);
  if (r != NVRTC_SUCCESS)
    throw CompileError(path, opts[0].substr(6), opts, log, number_lines(text),
                       "The link file '" + path + "' did not compile.\n");
  size_t size = 0;
  CJ_CHECK(nvrtcGetLTOIRSize, prog, &size);
  std::string ir(size, '\0');
  CJ_CHECK(nvrtcGetLTOIR, prog, &ir[0]);
  return ir;
}

}  // namespace

CompiledProgram Program::compile(const std::vector<InstantiationRequest>& requests,
                                 const CompileOptions& options) const {
  CompiledProgram out;
  out.options = nvrtc_options(options);
  out.target = out.options[0].substr(6);
  const std::vector<Instantiation> insts = instantiations(requests);
  const std::string text = generated_source(requests, insts);

  g_compiles++;
  nvrtcProgram prog = nullptr;
  CJ_CHECK(nvrtcCreateProgram, &prog, text.c_str(), filename_.c_str(), 0, nullptr, nullptr);
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { detail::nvrtc().nvrtcDestroyProgram(p); }
  } destroy{&prog};
  for (const auto& inst : insts) {
    CJ_CHECK(nvrtcAddNameExpression, prog, inst.kernel_expression.c_str());
    for (const auto& p : inst.probe_expressions) CJ_CHECK(nvrtcAddNameExpression, prog, p.c_str());
  }
  std::vector<const char*> argv;
  for (const auto& o : out.options) argv.push_back(o.c_str());
  nvrtcResult result =
      detail::nvrtc().nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  CJ_CHECK(nvrtcGetProgramLogSize, prog, &log_size);
  out.log.resize(log_size);
  if (log_size > 0) CJ_CHECK(nvrtcGetProgramLog, prog, &out.log[0]);
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  if (result != NVRTC_SUCCESS) {
    std::string names;
    for (const auto& r : requests)
      if (names.find(r.kernel) == std::string::npos) names += (names.empty() ? "" : ", ") + r.kernel;
    std::string hint;
    if (out.log.find("torch_cudajit_generated") != std::string::npos) {
      hint = "The kernel could not be instantiated for the argument types of this call:";
      for (const auto& r : requests)
        hint += "\n  " + r.kernel + describe_signature(kernel(r.kernel), r.key);
      // The one line that says why, before the full log and the follow-up errors in it.
      const std::string first = detail::first_error(out.log);
      if (!first.empty()) hint += "\nNVRTC's first error:\n" + first;
      hint += "\nCheck each argument's dtype, rank and layout against the kernel's parameters.\n";
    }
    hint += detail::missing_header_hint(out.log, find_cuda_include_dir());
    throw CompileError(names, out.target, out.options, out.log, number_lines(source_), hint);
  }
  if (!options.link.empty()) {
    link(prog, requests, options, out);
  } else {
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
  for (const auto& inst : insts) {
    const char* lowered = nullptr;
    CJ_CHECK(nvrtcGetLoweredName, prog, inst.kernel_expression.c_str(), &lowered);
    out.lowered_names.emplace_back(lowered);
    out.name_expressions.push_back(inst.kernel_expression);
    std::vector<ParamProbe> probes;
    for (const auto& p : inst.probe_expressions) {
      CJ_CHECK(nvrtcGetLoweredName, prog, p.c_str(), &lowered);
      probes.push_back(parse_probe(lowered));
    }
    out.probes.push_back(std::move(probes));
  }
  return out;
}

void Program::link(nvrtcProgram prog, const std::vector<InstantiationRequest>& requests,
                   const CompileOptions& options, CompiledProgram& out) const {
  size_t ir_size = 0;
  CJ_CHECK(nvrtcGetLTOIRSize, prog, &ir_size);
  std::string ir(ir_size, '\0');
  CJ_CHECK(nvrtcGetLTOIR, prog, &ir[0]);
  // nvJitLink always produces machine code for the device's own architecture.
  // With -dlto NVRTC stops before code generation, so the options that shape machine code
  // go to nvJitLink, which generates it.
  std::vector<std::string> link_opts = {"-arch=sm_" + std::to_string(options.arch), "-lto"};
  if (options.debug) link_opts.push_back("-g");
  if (options.lineinfo) link_opts.push_back("-lineinfo");
  const std::vector<std::string> shaping = parse_user_options(options.extra).link_options;
  link_opts.insert(link_opts.end(), shaping.begin(), shaping.end());
  std::vector<const char*> link_argv;
  for (const auto& o : link_opts) link_argv.push_back(o.c_str());
  nvJitLinkHandle h = nullptr;
  CJ_CHECK(nvJitLinkCreate, &h, static_cast<uint32_t>(link_argv.size()), link_argv.data());
  struct Destroy {
    nvJitLinkHandle* h;
    ~Destroy() { detail::nvjitlink().nvJitLinkDestroy(h); }
  } destroy{&h};
  std::string names;
  for (const auto& r : requests)
    if (names.find(r.kernel) == std::string::npos) names += (names.empty() ? "" : ", ") + r.kernel;
  auto fail = [&](const std::string& what) {
    throw CompileError(names, "sm_" + std::to_string(options.arch), out.options, link_log(h),
                       number_lines(source_), what);
  };
  if (detail::nvjitlink().nvJitLinkAddData(h, NVJITLINK_INPUT_LTOIR, ir.data(), ir.size(),
                                           filename_.c_str()) != NVJITLINK_SUCCESS)
    fail("nvJitLink rejected the kernel's own LTO-IR.\n");
  for (const std::string& path : options.link) {
    const std::string ext = extension_of(path);
    nvJitLinkInputType type = NVJITLINK_INPUT_NONE;
    if (ext == ".cu") {
      const std::string lto = compile_cu_to_ltoir(path, out.options);
      if (detail::nvjitlink().nvJitLinkAddData(h, NVJITLINK_INPUT_LTOIR, lto.data(), lto.size(),
                                               path.c_str()) != NVJITLINK_SUCCESS)
        fail("nvJitLink rejected '" + path + "' (compiled to LTO-IR).\n");
      continue;
    }
    if (ext == ".ptx") type = NVJITLINK_INPUT_PTX;
    else if (ext == ".cubin") type = NVJITLINK_INPUT_CUBIN;
    else if (ext == ".fatbin") type = NVJITLINK_INPUT_FATBIN;
    else if (ext == ".ltoir") type = NVJITLINK_INPUT_LTOIR;
    else if (ext == ".o") type = NVJITLINK_INPUT_OBJECT;
    else if (ext == ".a") type = NVJITLINK_INPUT_LIBRARY;
    TORCH_CHECK_VALUE(type != NVJITLINK_INPUT_NONE, "torch_cudajit: link file '", path,
                      "' has the extension '", ext, "'; link= takes .cu, .ptx, .cubin, .fatbin, "
                      ".ltoir, .o and .a files.");
    const std::string data = read_whole_file(path);
    if (detail::nvjitlink().nvJitLinkAddData(h, type, data.data(), data.size(), path.c_str()) !=
        NVJITLINK_SUCCESS)
      fail("nvJitLink rejected the link file '" + path + "'.\n");
  }
  if (detail::nvjitlink().nvJitLinkComplete(h) != NVJITLINK_SUCCESS)
    fail("Linking failed: an undefined or duplicate device symbol, or inputs for another "
         "architecture.\n");
  size_t cubin_size = 0;
  CJ_CHECK(nvJitLinkGetLinkedCubinSize, h, &cubin_size);
  out.cubin.resize(cubin_size);
  CJ_CHECK(nvJitLinkGetLinkedCubin, h, &out.cubin[0]);
  out.has_cubin = true;
  out.target = "sm_" + std::to_string(options.arch);
  out.ptx.clear();  // LTO keeps no PTX
}

}  // namespace torch_cudajit
