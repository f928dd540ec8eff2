// torch_cudajit: the Clang front end (see frontend.h): one parse of a source through libclang
// (libclang.h), with the shared preamble precompiled once, and a walk of its __global__
// declarations.
#include "frontend.h"

#include "dependencies.h"
#include "file_io.h"
#include "headers.h"
#include "libclang.h"
#include "sha256.h"

#include <c10/util/Exception.h>

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <set>

namespace torch_cudajit {
namespace detail {

namespace {

using detail::dirname_of;
using detail::Include;
using detail::read_file;
using detail::scan_includes;

std::atomic<uint64_t> g_parses{0};  // sources parsed (frontend_parse_count)

// The main file of the translation unit being walked.
thread_local CXFile t_main_file = nullptr;

// Offset of a location in the main file, npos when it lies elsewhere (a header). A location
// inside a macro expansion (`__global__` is one) maps to where the macro was used.
size_t main_offset(CXSourceLocation loc, unsigned* line = nullptr) {
  CXFile file = nullptr;
  unsigned l = 0, col = 0, off = 0;
  libclang().clang_getFileLocation(loc, &file, &l, &col, &off);
  if (file == nullptr || file != t_main_file) return std::string::npos;
  if (line != nullptr) *line = l;
  return off;
}

// True when a location was written in the main file itself, not produced by a macro.
bool written_in_main(CXSourceLocation loc) {
  CXFile file = nullptr;
  unsigned l = 0, col = 0, spelled = 0;
  libclang().clang_getSpellingLocation(loc, &file, &l, &col, &spelled);
  return file == t_main_file && main_offset(loc) == spelled;
}

// The first non-blank, non-comment character at or after `pos`.
size_t skip_blank(const std::string& s, size_t pos) {
  while (pos < s.size()) {
    if (std::isspace(static_cast<unsigned char>(s[pos])) ||
        (s[pos] == '\\' && pos + 1 < s.size() && s[pos + 1] == '\n')) {
      ++pos;
    } else if (s.compare(pos, 2, "//") == 0) {
      pos = s.find('\n', pos);
    } else if (s.compare(pos, 2, "/*") == 0) {
      size_t e = s.find("*/", pos + 2);
      pos = e == std::string::npos ? e : e + 2;
    } else {
      break;
    }
  }
  return pos;
}

struct Walk {
  const std::string* source;  // the text of the file being walked (t_main_file)
  std::vector<std::string> scope;  // enclosing named namespaces
  bool extern_c = false;
  std::vector<ParsedKernel> out;
  // A header of the user's own being walked (its path; "" for the source itself), and the
  // texts of such headers.
  std::string header;
  std::map<CXFile, std::string> header_texts;
  CXTranslationUnit tu = nullptr;
  CXFile source_file = nullptr;
  std::vector<std::string> system_dirs;  // the plugin's and CUDA's header folders
};

int visit(CXCursor cursor, CXCursor parent, CXClientData data);

void visit_children(CXCursor cursor, Walk& w) {
  libclang().clang_visitChildren(cursor, visit, &w);
}

bool is_kernel(CXCursor cursor) {
  bool global = false;
  libclang().clang_visitChildren(
      cursor,
      [](CXCursor c, CXCursor, CXClientData d) {
        if (libclang().clang_getCursorKind(c) != kCursorCudaGlobalAttr) return kVisitContinue;
        *static_cast<bool*>(d) = true;
        return kVisitBreak;
      },
      &global);
  return global;
}

void read_kernel(CXCursor cursor, bool is_template, Walk& w) {
  const auto& c = libclang();
  ParsedKernel k;
  k.name = take(c.clang_getCursorSpelling(cursor));
  for (const auto& s : w.scope) k.qualified_name += s + "::";
  k.qualified_name += k.name;
  k.is_extern_c = w.extern_c;
  const CXSourceRange extent = c.clang_getCursorExtent(cursor);
  k.begin = main_offset(c.clang_getRangeStart(extent));
  unsigned line = 1;
  const size_t name_offset = main_offset(c.clang_getCursorLocation(cursor), &line);
  k.line = line;
  // An abbreviated template (`auto` parameters, C++20) has no template header of its own: its
  // invented template parameters sit in the parameter list.
  k.is_template = is_template && k.begin != std::string::npos &&
                  w.source->compare(k.begin, 8, "template") == 0;
  // With bodies skipped the extent ends at the declarator; a definition's body follows it.
  size_t end = main_offset(c.clang_getRangeEnd(extent));
  for (int depth = 0; end < w.source->size(); end = skip_blank(*w.source, end + 1)) {
    const char ch = (*w.source)[end];
    if (depth == 0 && (ch == '{' || ch == ';')) break;
    depth += ch == '(' ? 1 : ch == ')' ? -1 : 0;
  }
  k.is_definition = end < w.source->size() && (*w.source)[end] == '{';
  k.end = std::min(end, w.source->size());
  struct Children {
    Walk* w;
    ParsedKernel* k;
    size_t name_offset;
  } ch{&w, &k, name_offset};
  c.clang_visitChildren(
      cursor,
      [](CXCursor p, CXCursor, CXClientData d) {
        const auto& c = libclang();
        auto& ch = *static_cast<Children*>(d);
        const int kind = c.clang_getCursorKind(p);
        const CXSourceRange r = c.clang_getCursorExtent(p);
        if (kind == kCursorTemplateTypeParameter || kind == kCursorNonTypeTemplateParameter ||
            kind == kCursorTemplateTemplateParameter) {
          const size_t b = main_offset(c.clang_getRangeStart(r));
          const size_t e = main_offset(c.clang_getRangeEnd(r));
          if (!ch.k->is_template || b >= ch.name_offset) return kVisitContinue;  // invented
          if (ch.k->template_params_begin == std::string::npos) ch.k->template_params_begin = b;
          ch.k->template_params_end = e;
        } else if (kind == kCursorParmDecl) {
          ParsedParam pp;
          pp.name = take(c.clang_getCursorSpelling(p));
          const CXType t = c.clang_getCursorType(p);
          pp.spelling = take(c.clang_getTypeSpelling(t));
          pp.invalid = c.clang_isInvalidDeclaration(p) != 0 || t.kind == kTypeInvalid;
          const CXSourceLocation b = c.clang_getRangeStart(r), e = c.clang_getRangeEnd(r);
          if (written_in_main(b) && written_in_main(e)) {
            pp.begin = main_offset(b);
            const size_t end = main_offset(e);
            if (end >= pp.begin && end <= ch.w->source->size())
              pp.source_text = ch.w->source->substr(pp.begin, end - pp.begin);
          }
          ch.k->params.push_back(std::move(pp));
        }
        return kVisitContinue;
      },
      &ch);
  if (k.is_template && k.template_params_end != std::string::npos) {
    const size_t close = skip_blank(*w.source, k.template_params_end);
    if (close < w.source->size() && (*w.source)[close] == '>') k.template_close = close;
  }
  w.out.push_back(std::move(k));
}

}  // namespace

bool unit_file_text(CXTranslationUnit tu, CXFile file, const std::string& path, std::string& out) {
  size_t size = 0;
  const auto& c = libclang();
  const char* bytes =
      c.clang_getFileContents != nullptr ? c.clang_getFileContents(tu, file, &size) : nullptr;
  if (bytes == nullptr) return read_file(path, out);
  out.assign(bytes, size);
  return true;
}

namespace {

// Walks a declaration that lies in a header of the user's own (not under the plugin's or CUDA's
// folders, nor the front end's): its kernels are read from the header's text, and taken as
// declared elsewhere than the source (no layout rewrite: their Arrays take any layout).
void walk_user_header(CXCursor cursor, Walk& w) {
  const auto& c = libclang();
  CXFile file = nullptr;
  unsigned l = 0, col = 0, off = 0;
  c.clang_getFileLocation(c.clang_getCursorLocation(cursor), &file, &l, &col, &off);
  if (file == nullptr || w.tu == nullptr) return;
  const std::string path = take(c.clang_getFileName(file));
  if (!is_user_header(path, w.system_dirs)) return;
  auto it = w.header_texts.find(file);
  if (it == w.header_texts.end()) {
    std::string text;
    if (!unit_file_text(w.tu, file, path, text)) return;
    it = w.header_texts.emplace(file, std::move(text)).first;
  }
  const size_t first = w.out.size();
  const CXFile outer_file = t_main_file;
  const std::string* outer_source = w.source;
  t_main_file = file;
  w.source = &it->second;
  w.header = path;
  visit(cursor, libclang().clang_getTranslationUnitCursor(w.tu), &w);
  t_main_file = outer_file;
  w.source = outer_source;
  w.header.clear();
  for (size_t i = first; i < w.out.size(); ++i) {
    ParsedKernel& k = w.out[i];
    k.file = path;
    if (k.is_template && k.template_params_begin != std::string::npos &&
        k.template_params_end != std::string::npos && k.template_params_end <= it->second.size())
      k.template_params_text = it->second.substr(k.template_params_begin,
                                                 k.template_params_end - k.template_params_begin);
    k.begin = k.end = std::string::npos;
    k.template_params_begin = k.template_params_end = k.template_close = std::string::npos;
    for (ParsedParam& p : k.params) p.begin = std::string::npos;
  }
}

int visit(CXCursor cursor, CXCursor, CXClientData data) {
  const auto& c = libclang();
  Walk& w = *static_cast<Walk*>(data);
  // Declarations of the headers (and of the precompiled preamble) are not walked into.
  if (main_offset(c.clang_getCursorLocation(cursor)) == std::string::npos) {
    // Kernels of the user's own headers are the source's too (as nvcc sees them after
    // preprocessing); those of the plugin's, CUDA's and the preamble's headers are not.
    if (w.header.empty()) walk_user_header(cursor, w);
    return kVisitContinue;
  }
  const int kind = c.clang_getCursorKind(cursor);
  if (kind == kCursorNamespace) {
    const std::string name = take(c.clang_getCursorSpelling(cursor));
    // Kernels of an unnamed namespace are named without it in the same source.
    if (!name.empty()) w.scope.push_back(name);
    visit_children(cursor, w);
    if (!name.empty()) w.scope.pop_back();
  } else if (kind == kCursorLinkageSpec || kind == kCursorUnexposedDecl) {
    const bool outer = w.extern_c;
    // libclang before LLVM 15 reports a linkage specification as an unexposed declaration:
    // then its text says which it is.
    bool linkage = kind == kCursorLinkageSpec;
    if (!linkage) {
      const size_t b = main_offset(c.clang_getRangeStart(c.clang_getCursorExtent(cursor)));
      linkage = b != std::string::npos && w.source->compare(skip_blank(*w.source, b), 6, "extern") == 0;
    }
    w.extern_c = linkage || outer;
    visit_children(cursor, w);
    w.extern_c = outer;
  } else if ((kind == kCursorFunctionDecl || kind == kCursorFunctionTemplate) &&
             is_kernel(cursor)) {
    // An explicit specialization (`template <> __global__ void k<float>(...)`) is code for one
    // instantiation, not an entry point of its own.
    // Its declaration starts with `template <>` though it is no function template.
    if (kind == kCursorFunctionDecl) {
      const size_t b = main_offset(c.clang_getRangeStart(c.clang_getCursorExtent(cursor)));
      if (b != std::string::npos && w.source->compare(b, 8, "template") == 0) return kVisitContinue;
    }
    read_kernel(cursor, kind == kCursorFunctionTemplate, w);
  }
  return kVisitContinue;
}

// What nvcc's and NVRTC's CUDA mode gives every source before its first line, for Clang's
// CUDA mode without CUDA's runtime wrapper headers: the execution-space keywords as the
// attributes Clang knows, NVRTC's predefined macros and types, and CUDA's built-in types (the
// vector types, dim3, cudaTextureObject_t, cudaStream_t, ...), which NVRTC declares unasked.
constexpr const char* kPrelude = R"(
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __managed__ __attribute__((managed))
#define __grid_constant__
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __cluster_dims__(...)
#define __maxnreg__(...)
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __CUDACC__ 1
#define __CUDACC_RTC__ 1
#define CJ_FRONTEND 1
typedef __SIZE_TYPE__ size_t;
namespace std { template <class T> class initializer_list; }
#if __has_include(<builtin_types.h>)
#include <builtin_types.h>
#elif __has_include(<vector_types.h>)
#include <vector_types.h>
#endif
)";
constexpr const char* kPreludePath = "/torch_cudajit/frontend_prelude.h";

}  // namespace
}  // namespace detail

uint64_t frontend_parse_count() { return detail::g_parses.load(); }

namespace detail {
namespace {

using FileList = std::vector<std::pair<std::string, std::string>>;

// Files of the front end's own, held in memory: the prelude, the source, the preamble's stand-in.
constexpr const char* kVirtualRoot = "/torch_cudajit/";

// One parse of `main` (held in memory) with these arguments; nullptr when libclang refused.
CXTranslationUnit parse(CXIndex index, const std::string& main, const std::string& text,
                        const std::vector<std::string>& argv, unsigned options) {
  const auto& c = libclang();
  std::vector<const char*> cargs;
  for (const auto& a : argv) cargs.push_back(a.c_str());
  CXUnsavedFile files[2] = {{main.c_str(), text.data(), text.size()},
                            {kPreludePath, kPrelude, std::char_traits<char>::length(kPrelude)}};
  CXTranslationUnit tu = nullptr;
  const int err = c.clang_parseTranslationUnit2(index, main.c_str(), cargs.data(),
                                                static_cast<int>(cargs.size()), files, 2,
                                                options, &tu);
  return err == 0 ? tu : nullptr;
}

// Parses a new text of `main` into a translation unit that held an earlier one, under the same
// arguments; false when libclang refused (the unit is then unusable).
bool reparse(CXTranslationUnit tu, const std::string& main, const std::string& text) {
  CXUnsavedFile files[2] = {{main.c_str(), text.data(), text.size()},
                            {kPreludePath, kPrelude, std::char_traits<char>::length(kPrelude)}};
  return libclang().clang_reparseTranslationUnit(tu, 2, files, 0) == 0;
}

// The files a translation unit read (its own inclusions; a precompiled preamble's are recorded
// when it is made), each with the digest of the bytes Clang holds for it.
FileList inclusions(CXTranslationUnit tu) {
  struct Visit {
    CXTranslationUnit tu;
    FileList files;
    std::string cwd;
  } v{tu, {}, {}};
  char cwd[4096];
  v.cwd = getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : ".";
  libclang().clang_getInclusions(
      tu,
      [](CXFile file, CXSourceLocation*, unsigned, CXClientData data) {
        auto& v = *static_cast<Visit*>(data);
        const auto& c = libclang();
        std::string path = take(c.clang_getFileName(file));
        if (path.empty() || path.rfind(kVirtualRoot, 0) == 0) return;
        if (path[0] != '/') path = v.cwd + "/" + path;
        std::string digest;
        if (c.clang_getFileContents != nullptr) {
          size_t size = 0;
          if (const char* bytes = c.clang_getFileContents(v.tu, file, &size))
            digest = Sha256().update(bytes, size).hex_digest();
        }
        v.files.emplace_back(std::move(path), std::move(digest));
      },
      &v);
  return std::move(v.files);
}

// Adds to each kernel of `kernels` the errors Clang reported inside its declaration.
void add_declaration_errors(CXTranslationUnit tu, const std::string& filename,
                            std::vector<ParsedKernel>& kernels) {
  const auto& c = libclang();
  for (unsigned i = 0, n = c.clang_getNumDiagnostics(tu); i < n; ++i) {
    void* d = c.clang_getDiagnostic(tu, i);
    if (c.clang_getDiagnosticSeverity(d) >= kDiagnosticError) {
      CXFile file = nullptr;
      unsigned line = 0, column = 0, offset = 0;
      c.clang_getFileLocation(c.clang_getDiagnosticLocation(d), &file, &line, &column, &offset);
      const std::string text = take(c.clang_getDiagnosticSpelling(d));
      // `auto` parameters are read before C++20 is switched on for them (Program does). An
      // incomplete type depends on which CUDA headers this front end found (torch's wheels
      // declare some types differently): NVRTC, which compiles the declaration, judges it.
      if (file == t_main_file && text.find("'auto'") == std::string::npos &&
          text.find("incomplete type") == std::string::npos) {
        for (ParsedKernel& k : kernels)
          if (k.begin != std::string::npos && offset >= k.begin && offset < k.end) {
            k.errors.push_back(filename + ":" + std::to_string(line) + ":" +
                               std::to_string(column) + ": error: " + text);
            k.error_lines.push_back(line);
          }
      }
    }
    c.clang_disposeDiagnostic(d);
  }
}

// The first "file not found" diagnostic of a parse ("" when there is none).
std::string missing_header(CXTranslationUnit tu) {
  const auto& c = libclang();
  std::string out;
  for (unsigned i = 0, n = c.clang_getNumDiagnostics(tu); i < n && out.empty(); ++i) {
    void* d = c.clang_getDiagnostic(tu, i);
    if (take(c.clang_getDiagnosticSpelling(d)).find("file not found") != std::string::npos) {
      out = take(c.clang_formatDiagnostic(d, /*CXDiagnostic_DisplaySourceLocation=*/1));
      // The source is held under the front end's own folder: name it as the user did.
      const std::string held = std::string(kVirtualRoot) + "source/";
      if (out.compare(0, held.size(), held) == 0) out.erase(0, held.size());
    }
    c.clang_disposeDiagnostic(d);
  }
  return out;
}

// True when every file still holds the bytes recorded for it.
bool still_the_same(const FileList& files) {
  for (const auto& [path, digest] : files)
    if (content_digest(path) != digest) return false;
  return true;
}

// Records the bytes' digests of `files` where Clang could not show them (older libclang): the
// file's contents now. False when a file changed since Clang read it.
bool settle_digests(FileList& files) {
  for (auto& [path, digest] : files) {
    const std::string now = content_digest(path);
    if (digest.empty()) digest = now;
    if (now.empty() || now != digest) return false;
  }
  return true;
}

// Translation units kept after a parse, by arguments and file name, to parse the next source of
// that name into: a reparse skips the driver and the set-up of a compiler, which are a fixed
// part of every parse. Only used under parse_kernels' lock.
struct KeptUnit {
  std::string key;
  CXTranslationUnit tu;
  FileList files;  // what its last parse read: a reparse is only safe while they are unchanged
};
std::vector<KeptUnit>& kept_units() {
  static auto* units = new std::vector<KeptUnit>();  // never destroyed, like the preambles
  return *units;
}
constexpr size_t kKeptUnits = 4;

CXTranslationUnit take_kept_unit(const std::string& key) {
  auto& units = kept_units();
  for (auto it = units.begin(); it != units.end(); ++it)
    if (it->key == key) {
      CXTranslationUnit tu = it->tu;
      const bool usable = still_the_same(it->files);
      units.erase(it);
      if (usable) return tu;
      libclang().clang_disposeTranslationUnit(tu);
      return nullptr;
    }
  return nullptr;
}

void keep_unit(std::string key, CXTranslationUnit tu, FileList files) {
  auto& units = kept_units();
  if (units.size() >= kKeptUnits) {
    libclang().clang_disposeTranslationUnit(units.front().tu);
    units.erase(units.begin());
  }
  units.push_back({std::move(key), tu, std::move(files)});
}

// True when a fatal diagnostic says the precompiled preamble could not be used.
bool preamble_rejected(CXTranslationUnit tu) {
  const auto& c = libclang();
  bool rejected = false;
  for (unsigned i = 0, n = c.clang_getNumDiagnostics(tu); i < n && !rejected; ++i) {
    void* d = c.clang_getDiagnostic(tu, i);
    if (c.clang_getDiagnosticSeverity(d) >= kDiagnosticFatal) {
      const std::string text = take(c.clang_getDiagnosticSpelling(d));
      rejected = text.find("precompiled") != std::string::npos ||
                 text.find("PCH") != std::string::npos ||
                 text.find("AST file") != std::string::npos;
    }
    c.clang_disposeDiagnostic(d);
  }
  return rejected;
}

// The preamble every source shares (the prelude, cj/cj.cuh and CUDA's fp16/bf16 headers, the
// user's pre-included headers) is parsed once per argument list and kept as a precompiled
// header: each source then parses only its own text. A preamble is used only while every file
// it read still holds the same bytes (Clang's own check of a PCH compares sizes and times to
// the second, which misses an edit that keeps both).
struct Preamble {
  int fd = -1;      // the PCH, -1 when it could not be made
  FileList files;   // what it read
};
struct Preambles {
  std::mutex mutex;
  std::map<std::string, Preamble> by_args;
};

Preambles& preambles() {
  static Preambles* p = new Preambles();  // never destroyed: parses may run during exit
  return *p;
}

std::string preamble_key(const std::vector<std::string>& argv) {
  std::string key;
  for (const auto& a : argv) key += a + '\0';
  return key;
}

constexpr const char* kPreambleFolderPrefix = "torch_cudajit_frontend.";

// Whether a PCH can be written without LLVM meeting a write error, which it treats as fatal
// (the process aborts): no file size limit that a PCH could reach, and room on the disk.
bool room_for_preamble(const std::string& tmp) {
  constexpr uint64_t kRoom = uint64_t(512) << 20;
  struct rlimit lim;
  if (getrlimit(RLIMIT_FSIZE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < kRoom)
    return false;
  struct statvfs fs;
  return statvfs(tmp.c_str(), &fs) == 0 &&
         static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize >= kRoom;
}

// Saves a PCH and keeps it only as an open descriptor, read as /proc/self/fd/N: nothing is left
// on disk however the process ends (a crash, os._exit in a worker), and forked children
// inherit it. -1 when it cannot be saved.
int save_preamble(CXTranslationUnit tu) {
  const std::string tmp = temp_folder();
  // The folders of preambles whose process died while saving one (killed, say).
  sweep_dead_process_folders(tmp, kPreambleFolderPrefix);
  if (!room_for_preamble(tmp)) return -1;
  std::string folder =
      tmp + "/" + kPreambleFolderPrefix + std::to_string(getpid()) + ".XXXXXX";
  if (mkdtemp(folder.data()) == nullptr) return -1;
  const std::string file = folder + "/preamble.pch";
  int fd = -1;
  if (libclang().clang_saveTranslationUnit(tu, file.c_str(), 0) == 0)
    fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  // Clang writes through a temporary file beside the PCH: the folder goes with whatever is there.
  remove_flat_folder(folder);
  return fd;
}

// The PCH of the `-include` arguments in `argv` under the other arguments, made on first use
// and again whenever a file it read changed; "" when it cannot be made (the caller then parses
// everything each time). `files` receives what it read.
std::string preamble_pch(CXIndex index, const std::vector<std::string>& argv, FileList& files) {
  Preambles& p = preambles();
  const std::string key = preamble_key(argv);
  std::lock_guard<std::mutex> lock(p.mutex);
  auto it = p.by_args.find(key);
  if (it != p.by_args.end() && it->second.fd >= 0 && !still_the_same(it->second.files)) {
    close(it->second.fd);
    p.by_args.erase(it);
    it = p.by_args.end();
  }
  if (it == p.by_args.end()) {
    Preamble made;
    CXTranslationUnit tu =
        parse(index, std::string(kVirtualRoot) + "preamble.cu", "", argv,
              kParseIncomplete | kParseForSerialization | kParseSkipFunctionBodies);
    if (tu != nullptr) {
      made.files = inclusions(tu);
      // Refused when the preamble has errors (every source is then parsed whole), or when a
      // file changed while it was read.
      if (settle_digests(made.files)) made.fd = save_preamble(tu);
      libclang().clang_disposeTranslationUnit(tu);
    }
    it = p.by_args.emplace(key, std::move(made)).first;
  }
  if (it->second.fd < 0) return "";
  files = it->second.files;
  return "/proc/self/fd/" + std::to_string(it->second.fd);
}

// Drops a PCH that Clang refused to load; its arguments are parsed whole from now on.
void forget_preamble(const std::vector<std::string>& argv) {
  Preambles& p = preambles();
  std::lock_guard<std::mutex> lock(p.mutex);
  Preamble& pre = p.by_args[preamble_key(argv)];
  if (pre.fd >= 0) close(pre.fd);
  pre.fd = -1;
  pre.files.clear();
}

// --- includes that would stop the parse -------------------------------------------------------

// Refuses a source whose #include lines (its own, its headers', the pre-included files') name a
// path that exists but is no regular file: Clang would block opening a FIFO, and read a device
// such as /dev/zero until memory runs out. Every folder the name could be found in is checked,
// so nothing that the search order could reach slips through. The headers of the plugin and of
// CUDA are installed files and are not read; headers named through a macro are not seen here.
void refuse_special_includes(const std::string& source, const std::vector<std::string>& argv) {
  const std::vector<std::string> installed = default_include_dirs();
  auto is_installed = [&](const std::string& path) {
    for (const std::string& d : installed)
      if (path.size() > d.size() && path.compare(0, d.size(), d) == 0 && path[d.size()] == '/')
        return true;
    return false;
  };
  std::vector<std::string> quote_dirs, dirs, pre_included;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "-iquote" && i + 1 < argv.size()) quote_dirs.push_back(argv[++i]);
    else if (a == "-include" && i + 1 < argv.size()) pre_included.push_back(argv[++i]);
    else if (a.size() > 2 && a.compare(0, 2, "-I") == 0) dirs.push_back(a.substr(2));
  }
  struct Pending {
    Include inc;
    std::string from_dir;  // the including file's folder ("" for the source itself)
  };
  std::vector<Pending> stack;
  std::string inexact;
  for (const auto& inc : scan_includes(source, inexact)) stack.push_back({inc, ""});
  for (const auto& f : pre_included) stack.push_back({{f, true}, ""});
  std::set<std::string> seen;
  while (!stack.empty() && seen.size() < 10000) {
    const Pending p = stack.back();
    stack.pop_back();
    std::vector<std::string> candidates;
    if (!p.inc.name.empty() && p.inc.name[0] == '/') {
      candidates.push_back(p.inc.name);
    } else {
      if (p.inc.quoted) {
        if (!p.from_dir.empty()) candidates.push_back(p.from_dir + "/" + p.inc.name);
        for (const auto& d : quote_dirs) candidates.push_back(d + "/" + p.inc.name);
      }
      for (const auto& d : dirs) candidates.push_back(d + "/" + p.inc.name);
    }
    for (const std::string& path : candidates) {
      if (!seen.insert(path).second) continue;
      struct stat st;
      if (stat(path.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) continue;
      TORCH_CHECK_VALUE(S_ISREG(st.st_mode), "torch_cudajit: `#include ",
                        p.inc.quoted ? "\"" : "<", p.inc.name, p.inc.quoted ? "\"" : ">",
                        "` can resolve to '", path, "', which is not a regular file (",
                        S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) ? "a character device"
                        : S_ISBLK(st.st_mode) ? "a block device" : S_ISSOCK(st.st_mode) ? "a socket"
                        : "not a plain file",
                        "); headers must be plain files. Rename or remove it, or change the "
                        "include folders.");
      std::string text;
      if (is_installed(path) || !read_file(path, text)) continue;
      for (const auto& inc : scan_includes(text, inexact)) stack.push_back({inc, dirname_of(path)});
    }
  }
}

// Runs `fn` on a thread with a stack of `bytes` (reserved, not committed: only what the parse
// touches is used) and waits for it; its exception, if any, is rethrown here.
void run_with_stack(size_t bytes, const std::function<void()>& fn) {
  struct Job {
    const std::function<void()>* fn;
    std::exception_ptr error;
  } job{&fn, nullptr};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, bytes);
  pthread_t thread;
  const int err = pthread_create(
      &thread, &attr,
      [](void* p) -> void* {
        auto* j = static_cast<Job*>(p);
        try {
          (*j->fn)();
        } catch (...) {
          j->error = std::current_exception();
        }
        return nullptr;
      },
      &job);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    fn();  // no thread to be had: parse here, as libclang would with its own small stack
    return;
  }
  pthread_join(thread, nullptr);
  if (job.error) std::rethrow_exception(job.error);
}

// Clang's arguments for a source that NVRTC gets with `args` (frontend_args). The preprocessor
// must take NVRTC's paths through every header: -nostdinc, as NVRTC searches no system folder (a
// `__has_include(<wchar.h>)` answers as it does there), and Clang's and GCC's identity macros
// undefined, as NVRTC defines none of them (headers such as CCCL's pick their configuration, and
// what they include, by the compiler they detect).
std::vector<std::string> clang_argv(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"-x", "cuda", "--cuda-device-only", "-nocudainc", "-nocudalib",
                                   "-nostdinc", "--cuda-gpu-arch=sm_80", "-fsyntax-only", "-w",
                                   "-ferror-limit=0"};
  for (const char* m : {"__clang__", "__clang_major__", "__clang_minor__", "__clang_patchlevel__",
                        "__clang_version__", "__llvm__", "__GNUC__", "__GNUC_MINOR__",
                        "__GNUC_PATCHLEVEL__", "__GNUG__", "__GXX_ABI_VERSION"})
    argv.push_back(std::string("-U") + m);
  argv.push_back("-D__EDG__=1");
  argv.push_back("-include");
  argv.push_back(kPreludePath);
  argv.insert(argv.end(), args.begin(), args.end());
  // Stand-ins for NVRTC's built-in headers, searched after every folder NVRTC searches.
  const std::vector<std::string> dirs = default_include_dirs();
  if (!dirs.empty()) {
    argv.push_back("-idirafter");
    argv.push_back(dirs.front() + "/cj/frontend");
  }
  return argv;
}

// One index for the process; parses through it take turns (parse_mutex). Excluding the
// precompiled preamble's declarations, visits see the source's own only.
CXIndex shared_index() {
  static const CXIndex index = libclang().clang_createIndex(/*excludeDeclarationsFromPCH=*/1, 0);
  return index;
}
std::mutex& parse_mutex() {
  static std::mutex m;
  return m;
}

// Deeply nested declarations (types thousands of templates deep) recurse in Clang's parser
// about as deep; NVRTC compiles such types, so the front end must read them too.
constexpr size_t kParseStack = size_t(256) << 20;

}  // namespace
}  // namespace detail

std::vector<ParsedKernel> parse_kernels(const std::string& source, const std::string& filename,
                                        const std::vector<std::string>& args,
                                        FrontendReads* reads) {
  using namespace detail;
  const auto& c = libclang();
  // An absolute name under a folder of the front end's own, so that the unsaved buffer cannot
  // be confused with a file of the same name; quoted includes are searched in the program's
  // folder through -iquote (frontend_args), as NVRTC searches them.
  const std::string main = std::string(kVirtualRoot) + "source/" + filename;
  std::vector<std::string> argv = clang_argv(args);
  refuse_special_includes(source, argv);
  // The same arguments with the pre-included headers replaced by their PCH.
  std::vector<std::string> with_pch;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "-include" && i + 1 < argv.size()) ++i;
    else with_pch.push_back(argv[i]);
  }
  constexpr unsigned kOptions = kParseIncomplete | kParseSkipFunctionBodies | kParseKeepGoing;
  ++g_parses;
  const CXIndex index = shared_index();
  std::lock_guard<std::mutex> lock(parse_mutex());
  Walk w;
  w.source = &source;
  FileList preamble_files, files;
  std::string missing;
  run_with_stack(kParseStack, [&] {
    CXTranslationUnit tu = nullptr;
    std::string kept_key;  // set when the unit may be kept for the next source of this name
    const std::string pch = preamble_pch(index, argv, preamble_files);
    if (!pch.empty()) {
      with_pch.push_back("-include-pch");
      with_pch.push_back(pch);
      kept_key = preamble_key(with_pch) + main;
      tu = take_kept_unit(kept_key);
      if (tu != nullptr && !reparse(tu, main, source)) {
        c.clang_disposeTranslationUnit(tu);
        tu = nullptr;
      }
      if (tu == nullptr) tu = parse(index, main, source, with_pch, kOptions);
      if (tu != nullptr && preamble_rejected(tu)) {
        c.clang_disposeTranslationUnit(tu);
        tu = nullptr;
        kept_key.clear();
        forget_preamble(argv);
      }
    }
    if (tu == nullptr) {
      kept_key.clear();
      preamble_files.clear();
      tu = parse(index, main, source, argv, kOptions);
    }
    if (tu == nullptr) {
      std::string line;
      for (const auto& a : argv) line += " " + a;
      TORCH_CHECK(false, "torch_cudajit: libclang (", c.path, ") could not parse '", filename,
                  "'; arguments:", line);
    }
    t_main_file = c.clang_getFile(tu, main.c_str());
    w.tu = tu;
    w.source_file = t_main_file;
    w.system_dirs = default_include_dirs();
    visit_children(c.clang_getTranslationUnitCursor(tu), w);
    files = inclusions(tu);
    missing = missing_header(tu);
    // A missing header leaves its types unresolved: the source's declarations are then not
    // judged (NVRTC may well find the header).
    if (missing.empty()) add_declaration_errors(tu, filename, w.out);
    if (!kept_key.empty())
      keep_unit(std::move(kept_key), tu, files);
    else
      c.clang_disposeTranslationUnit(tu);
  });
  if (reads != nullptr) {
    reads->files = std::move(preamble_files);
    reads->files.insert(reads->files.end(), files.begin(), files.end());
    reads->missing = std::move(missing);
  }
  return std::move(w.out);
}

namespace detail {

void with_translation_unit(const std::string& path, const std::string& text,
                           const std::vector<std::string>& args,
                           const std::vector<std::string>& extra,
                           const std::function<void(CXTranslationUnit)>& fn,
                           FrontendReads* reads) {
  std::vector<std::string> argv = clang_argv(args);
  argv.insert(argv.end(), extra.begin(), extra.end());
  refuse_special_includes(text, argv);
  constexpr unsigned kDetailedPreprocessingRecord = 0x01;
  const CXIndex index = shared_index();
  std::lock_guard<std::mutex> lock(parse_mutex());
  ++g_parses;
  run_with_stack(kParseStack, [&] {
    CXTranslationUnit tu =
        parse(index, path, text, argv, kParseIncomplete | kParseKeepGoing | kDetailedPreprocessingRecord);
    TORCH_CHECK(tu != nullptr, "torch_cudajit: libclang (", libclang().path,
                ") could not parse '", path, "'");
    struct Dispose {
      CXTranslationUnit tu;
      ~Dispose() { libclang().clang_disposeTranslationUnit(tu); }
    } dispose{tu};
    fn(tu);
    if (reads != nullptr) {
      reads->files = inclusions(tu);
      reads->missing = missing_header(tu);
    }
  });
}

}  // namespace detail
}  // namespace torch_cudajit
