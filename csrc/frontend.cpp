// torch_cudajit: the Clang front end (see frontend.h): one parse of a source through libclang
// (libclang.h), with the shared preamble precompiled once, and a walk of its __global__
// declarations.
#include "frontend.h"

#include "libclang.h"

#include <c10/util/Exception.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>

namespace torch_cudajit {
namespace detail {

namespace {

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
  const std::string& source;
  std::vector<std::string> scope;  // enclosing named namespaces
  bool extern_c = false;
  std::vector<ParsedKernel> out;
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
                  w.source.compare(k.begin, 8, "template") == 0;
  // With bodies skipped the extent ends at the declarator; a definition's body follows it.
  size_t end = main_offset(c.clang_getRangeEnd(extent));
  for (int depth = 0; end < w.source.size(); end = skip_blank(w.source, end + 1)) {
    const char ch = w.source[end];
    if (depth == 0 && (ch == '{' || ch == ';')) break;
    depth += ch == '(' ? 1 : ch == ')' ? -1 : 0;
  }
  k.is_definition = end < w.source.size() && w.source[end] == '{';
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
            if (end >= pp.begin && end <= ch.w->source.size())
              pp.source_text = ch.w->source.substr(pp.begin, end - pp.begin);
          }
          ch.k->params.push_back(std::move(pp));
        }
        return kVisitContinue;
      },
      &ch);
  if (k.is_template && k.template_params_end != std::string::npos) {
    const size_t close = skip_blank(w.source, k.template_params_end);
    if (close < w.source.size() && w.source[close] == '>') k.template_close = close;
  }
  w.out.push_back(std::move(k));
}

int visit(CXCursor cursor, CXCursor, CXClientData data) {
  const auto& c = libclang();
  Walk& w = *static_cast<Walk*>(data);
  // Declarations of the headers (and of the precompiled preamble) are not walked into.
  if (main_offset(c.clang_getCursorLocation(cursor)) == std::string::npos) return kVisitContinue;
  const int kind = c.clang_getCursorKind(cursor);
  if (kind == kCursorNamespace) {
    const std::string name = take(c.clang_getCursorSpelling(cursor));
    // Kernels of an unnamed namespace are named without it in the same source.
    if (!name.empty()) w.scope.push_back(name);
    visit_children(cursor, w);
    if (!name.empty()) w.scope.pop_back();
  } else if (kind == kCursorLinkageSpec || kind == kCursorUnexposedDecl) {
    const bool outer = w.extern_c;
    w.extern_c = kind == kCursorLinkageSpec || outer;
    visit_children(cursor, w);
    w.extern_c = outer;
  } else if ((kind == kCursorFunctionDecl || kind == kCursorFunctionTemplate) &&
             is_kernel(cursor)) {
    // An explicit specialization (`template <> __global__ void k<float>(...)`) is code for one
    // instantiation, not an entry point of its own.
    // Its declaration starts with `template <>` though it is no function template.
    if (kind == kCursorFunctionDecl) {
      const size_t b = main_offset(c.clang_getRangeStart(c.clang_getCursorExtent(cursor)));
      if (b != std::string::npos && w.source.compare(b, 8, "template") == 0) return kVisitContinue;
    }
    read_kernel(cursor, kind == kCursorFunctionTemplate, w);
  }
  return kVisitContinue;
}

// What nvcc's and NVRTC's CUDA mode gives every source before its first line, for Clang's
// CUDA mode without CUDA's runtime wrapper headers: the execution-space keywords as the
// attributes Clang knows, NVRTC's predefined macros and types, and CUDA's vector types.
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
#if __has_include(<vector_types.h>)
#include <vector_types.h>
#endif
)";
constexpr const char* kPreludePath = "/torch_cudajit/frontend_prelude.h";

}  // namespace
}  // namespace detail

uint64_t frontend_parse_count() { return detail::g_parses.load(); }

namespace detail {
namespace {

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

// Translation units kept after a parse, by arguments and file name, to parse the next source of
// that name into: a reparse skips the driver and the set-up of a compiler, which are a fixed
// part of every parse. Only used under parse_kernels' lock.
struct KeptUnit {
  std::string key;
  CXTranslationUnit tu;
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
      units.erase(it);
      return tu;
    }
  return nullptr;
}

void keep_unit(std::string key, CXTranslationUnit tu) {
  auto& units = kept_units();
  if (units.size() >= kKeptUnits) {
    libclang().clang_disposeTranslationUnit(units.front().tu);
    units.erase(units.begin());
  }
  units.push_back({std::move(key), tu});
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
// header: each source then parses only its own text.
struct Preambles {
  std::mutex mutex;
  std::map<std::string, int> fds;  // arguments -> descriptor of their PCH (-1 when it failed)
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

// Saves a PCH and keeps it only as an open descriptor, read as /proc/self/fd/N: nothing is left
// on disk however the process ends (a crash, os._exit in a worker), and forked children
// inherit it. -1 when it cannot be saved.
int save_preamble(CXTranslationUnit tu) {
  const char* tmp = std::getenv("TMPDIR");
  std::string folder = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                       "/torch_cudajit_frontend.XXXXXX";
  if (mkdtemp(folder.data()) == nullptr) return -1;
  const std::string file = folder + "/preamble.pch";
  int fd = -1;
  if (libclang().clang_saveTranslationUnit(tu, file.c_str(), 0) == 0)
    fd = open(file.c_str(), O_RDONLY);
  unlink(file.c_str());
  rmdir(folder.c_str());
  return fd;
}

// The PCH of the `-include` arguments in `argv` under the other arguments, made on first use;
// "" when it cannot be made (the caller then parses everything each time).
std::string preamble_pch(CXIndex index, const std::vector<std::string>& argv) {
  Preambles& p = preambles();
  const std::string key = preamble_key(argv);
  std::lock_guard<std::mutex> lock(p.mutex);
  auto it = p.fds.find(key);
  if (it == p.fds.end()) {
    int fd = -1;
    CXTranslationUnit tu =
        parse(index, "/torch_cudajit/preamble.cu", "", argv,
              kParseIncomplete | kParseForSerialization | kParseSkipFunctionBodies);
    if (tu != nullptr) {
      // Refused when the preamble has errors: then every source is parsed whole.
      fd = save_preamble(tu);
      libclang().clang_disposeTranslationUnit(tu);
    }
    it = p.fds.emplace(key, fd).first;
  }
  return it->second < 0 ? "" : "/proc/self/fd/" + std::to_string(it->second);
}

// Drops a PCH that Clang refused to load; its arguments are parsed whole from now on.
void forget_preamble(const std::vector<std::string>& argv) {
  Preambles& p = preambles();
  std::lock_guard<std::mutex> lock(p.mutex);
  int& fd = p.fds[preamble_key(argv)];
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace
}  // namespace detail

std::vector<ParsedKernel> parse_kernels(const std::string& source, const std::string& filename,
                                        const std::vector<std::string>& args) {
  using namespace detail;
  const auto& c = libclang();
  // An absolute name, so that the unsaved buffer cannot be confused with a file of the same
  // name in the working directory.
  const std::string main = "/torch_cudajit/source/" + filename;
  std::vector<std::string> argv = {"-x", "cuda", "--cuda-device-only", "-nocudainc", "-nocudalib",
                                   "--cuda-gpu-arch=sm_80", "-fsyntax-only", "-w",
                                   "-ferror-limit=0", "-include", kPreludePath};
  argv.insert(argv.end(), args.begin(), args.end());
  // The same arguments with the pre-included headers replaced by their PCH.
  std::vector<std::string> with_pch;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "-include" && i + 1 < argv.size()) ++i;
    else with_pch.push_back(argv[i]);
  }
  constexpr unsigned kOptions = kParseIncomplete | kParseSkipFunctionBodies | kParseKeepGoing;
  ++g_parses;
  // One index for the process; parses through it take turns.
  // Excluding the precompiled preamble's declarations, visits see the source's own only.
  static const CXIndex index = c.clang_createIndex(/*excludeDeclarationsFromPCH=*/1, 0);
  static std::mutex parse_mutex;
  std::lock_guard<std::mutex> lock(parse_mutex);
  CXTranslationUnit tu = nullptr;
  std::string kept_key;  // set when the unit may be kept for the next source of this name
  const std::string pch = preamble_pch(index, argv);
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
    tu = parse(index, main, source, argv, kOptions);
  }
  if (tu == nullptr) {
    std::string line;
    for (const auto& a : argv) line += " " + a;
    TORCH_CHECK(false, "torch_cudajit: libclang (", c.path, ") could not parse '", filename,
                "'; arguments:", line);
  }
  Walk w{source, {}, false, {}};
  t_main_file = c.clang_getFile(tu, main.c_str());
  visit_children(c.clang_getTranslationUnitCursor(tu), w);
  if (!kept_key.empty() && tu != nullptr)
    keep_unit(std::move(kept_key), tu);
  else
    c.clang_disposeTranslationUnit(tu);
  return std::move(w.out);
}

}  // namespace torch_cudajit
