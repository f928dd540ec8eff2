// torch_cudajit: the disk cache's key (see cache_key.h): canonical options, the generated
// source and the files the front end found it reads.
#include "cache_key.h"

#include "cuda_api.h"
#include "file_io.h"
#include "headers.h"
#include "options.h"
#include "reading.h"
#include "sha256.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

namespace torch_cudajit {
namespace {

using detail::read_file;

// Salts every key; bump it when the record of a compile (compile_cache.cpp) changes, so that
// old entries are never read as new ones.
constexpr uint32_t kKeyVersion = 2;

}  // namespace

std::string compile_key(const Program& program, const GeneratedSource& generated,
                        const CompileOptions& options, const Dependencies& deps,
                        std::string* inexact) {
  if (!deps.exact()) {
    if (inexact) *inexact = deps.inexact;
    return "";
  }
  Sha256 h;
  h.field("torch_cudajit cache").field(std::to_string(kKeyVersion));
  // The NVRTC library file stands for its version, its built-in headers and the targets it
  // supports (which decide between sm_XX and compute_XX for options.arch).
  h.field("nvrtc").field(detail::nvrtc_identity());
  h.field("arch").field(std::to_string(options.arch)).field("std").field(options.std);
  h.field(options.debug ? "debug" : "").field(options.lineinfo ? "lineinfo" : "");
  // -D and -U of one macro name keep their order (a later one overrides an earlier one), while
  // different names commute; the other options are a set: the same options in another order
  // give the same key.
  const UserOptions user = parse_user_options(options.extra);
  std::vector<std::string> include_dirs = default_include_dirs();
  include_dirs.insert(include_dirs.end(), user.include_dirs.begin(), user.include_dirs.end());
  std::vector<std::string> macros = user.macros, others = user.others;
  std::sort(others.begin(), others.end());
  for (const auto& f : user.pre_includes) others.push_back("--pre-include=" + f);  // in order
  auto macro_name = [](const std::string& m) { return m.substr(2, m.find_first_of("=(") - 2); };
  std::stable_sort(macros.begin(), macros.end(), [&](const std::string& a, const std::string& b) {
    return macro_name(a) < macro_name(b);
  });
  h.field("link");
  for (const auto& path : options.link) {
    std::string data;
    const bool readable = read_file(path, data);
    h.field(path).field(readable ? sha256_hex(data) : "unreadable");
    if (readable && path.size() > 3 && path.compare(path.size() - 3, 3, ".cu") == 0) {
      // A linked .cu file is compiled on its own: the files it reads, as the front end finds
      // them for it.
      const Dependencies linked = read_dependencies(data, path, options.extra, options.std,
                                                    options.arch, /*use_cache=*/true);
      if (!linked.exact()) {
        if (inexact) *inexact = linked.inexact + " (in " + path + ")";
        return "";
      }
      linked.hash_into(h);
    }
  }
  if (!options.link.empty()) {
    const std::string jitlink = detail::nvjitlink().library_path;
    struct stat st;
    h.field(jitlink).field(stat(jitlink.c_str(), &st) == 0 ? std::to_string(st.st_size) + ":" +
                                                               std::to_string(st.st_mtim.tv_sec)
                                                         : "");
  }
  h.field("macros");
  for (const auto& m : macros) h.field(m);
  h.field("options");
  for (const auto& o : others) h.field(o);
  h.field("include dirs");
  for (const auto& d : include_dirs) h.field(d);
  h.field("source").field(program.filename()).field(generated.text);
  // NVRTC looks for quoted includes in the program's folder, taken from the working directory.
  char cwd[4096];
  h.field("working directory").field(getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : "");
  h.field("name expressions");
  for (const auto& inst : generated.instantiations) {
    h.field(inst.kernel_expression);
    for (const auto& p : inst.probe_expressions) h.field(p);
  }
  deps.hash_into(h);
  return h.hex_digest();
}

}  // namespace torch_cudajit
