// torch_cudajit: the disk cache's key (see cache_key.h): canonical options, the generated
// source and every header reachable from it through the include path.
#include "cache_key.h"

#include "cuda_api.h"
#include "file_io.h"
#include "frontend.h"
#include "headers.h"
#include "options.h"
#include "sha256.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>

namespace torch_cudajit {
namespace {

using detail::dirname_of;
using detail::read_file;
using detail::Include;
using detail::scan_includes;

// Salts every key; bump it when the record of a compile (compile_cache.cpp) changes, so that
// old entries are never read as new ones.
constexpr uint32_t kKeyVersion = 1;
// Salts reflection keys; bump it when what a reflection record holds changes meaning.
constexpr uint32_t kReflectionKeyVersion = 1;


// What the key needs of one header file, memoized per process while the file is unchanged.
struct HeaderFacts {
  dev_t dev = 0;
  ino_t ino = 0;
  int64_t size = -1;
  int64_t mtime_ns = 0;
  std::string digest;
  std::vector<Include> includes;
  std::string inexact;  // a directive naming a header scan_includes cannot resolve, if any
};

std::mutex& header_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<std::string, HeaderFacts>& header_memo() {
  static std::unordered_map<std::string, HeaderFacts> memo;
  return memo;
}

// The content digest and includes of a header; false when it cannot be read.
bool header_facts(const std::string& path, const struct stat& st, HeaderFacts& out) {
  const int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  {
    std::lock_guard<std::mutex> lock(header_mutex());
    auto it = header_memo().find(path);
    if (it != header_memo().end() && it->second.dev == st.st_dev && it->second.ino == st.st_ino &&
        it->second.size == st.st_size && it->second.mtime_ns == mtime) {
      out = it->second;
      return true;
    }
  }
  std::string text;
  if (!read_file(path, text)) return false;
  out.dev = st.st_dev;
  out.ino = st.st_ino;
  out.size = st.st_size;
  out.mtime_ns = mtime;
  out.digest = sha256_hex(text);
  out.inexact.clear();
  out.includes = scan_includes(text, out.inexact);
  // A file edited within the same timestamp tick as it was read would keep a stale memo, so
  // only files older than a second are remembered.
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  if (std::chrono::duration_cast<std::chrono::nanoseconds>(now).count() - mtime > 1000000000) {
    std::lock_guard<std::mutex> lock(header_mutex());
    header_memo()[path] = out;
  }
  return true;
}

bool is_regular(const std::string& path, struct stat& st) {
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Adds every header reachable from `text` (and from `pre_included`, the files of --pre-include
// options) to the hash. User and package headers count by content; headers of the CUDA toolkit
// by path, size and time (the NVRTC version pins them), which keeps the key cheap for sources
// that include cuda_fp16.h and friends. Returns the first directive naming a header this scan
// cannot resolve (see scan_includes), "" when there is none: with one, the key does not cover
// what the compiler reads.
std::string hash_headers(Sha256& h, const std::string& text, const std::vector<std::string>& pre_included,
                  const std::vector<std::string>& include_dirs, const std::string& toolkit_dir) {
  struct Pending {
    Include inc;
    std::string from_dir;
  };
  std::vector<Pending> stack;
  char cwd[4096];
  const std::string main_dir = getcwd(cwd, sizeof(cwd)) ? cwd : ".";
  std::string inexact;
  for (auto& inc : scan_includes(text, inexact)) stack.push_back({inc, main_dir});
  for (const auto& name : pre_included) stack.push_back({{name, true}, main_dir});
  std::set<std::string> seen;
  while (!stack.empty()) {
    Pending p = stack.back();
    stack.pop_back();
    std::string found;
    struct stat st;
    if (!p.inc.name.empty() && p.inc.name[0] == '/') {
      if (is_regular(p.inc.name, st)) found = p.inc.name;
    } else {
      if (p.inc.quoted && is_regular(p.from_dir + "/" + p.inc.name, st)) found = p.from_dir + "/" + p.inc.name;
      for (size_t i = 0; found.empty() && i < include_dirs.size(); ++i)
        if (is_regular(include_dirs[i] + "/" + p.inc.name, st)) found = include_dirs[i] + "/" + p.inc.name;
    }
    if (!seen.insert(p.inc.name + "\n" + found).second) continue;
    h.field("include").field(p.inc.name).field(found);
    if (found.empty()) continue;  // an NVRTC built-in header, or one under a false #if
    if (!toolkit_dir.empty() && found.compare(0, toolkit_dir.size() + 1, toolkit_dir + "/") == 0) {
      const int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
      h.field(std::to_string(st.st_size) + ":" + std::to_string(mtime));
      continue;
    }
    HeaderFacts facts;
    if (!header_facts(found, st, facts)) {
      h.field("unreadable");
      continue;
    }
    h.field(facts.digest);
    if (inexact.empty() && !facts.inexact.empty()) inexact = facts.inexact + " (in " + found + ")";
    for (auto& inc : facts.includes) stack.push_back({inc, dirname_of(found)});
  }
  return inexact;
}

// The folders headers are searched in: the plugin's first, then the user's, in order (the order
// decides which header wins); and the CUDA include folder, the last default one when the
// toolkit headers were found, whose headers count by path, size and time.
struct SearchPath {
  std::vector<std::string> dirs;
  std::string toolkit;
};

SearchPath search_path(const UserOptions& user) {
  SearchPath out{default_include_dirs(), ""};
  if (out.dirs.size() > 1) out.toolkit = out.dirs.back();
  out.dirs.insert(out.dirs.end(), user.include_dirs.begin(), user.include_dirs.end());
  return out;
}

// The key in `h` with the headers reachable from `text` added; "" when one is named through a
// macro (`inexact` then receives the directive).
std::string finish_key(Sha256& h, const std::string& text, const std::vector<std::string>& pre_included,
                       const SearchPath& path, std::string* inexact) {
  const std::string why = hash_headers(h, text, pre_included, path.dirs, path.toolkit);
  if (!why.empty()) {
    if (inexact) *inexact = why;
    return "";
  }
  return h.hex_digest();
}
}  // namespace

std::string compile_key(const Program& program, const GeneratedSource& generated,
                        const CompileOptions& options, std::string* inexact) {
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
  const SearchPath search = search_path(user);
  const std::vector<std::string>& include_dirs = search.dirs;
  std::vector<std::string> macros = user.macros, others = user.others;
  const std::vector<std::string>& pre_included = user.pre_includes;
  std::sort(others.begin(), others.end());
  for (const auto& f : pre_included) others.push_back("--pre-include=" + f);  // in order
  auto macro_name = [](const std::string& m) { return m.substr(2, m.find_first_of("=(") - 2); };
  std::stable_sort(macros.begin(), macros.end(), [&](const std::string& a, const std::string& b) {
    return macro_name(a) < macro_name(b);
  });
  h.field("link");
  for (const auto& path : options.link) {
    std::string data;
    h.field(path).field(read_file(path, data) ? sha256_hex(data) : "unreadable");
    if (path.size() > 3 && path.compare(path.size() - 3, 3, ".cu") == 0) {
      std::vector<std::string> dirs = {dirname_of(path)};
      dirs.insert(dirs.end(), include_dirs.begin(), include_dirs.end());
      const std::string why = hash_headers(h, data, {}, dirs, search.toolkit);
      if (!why.empty()) {
        if (inexact) *inexact = why + " (in " + path + ")";
        return "";
      }
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
  const std::vector<Instantiation>& insts = generated.instantiations;
  const std::string& text = generated.text;
  h.field("source").field(program.filename()).field(text);
  h.field("name expressions");
  for (const auto& inst : insts) {
    h.field(inst.kernel_expression);
    for (const auto& p : inst.probe_expressions) h.field(p);
  }
  return finish_key(h, text, pre_included, search, inexact);
}

std::string reflection_key(const std::string& filename, const std::string& source,
                           const std::vector<std::string>& frontend_args,
                           const std::vector<std::string>& options, std::string* inexact) {
  Sha256 h;
  h.field("torch_cudajit reflection").field(std::to_string(kReflectionKeyVersion));
  h.field("front end").field(frontend_identity());
  h.field("arguments");
  for (const auto& a : frontend_args) h.field(a);
  h.field("source").field(filename).field(source);
  const UserOptions user = parse_user_options(options);
  // The front end pre-includes cj/cj.cuh (frontend_args), then the user's files.
  std::vector<std::string> pre_included = {"cj/cj.cuh"};
  pre_included.insert(pre_included.end(), user.pre_includes.begin(), user.pre_includes.end());
  return finish_key(h, source, pre_included, search_path(user), inexact);
}

}  // namespace torch_cudajit
