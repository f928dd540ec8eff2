// torch_cudajit: the nvJitLink stage of a compile with CompileOptions::link (see program.h):
// the kernel's LTO-IR linked with the user's files, .cu files compiled to LTO-IR first, with the
// options that shape machine code.
#include "program.h"

#include "serialize.h"

#include "cuda_api.h"
#include "file_io.h"
#include "options.h"

namespace torch_cudajit {
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
  std::string data;
  TORCH_CHECK_VALUE(detail::read_file(path, data), "torch_cudajit: link file '", path,
                    "' cannot be read; pass existing .cu, .ptx, .cubin, .fatbin, .ltoir, .o or .a "
                    "files.");
  return data;
}

std::string link_log(nvJitLinkHandle h) {
  size_t size = 0;
  std::string log;
  if (detail::nvjitlink().nvJitLinkGetErrorLogSize(h, &size) == NVJITLINK_SUCCESS && size > 1) {
    log.resize(size);
    detail::nvjitlink().nvJitLinkGetErrorLog(h, &log[0]);
  }
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return detail::utf8_text(log);
}

// Compiles a linked .cu file to LTO-IR with the kernel's options.
std::string compile_cu_to_ltoir(const std::string& path, const std::vector<std::string>& options) {
  const std::string text = read_whole_file(path);
  // Resolved before the program exists, so that the destructor below cannot throw.
  const auto destroy_program = detail::nvrtc().nvrtcDestroyProgram.get();
  nvrtcProgram prog = nullptr;
  CJ_CHECK(nvrtcCreateProgram, &prog, text.c_str(), path.c_str(), 0, nullptr, nullptr);
  struct Destroy {
    decltype(destroy_program) destroy;
    nvrtcProgram* p;
    ~Destroy() { destroy(p); }
  } destroy{destroy_program, &prog};
  std::vector<std::string> opts = options;
  opts.push_back("-I" + detail::dirname_of(path));
  opts.push_back("-DCJ_LINKED_FILE");  // cj.cuh's debug globals are defined by the kernel's file
  // cj/cj.cuh's optional parts, should the file include it.
  for (const std::string& m : detail::implicit_macros(detail::implicit_needs(text))) opts.push_back(m);
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  nvrtcResult r = detail::nvrtc().nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  CJ_CHECK(nvrtcGetProgramLogSize, prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) CJ_CHECK(nvrtcGetProgramLog, prog, &log[0]);
  if (r != NVRTC_SUCCESS)
    throw CompileError(path, opts[0].substr(6), opts, detail::utf8_text(log), text, path,
                       "The link file '" + path + "' did not compile.\n");
  size_t size = 0;
  CJ_CHECK(nvrtcGetLTOIRSize, prog, &size);
  std::string ir(size, '\0');
  CJ_CHECK(nvrtcGetLTOIR, prog, &ir[0]);
  return ir;
}

}  // namespace


void detail::link_program(const Program& program, nvrtcProgram prog,
                          const std::vector<InstantiationRequest>& requests,
                          const CompileOptions& options, CompiledProgram& out) {
  size_t ir_size = 0;
  CJ_CHECK(nvrtcGetLTOIRSize, prog, &ir_size);
  std::string ir(ir_size, '\0');
  CJ_CHECK(nvrtcGetLTOIR, prog, &ir[0]);
  // nvJitLink produces machine code for the compile's target: the device's own architecture
  // (or its architecture-specific variant).
  // With -dlto NVRTC stops before code generation, so the options that shape machine code
  // go to nvJitLink, which generates it.
  const std::string machine =
      out.target.rfind("sm_", 0) == 0 ? out.target : "sm_" + std::to_string(options.arch);
  std::vector<std::string> link_opts = {"-arch=" + machine, "-lto"};
  if (options.debug) link_opts.push_back("-g");
  if (options.lineinfo) link_opts.push_back("-lineinfo");
  const std::vector<std::string> shaping = parse_user_options(options.extra).link_options;
  link_opts.insert(link_opts.end(), shaping.begin(), shaping.end());
  std::vector<const char*> link_argv;
  for (const auto& o : link_opts) link_argv.push_back(o.c_str());
  // Resolved before the handle exists, so that the destructor below cannot throw.
  const auto destroy_linker = detail::nvjitlink().nvJitLinkDestroy.get();
  nvJitLinkHandle h = nullptr;
  CJ_CHECK(nvJitLinkCreate, &h, static_cast<uint32_t>(link_argv.size()), link_argv.data());
  struct Destroy {
    decltype(destroy_linker) destroy;
    nvJitLinkHandle* h;
    ~Destroy() { destroy(h); }
  } destroy{destroy_linker, &h};
  auto fail = [&](const std::string& what) {
    throw CompileError(detail::kernel_names(requests), "sm_" + std::to_string(options.arch),
                       out.options, link_log(h), program.source(), program.filename(), what);
  };
  if (detail::nvjitlink().nvJitLinkAddData(h, NVJITLINK_INPUT_LTOIR, ir.data(), ir.size(),
                                           program.filename().c_str()) != NVJITLINK_SUCCESS)
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
  out.target = machine;
  out.ptx.clear();  // LTO keeps no PTX
}

}  // namespace torch_cudajit
