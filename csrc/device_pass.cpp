// torch_cudajit: the device pass of a whole CUDA file (see device_pass.h). One Clang parse of the
// file with NVRTC's folders and macros decides everything: which declarations are host code,
// which do not compile in device code, which headers could not be found, and which headers
// declare host functions. The output is the file's own text with edits: host code blanked
// (newlines kept), `__host__ __device__` written before constexpr functions, and the user's
// headers written in at their first include behind #line directives.
#include "device_pass.h"

#include "cache.h"
#include "dependencies.h"
#include "excerpt.h"
#include "file_io.h"
#include "frontend.h"
#include "libclang.h"
#include "reading.h"
#include "sha256.h"
#include "tokens.h"

#include <c10/util/Exception.h>

#include <climits>
#include <cstdlib>
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>

namespace torch_cudajit {
namespace detail {
namespace {

// An edit of one file's text: [begin, end) blanked, or replaced by `text`, or (include) the
// directive line replaced by the header `include` written in.
struct Edit {
  size_t begin = 0, end = 0;
  enum Kind { kBlank, kInsert, kInclude } kind = kBlank;
  std::string text;     // kInsert
  std::string include;  // kInclude: the header's path
  unsigned line = 0;    // kInclude: the directive's line
};

struct FileState {
  std::string text;
  bool user = false;
  bool declares_host = false;  // a header that declares a host function (NVRTC refuses those)
  std::vector<Edit> edits;
  std::vector<std::pair<size_t, std::string>> errors;  // Clang's errors: offset and text
};

// A system include of a user file, by the file and line of its directive.
struct Directive {
  std::string file;
  unsigned line = 0;
  size_t begin = 0, end = 0;
  std::string spelling;
  std::string header;  // the file it includes
};

// Attributes of a declaration that say where its code runs.
enum Attr : unsigned {
  kDevice = 1, kGlobal = 2, kConstant = 4, kShared = 8
};

unsigned attrs_of(CXCursor cursor) {
  unsigned out = 0;
  libclang().clang_visitChildren(
      cursor,
      [](CXCursor c, CXCursor, CXClientData d) {
        unsigned& bits = *static_cast<unsigned*>(d);
        switch (libclang().clang_getCursorKind(c)) {
          case kCursorCudaDeviceAttr: bits |= kDevice; break;
          case kCursorCudaGlobalAttr: bits |= kGlobal; break;
          case kCursorCudaConstantAttr: bits |= kConstant; break;
          case kCursorCudaSharedAttr: bits |= kShared; break;
          default: break;
        }
        return kVisitContinue;
      },
      &out);
  return out;
}

bool is_function(int kind) {
  return kind == kCursorFunctionDecl || kind == kCursorCXXMethod || kind == kCursorConstructor ||
         kind == kCursorDestructor || kind == kCursorConversionFunction ||
         kind == kCursorFunctionTemplate;
}

// Offset of the whole word `word` in text[begin, end), npos if absent.
size_t find_word(const std::string& text, const std::string& word, size_t begin, size_t end) {
  for (size_t p = text.find(word, begin); p != std::string::npos && p + word.size() <= end;
       p = text.find(word, p + 1)) {
    const bool left = p == 0 || !is_ident_char(text[p - 1]);
    const bool right = p + word.size() >= text.size() || !is_ident_char(text[p + word.size()]);
    if (left && right) return p;
  }
  return std::string::npos;
}

// A function NVRTC takes without an execution space: a defaulted or deleted one (defaulted
// special members are implicitly __host__ __device__), or a deduction guide. `after` is the
// text after its extent, which ends before `= delete` or `= default`.
bool needs_no_space(CXCursor cursor, const std::string& text, size_t after) {
  constexpr int kNotAvailable = 2;  // CXAvailability_NotAvailable: a deleted function
  const auto& c = libclang();
  if (c.clang_CXXMethod_isDefaulted(cursor) != 0 ||
      c.clang_getCursorAvailability(cursor) == kNotAvailable)
    return true;
  if (take(c.clang_getCursorSpelling(cursor)).rfind("<deduction guide", 0) == 0) return true;
  size_t p = after;
  while (p < text.size() && std::isspace(static_cast<unsigned char>(text[p]))) ++p;
  if (p >= text.size() || text[p] != '=') return false;
  ++p;
  while (p < text.size() && std::isspace(static_cast<unsigned char>(text[p]))) ++p;
  return find_word(text, "delete", p, p + 6) == p || find_word(text, "default", p, p + 7) == p;
}

bool is_class(int kind) {
  return kind == kCursorStructDecl || kind == kCursorUnionDecl || kind == kCursorClassDecl ||
         kind == kCursorClassTemplate || kind == kCursorClassTemplatePartialSpecialization;
}



// Blanks text[begin, end): every character but newlines becomes a space.
void blank(std::string& text, size_t begin, size_t end) {
  for (size_t i = begin; i < end && i < text.size(); ++i)
    if (text[i] != '\n') text[i] = ' ';
}

std::string quoted(const std::string& path) {
  std::string out = "\"";
  for (char c : path) {
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out + "\"";
}

class Pass {
 public:
  Pass(CXTranslationUnit tu, std::string main, std::string main_text,
       std::vector<std::string> system_dirs)
      : tu_(tu), main_(std::move(main)), system_dirs_(std::move(system_dirs)) {
    FileState& f = files_[main_];
    f.text = std::move(main_text);
    f.user = true;
  }

  DeviceSource run() {
    const auto& c = libclang();
    collect_errors();
    c.clang_visitChildren(
        c.clang_getTranslationUnitCursor(tu_),
        [](CXCursor cursor, CXCursor, CXClientData d) {
          static_cast<Pass*>(d)->top_level(cursor);
          return kVisitContinue;
        },
        this);
    decide_system_includes();
    DeviceSource out;
    out.path = main_;
    std::set<std::string> written;
    out.text = render(main_, written, out.files);
    out.notes = std::move(notes_);
    return out;
  }

 private:
  // Where a location lies: its file's state (created on first sight), the offset and the line;
  // nullptr when it lies in no file (a built-in).
  FileState* where(CXSourceLocation loc, size_t* offset = nullptr, unsigned* line = nullptr,
                   std::string* path_out = nullptr) {
    CXFile file = nullptr;
    unsigned l = 0, col = 0, off = 0;
    libclang().clang_getFileLocation(loc, &file, &l, &col, &off);
    if (file == nullptr) return nullptr;
    const std::string path = path_of(file);
    if (path.empty()) return nullptr;
    if (offset != nullptr) *offset = off;
    if (line != nullptr) *line = l;
    if (path_out != nullptr) *path_out = path;
    return &state(path, file);
  }

  std::string path_of(CXFile file) {
    auto it = paths_.find(file);
    if (it != paths_.end()) return it->second;
    std::string path = take(libclang().clang_getFileName(file));
    return paths_[file] = path;
  }

  FileState& state(const std::string& path, CXFile file) {
    auto it = files_.find(path);
    if (it != files_.end()) return it->second;
    FileState& f = files_[path];
    f.user = is_user_header(path, system_dirs_);
    if (file != nullptr) unit_file_text(tu_, file, path, f.text);
    return f;
  }

  bool is_frontend_stand_in(const std::string& path) const {
    return !system_dirs_.empty() && path.rfind(system_dirs_.front() + "/cj/frontend/", 0) == 0;
  }

  void collect_errors() {
    const auto& c = libclang();
    for (unsigned i = 0, n = c.clang_getNumDiagnostics(tu_); i < n; ++i) {
      void* d = c.clang_getDiagnostic(tu_, i);
      if (c.clang_getDiagnosticSeverity(d) >= kDiagnosticError) {
        size_t off = 0;
        if (FileState* f = where(c.clang_getDiagnosticLocation(d), &off))
          f->errors.emplace_back(off, take(c.clang_getDiagnosticSpelling(d)));
      }
      c.clang_disposeDiagnostic(d);
    }
  }

  // The first of Clang's errors in [begin, end) of `f` that no edit leaves out; nullptr if none.
  // Only errors of a missing declaration count: what a header that is not found, or that was
  // left out, would have declared. Others may be the front end's alone (an incomplete type where
  // NVRTC declares the type itself, as torch's wheels' headers do): NVRTC judges those.
  const std::string* error_in(const FileState& f, size_t begin, size_t end) const {
    for (const auto& [off, text] : f.errors) {
      if (off < begin || off >= end) continue;
      bool missing = false;
      for (const char* kind : {"unknown type name", "undeclared identifier", "no template named",
                               "no type named", "no member named", "unknown template name"})
        missing = missing || text.find(kind) != std::string::npos;
      if (!missing) continue;
      bool covered = false;
      for (const Edit& e : f.edits)
        covered = covered || (e.kind == Edit::kBlank && off >= e.begin && off < e.end);
      if (!covered) return &text;
    }
    return nullptr;
  }

  // The extent of a cursor within one file; false when it spans files or lies in none.
  bool extent(CXCursor cursor, FileState*& f, size_t& begin, size_t& end, unsigned* line = nullptr,
              std::string* path = nullptr) {
    const auto& c = libclang();
    const CXSourceRange r = c.clang_getCursorExtent(cursor);
    std::string p1, p2;
    f = where(c.clang_getRangeStart(r), &begin, line, &p1);
    FileState* f2 = where(c.clang_getRangeEnd(r), &end, nullptr, &p2);
    if (f == nullptr || f2 != f || end < begin || end > f->text.size()) return false;
    if (path != nullptr) *path = p1;
    return true;
  }

  // A note about a line of `path`; a line of the main file is named as its #line directives
  // name it (the second pass reads a text with the user's headers written in).
  void note(const std::string& path, unsigned line, const std::string& what) {
    std::string file = path;
    size_t presumed = line;
    if (path == main_) {
      const auto lines = presumed_lines(files_[main_].text, main_);
      if (line >= 1 && line <= lines.size()) std::tie(file, presumed) = lines[line - 1];
    }
    notes_.push_back(file + ":" + std::to_string(presumed) + ": " + what);
  }

  void top_level(CXCursor cursor) {
    const auto& c = libclang();
    const int kind = c.clang_getCursorKind(cursor);
    FileState* f = nullptr;
    size_t begin = 0, end = 0;
    unsigned line = 0;
    std::string path;
    if (!extent(cursor, f, begin, end, &line, &path)) return;
    if (!f->user) {
      scan_system(cursor, *f, begin, end);
      return;
    }
    if (kind == kCursorInclusionDirective) {
      include_directive(cursor, *f, path, begin, end, line);
      return;
    }
    declaration(cursor, *f, path, begin, end, line);
  }

  // A declaration of a user file at namespace scope.
  void declaration(CXCursor cursor, FileState& f, const std::string& path, size_t begin,
                   size_t end, unsigned line) {
    const auto& c = libclang();
    const int kind = c.clang_getCursorKind(cursor);
    if (kind == kCursorNamespace || kind == kCursorLinkageSpec || kind == kCursorUnexposedDecl) {
      c.clang_visitChildren(
          cursor,
          [](CXCursor child, CXCursor, CXClientData d) {
            static_cast<Pass*>(d)->top_level(child);
            return kVisitContinue;
          },
          this);
      return;
    }
    if (is_function(kind)) {
      function(cursor, f, begin, end);
    } else if (kind == kCursorVarDecl) {
      variable(cursor, f, begin, end);
    } else if (is_class(kind)) {
      klass(cursor, f, path, begin, end, line);
    } else if (kind >= 1 && kind <= 39) {  // other declarations: typedefs, enums, usings, ...
      if (const std::string* e = error_in(f, begin, end)) {
        f.edits.push_back({begin, end});
        note(path, line, "left out a declaration that does not compile in device code (" + *e +
                             ")");
      }
    } else if (kind == 602 /* static_assert */) {
      if (error_in(f, begin, end) != nullptr) f.edits.push_back({begin, end});
    }
  }

  // Kernels and device functions stay; constexpr host functions become __host__ __device__;
  // every other host function is left out (NVRTC compiles none).
  void function(CXCursor cursor, FileState& f, size_t begin, size_t end) {
    if ((attrs_of(cursor) & (kDevice | kGlobal)) ||
        needs_no_space(cursor, f.text, end))
      return;
    size_t name = std::string::npos;
    where(libclang().clang_getCursorLocation(cursor), &name);
    if (name >= begin && name <= end && error_in(f, begin, end) == nullptr) {
      const size_t at = find_word(f.text, "constexpr", begin, name);
      if (at != std::string::npos) {
        Edit e;
        e.begin = e.end = at;
        e.kind = Edit::kInsert;
        e.text = "__host__ __device__ ";
        f.edits.push_back(std::move(e));
        return;
      }
    }
    f.edits.push_back({begin, end});
  }

  // Variables of the device stay; host variables only when constant (device code may read
  // those) and compiling in device code.
  void variable(CXCursor cursor, FileState& f, size_t begin, size_t end) {
    const auto& c = libclang();
    const unsigned a = attrs_of(cursor);
    if (a & (kDevice | kConstant | kShared)) return;
    // __managed__ has no attribute cursor of its own: its spelling tells.
    if (find_word(f.text, "__managed__", begin, end) != std::string::npos) return;
    CXType t = c.clang_getCursorType(cursor);
    while (t.kind == kTypeConstantArray || t.kind == kTypeIncompleteArray)
      t = c.clang_getArrayElementType(t);
    const bool constant = c.clang_isConstQualifiedType(t) != 0 ||
                          find_word(f.text, "constexpr", begin, end) != std::string::npos;
    if (constant && error_in(f, begin, end) == nullptr) return;
    f.edits.push_back({begin, statement_end(f.text, end)});
  }

  // The end of the declaration statement at `pos`: one past its ';' at bracket depth 0 (an
  // extent may stop early: at a macro such as NULL, or at an initializer Clang could not read).
  static size_t statement_end(const std::string& text, size_t pos) {
    int depth = 0;
    for (size_t p = pos; p < text.size(); ++p) {
      const char ch = text[p];
      if (ch == '(' || ch == '[' || ch == '{') ++depth;
      else if (ch == ')' || ch == ']' || ch == '}') {
        if (--depth < 0) return pos;
      } else if (ch == ';' && depth == 0) {
        return p + 1;
      } else if (ch == '"' || ch == '\'') {
        for (++p; p < text.size() && text[p] != ch; ++p)
          if (text[p] == '\\') ++p;
      } else if (ch == '#') {
        return pos;  // a directive: the statement ended before it
      }
    }
    return pos;
  }

  // A class keeps its data and device members; its host member functions are left out. A class
  // that still does not compile in device code is left out whole.
  void klass(CXCursor cursor, FileState& f, const std::string& path, size_t begin, size_t end,
             unsigned line) {
    const auto& c = libclang();
    if (!c.clang_isCursorDefinition(cursor)) return;
    const size_t mark = f.edits.size();
    members(cursor, f);
    if (const std::string* e = error_in(f, begin, end)) {
      f.edits.resize(mark);
      // With the `typedef` before it and the declarators after it (`typedef struct {...} T;`).
      size_t b = begin;
      while (b > 0 && std::isspace(static_cast<unsigned char>(f.text[b - 1]))) --b;
      if (b >= 7 && f.text.compare(b - 7, 7, "typedef") == 0 &&
          (b == 7 || !is_ident_char(f.text[b - 8])))
        begin = b - 7;
      f.edits.push_back({begin, statement_end(f.text, end)});
      note(path, line,
           "left out '" + take(c.clang_getCursorSpelling(cursor)) +
               "', which does not compile in device code (" + *e + ")");
    }
  }

  void members(CXCursor cursor, FileState& f) {
    libclang().clang_visitChildren(
        cursor,
        [](CXCursor child, CXCursor, CXClientData d) {
          auto* self = static_cast<Pass*>(d);
          const auto& c = libclang();
          const int kind = c.clang_getCursorKind(child);
          FileState* cf = nullptr;
          size_t b = 0, e = 0;
          unsigned line = 0;
          std::string path;
          if (!self->extent(child, cf, b, e, &line, &path) || !cf->user) return kVisitContinue;
          if (is_function(kind)) {
            self->function(child, *cf, b, e);
          } else if (kind == kCursorFriendDecl) {
            // A friend function of the host (operator<< for a stream) leaves with its friend
            // declaration.
            struct Friend {
              bool host = false;
            } fr;
            c.clang_visitChildren(
                child,
                [](CXCursor g, CXCursor, CXClientData d) {
                  if (is_function(libclang().clang_getCursorKind(g)) &&
                      !(attrs_of(g) & (kDevice | kGlobal)))
                    static_cast<Friend*>(d)->host = true;
                  return kVisitContinue;
                },
                &fr);
            if (fr.host) cf->edits.push_back({b, e});
          } else if (is_class(kind)) {
            self->members(child, *cf);
          }
          return kVisitContinue;
        },
        this);
  }

  void include_directive(CXCursor cursor, FileState& f, const std::string& path, size_t begin,
                         size_t end, unsigned line) {
    const auto& c = libclang();
    // The whole line: the directive's extent may start after its '#'.
    begin = f.text.rfind('\n', begin == 0 ? 0 : begin - 1);
    begin = begin == std::string::npos ? 0 : begin + 1;
    end = std::min(f.text.find('\n', end), f.text.size());
    const std::string spelling = f.text.substr(begin, end - begin);
    CXFile included = c.clang_getIncludedFile(cursor);
    if (included == nullptr) {
      f.edits.push_back({begin, end});
      note(path, line, "left out '" + trim(spelling) +
                           "': the header is not found in NVRTC's folders (when only host code "
                           "uses it, nothing is lost)");
      return;
    }
    const std::string header = path_of(included);
    FileState& h = state(header, included);
    if (h.user) {
      Edit e;
      e.begin = begin;
      e.end = end;
      e.kind = Edit::kInclude;
      e.include = header;
      e.line = line;
      f.edits.push_back(std::move(e));
      return;
    }
    Directive d;
    d.file = path;
    d.line = line;
    d.begin = begin;
    d.end = end;
    d.spelling = trim(spelling);
    d.header = header;
    directives_.push_back(std::move(d));
  }

  static std::string trim(const std::string& s) {
    size_t b = 0, e = s.size();
    while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
    return s.substr(b, e - b);
  }

  // Declarations of a system header: does it declare a host function?
  void scan_system(CXCursor cursor, FileState& f, size_t begin, size_t end) {
    if (f.declares_host) return;
    const int kind = libclang().clang_getCursorKind(cursor);
    if (kind == kCursorNamespace || kind == kCursorLinkageSpec || kind == kCursorUnexposedDecl ||
        is_class(kind)) {
      libclang().clang_visitChildren(
          cursor,
          [](CXCursor child, CXCursor, CXClientData d) {
            auto* self = static_cast<Pass*>(d);
            FileState* cf = nullptr;
            size_t b = 0, e = 0;
            if (self->extent(child, cf, b, e) && !cf->user) self->scan_system(child, *cf, b, e);
            return kVisitContinue;
          },
          this);
    } else if (is_function(kind) && !(attrs_of(cursor) & (kDevice | kGlobal)) &&
               !needs_no_space(cursor, f.text, end)) {
      f.declares_host = true;
    }
  }

  // A system include stays unless its header, or one it includes, declares a host function: a
  // host library's API (cuBLAS, NCCL), which device code cannot use. Includes are followed
  // through the inclusion graph, so a header that another directive included first is judged
  // by all it brings.
  void decide_system_includes() {
    struct Visit {
      Pass* self;
      std::map<std::string, std::set<std::string>> children;
    } v{this, {}};
    libclang().clang_getInclusions(
        tu_,
        [](CXFile file, CXSourceLocation* stack, unsigned n, CXClientData data) {
          auto& v = *static_cast<Visit*>(data);
          if (n == 0) return;
          CXFile at = nullptr;
          unsigned line = 0, col = 0, off = 0;
          libclang().clang_getFileLocation(stack[0], &at, &line, &col, &off);
          if (at != nullptr) v.children[v.self->path_of(at)].insert(v.self->path_of(file));
        },
        &v);
    std::map<std::string, std::string> memo;  // header -> a host-declaring file under it, or ""
    std::function<std::string(const std::string&)> host_under = [&](const std::string& p) {
      auto it = memo.find(p);
      if (it != memo.end()) return it->second;
      memo[p] = "";  // cycles end here
      auto f = files_.find(p);
      std::string found = f != files_.end() && f->second.declares_host ? p : "";
      // The front end's stand-ins for NVRTC's built-in headers are not what NVRTC reads.
      if (is_frontend_stand_in(p)) return memo[p] = "";
      for (const std::string& child : v.children[p]) {
        if (!found.empty()) break;
        found = host_under(child);
      }
      return memo[p] = found;
    };
    for (Directive& d : directives_) {
      const std::string host = host_under(d.header);
      if (host.empty()) continue;
      files_[d.file].edits.push_back({d.begin, d.end});
      dropped_found_ = true;
      note(d.file, d.line, "left out '" + d.spelling + "': " + host +
                               " declares host functions (device code cannot call them)");
    }
  }

  // A file's text with its edits, its user headers written in at their first include.
  std::string render(const std::string& path, std::set<std::string>& written,
                     std::vector<std::string>& order) {
    written.insert(path);
    order.push_back(path);
    const FileState& f = files_[path];
    const std::string& text = f.text;  // the map's elements stay put while headers render
    std::vector<Edit> edits = f.edits;
    // A header written into the source must not say `#pragma once` there.
    if (path != main_) {
      for (size_t pos = 0; pos < text.size();) {
        size_t eol = std::min(text.find('\n', pos), text.size());
        size_t p = pos;
        while (p < eol && (text[p] == ' ' || text[p] == '\t')) ++p;
        if (p < eol && text[p] == '#') {
          size_t q = p + 1;
          while (q < eol && (text[q] == ' ' || text[q] == '\t')) ++q;
          if (text.compare(q, 6, "pragma") == 0 && find_word(text, "once", q + 6, eol) != std::string::npos)
            edits.push_back({pos, eol});
        }
        pos = eol + 1;
      }
    }
    std::stable_sort(edits.begin(), edits.end(),
                     [](const Edit& a, const Edit& b) { return a.begin < b.begin; });
    std::string out;
    // Text [b, e) blanked onto the output.
    auto append_blank = [&](size_t b, size_t e) {
      const size_t at = out.size();
      out.append(text, b, e - b);
      blank(out, at, out.size());
    };
    size_t pos = 0;
    for (const Edit& e : edits) {
      if (e.begin < pos) {  // inside an edit already made: a larger blank covers it
        if (e.kind == Edit::kBlank && e.end > pos) {
          append_blank(pos, e.end);
          pos = e.end;
        }
        continue;
      }
      out.append(text, pos, e.begin - pos);
      if (e.kind == Edit::kBlank || (e.kind == Edit::kInclude && written.count(e.include))) {
        append_blank(e.begin, e.end);
      } else if (e.kind == Edit::kInsert) {
        out += e.text;
      } else {
        out += "#line 1 " + quoted(e.include) + "\n";
        out += render(e.include, written, order);
        out += "\n#line " + std::to_string(e.line + 1) + " " + quoted(path);
      }
      pos = std::max(pos, e.end);
    }
    out.append(text, pos, std::string::npos);
    return out;
  }

  CXTranslationUnit tu_;
  std::string main_;
  std::vector<std::string> system_dirs_;
  std::map<std::string, FileState> files_;
  std::map<CXFile, std::string> paths_;
  std::vector<Directive> directives_;
  std::vector<std::string> notes_;

 public:
  /// A header that was found was left out: declarations that use its types no longer compile.
  bool dropped_found_ = false;
};

std::string absolute(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) != nullptr) return buf;
  return path;
}

}  // namespace
}  // namespace detail

namespace detail {
namespace {

constexpr const char* kDeviceRecordTag = "torch_cudajit device source 1";

// The disk cache key of a file's device side before its headers are known: the file (its text
// and name) as the front end reads it, and the libclang that reads it.
std::string device_source_key(const std::string& text, const std::string& path,
                              const std::vector<std::string>& args) {
  Sha256 h;
  h.field(kDeviceRecordTag).field(source_key(text, path, args)).field(libclang_identity());
  return h.hex_digest();
}

std::string encode_device_record(const std::string& key, const DeviceSource& d) {
  std::string payload;
  put_str(payload, d.text);
  put_str(payload, d.path);
  put_u64(payload, d.files.size());
  for (const auto& f : d.files) put_str(payload, f);
  put_u64(payload, d.notes.size());
  for (const auto& n : d.notes) put_str(payload, n);
  std::string out;
  put_str(out, kDeviceRecordTag);
  put_str(out, key);
  put_str(out, sha256_hex(payload));
  put_str(out, payload);
  return out;
}

// The device side a record holds; nothing when it is damaged or belongs to another key.
std::optional<DeviceSource> decode_device_record(const std::string& key, const std::string& bytes) {
  ByteReader r{bytes};
  const std::string tag = r.str(), record_key = r.str(), digest = r.str(), payload = r.str();
  if (!r.ok || r.pos != bytes.size() || tag != kDeviceRecordTag || record_key != key ||
      sha256_hex(payload) != digest)
    return std::nullopt;
  ByteReader p{payload};
  DeviceSource d;
  d.text = p.str();
  d.path = p.str();
  for (uint64_t i = 0, n = p.count(); i < n && p.ok; ++i) d.files.push_back(p.str());
  for (uint64_t i = 0, n = p.count(); i < n && p.ok; ++i) d.notes.push_back(p.str());
  if (!p.ok || p.pos != payload.size()) return std::nullopt;
  return d;
}

// The device side of `text` (the file `main`), read by the front end: one pass, and a second
// when a header that was found was left out. `deps` receives the files read.
DeviceSource read_device_source(const std::string& main, const std::string& text,
                                const std::vector<std::string>& args, Dependencies& deps) {
  const std::vector<std::string> system_dirs = default_include_dirs();
  // Clang's own constexpr functions are then host-only, as NVRTC and nvcc see them.
  const std::vector<std::string> extra = {"-fno-cuda-host-device-constexpr"};
  DeviceSource out;
  bool again = false;
  FrontendReads reads;
  with_translation_unit(main, text, args, extra, [&](CXTranslationUnit tu) {
    Pass pass(tu, main, text, system_dirs);
    out = pass.run();
    again = pass.dropped_found_;
  }, &reads);
  // A header left out although found (a host library's) may have declared types that kept
  // declarations use: a second pass over the result leaves out what no longer compiles.
  if (again) {
    with_translation_unit(main, out.text, args, extra, [&](CXTranslationUnit tu) {
      DeviceSource second = Pass(tu, main, out.text, system_dirs).run();
      out.text = std::move(second.text);
      out.notes.insert(out.notes.end(), second.notes.begin(), second.notes.end());
    });
  }
  const std::string toolkit = toolkit_include_dir();
  deps = dependencies_of(reads.files, toolkit);
  // Headers that were not found are left out: creating one where it is looked for changes
  // the result, and so does any file added to those folders.
  add_search_folders(deps, args, toolkit);
  return out;
}

}  // namespace
}  // namespace detail

DeviceSource device_source(const std::string& path, const std::vector<std::string>& options,
                           const std::string& std, int arch,
                           const std::optional<std::string>& given, bool use_cache) {
  const std::string main = given ? path : detail::absolute(path);
  std::string text;
  if (given) text = *given;
  else
    TORCH_CHECK_VALUE(detail::read_file(main, text), "torch_cudajit: cannot read the CUDA file '",
                      path, "' (", detail::errno_text(),
                      "); pass the path of an existing .cu file.");
  const std::vector<std::string> args = frontend_args(options, std, arch, main);
  DiskCache& cache = DiskCache::instance();
  Dependencies deps;
  if (!use_cache || !cache.usable()) return detail::read_device_source(main, text, args, deps);
  // As a source's reflection (reading.h): a manifest of the file lists seen under the file's
  // key, and a record per list; a list whose files all hold their digests gives the record,
  // and nothing is parsed.
  const std::string key = detail::device_source_key(text, main, args);
  const std::string toolkit = toolkit_include_dir();
  std::vector<std::vector<FileDigest>> entries;
  if (std::optional<std::string> bytes = cache.load_manifest(key))
    if (auto decoded = decode_manifest(key, *bytes)) entries = std::move(*decoded);
  for (const std::vector<FileDigest>& files : entries) {
    if (!files_unchanged(files, toolkit)) continue;
    Dependencies seen;
    seen.files = files;
    const std::string rkey = reflection_key(key, seen);
    if (std::optional<std::string> record = cache.load_reflection(rkey)) {
      if (auto d = detail::decode_device_record(rkey, *record)) return std::move(*d);
      cache.reject_reflection(rkey, "the device source record is damaged or of another file");
    }
    break;
  }
  DeviceSource out = detail::read_device_source(main, text, args, deps);
  if (!deps.exact()) return out;
  const std::string rkey = reflection_key(key, deps);
  cache.store_reflection(rkey, detail::encode_device_record(rkey, out));
  entries.erase(std::remove(entries.begin(), entries.end(), deps.files), entries.end());
  entries.insert(entries.begin(), deps.files);
  if (entries.size() > kManifestEntries) entries.resize(kManifestEntries);
  cache.store_manifest(key, encode_manifest(key, entries));
  return out;
}

}  // namespace torch_cudajit
