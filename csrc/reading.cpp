// torch_cudajit: a source as the front end reads it, through the disk cache (see reading.h).
#include "reading.h"

#include "cache.h"
#include "cuda_api.h"
#include "file_io.h"
#include "frontend.h"
#include "headers.h"
#include "log.h"
#include "serialize.h"
#include "sha256.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>

namespace torch_cudajit {
namespace {

using detail::ByteReader;
using detail::put_str;

// Salts source keys; bump it when what a reflection or a manifest record holds changes meaning.
constexpr uint32_t kSourceKeyVersion = 2;
constexpr const char* kRecordTag = "torch_cudajit reflection record 1";

// The folders whose contents can change what a source compiles to beyond the files it read:
// where the program's own headers are looked for (its folder, the user's include folders).
// A header that does not exist is not among the files read, yet `__has_include` of it turns
// true once it is created there; a folder's modification time changes when that happens.
std::vector<std::string> search_folders(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  bool user = false;  // the user's -I folders follow the pre-included cj/cj.cuh
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-iquote" && i + 1 < args.size()) out.push_back(args[++i]);
    else if (args[i] == "-include" && i + 1 < args.size() && args[++i] == "cj/cj.cuh") user = true;
    else if (user && args[i].compare(0, 2, "-I") == 0) out.push_back(args[i].substr(2));
  }
  return out;
}

}  // namespace

void add_search_folders(Dependencies& deps, const std::vector<std::string>& args,
                        const std::string& toolkit) {
  for (const std::string& dir : search_folders(args))
    deps.files.push_back({dir, key_digest(dir, toolkit)});
  std::sort(deps.files.begin(), deps.files.end(),
            [](const FileDigest& a, const FileDigest& b) { return a.path < b.path; });
  deps.files.erase(std::unique(deps.files.begin(), deps.files.end()), deps.files.end());
}

namespace {

// Whether a source or one of the user's headers it read asks if a header exists. The plugin's
// and the toolkit's headers are pinned by their versions.
bool probes_headers(const std::string& source, const Dependencies& deps,
                    const std::string& toolkit) {
  if (source.find("__has_include") != std::string::npos) return true;
  const std::vector<std::string> dirs = default_include_dirs();
  const std::string package = dirs.empty() ? "" : dirs.front() + "/";
  for (const FileDigest& f : deps.files) {
    if ((!toolkit.empty() && f.path.rfind(toolkit + "/", 0) == 0) ||
        (!package.empty() && f.path.rfind(package, 0) == 0))
      continue;
    std::string text;
    if (detail::read_file(f.path, text) && text.find("__has_include") != std::string::npos)
      return true;
  }
  return false;
}

// One parse: the kernels, and the files it read.
SourceReading parse(const std::string& source, const std::string& filename,
                    const std::vector<std::string>& args, int arch, const std::string& toolkit) {
  FrontendReads reads;
  SourceReading out;
  out.arch = arch;
  out.kernels = reflect_kernels(source, args, filename, &reads);
  out.deps = dependencies_of(reads.files, toolkit);
  if (!reads.missing.empty())
    out.deps.inexact = "the front end could not find a header (" + reads.missing + ")";
  if (out.deps.exact() && probes_headers(source, out.deps, toolkit))
    add_search_folders(out.deps, args, toolkit);
  return out;
}

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

// What the reading layer keeps of a Program it made.
struct ProgramRecord {
  bool use_cache = true;
  // The files read under each set of front-end arguments the source was read or compiled with.
  std::mutex mutex;
  std::map<std::string, Dependencies> deps;
};

// The records of the live Programs read_program and load_program made, by address. Never
// destroyed: a Program may be released after static destructors ran (at the interpreter's exit).
struct ProgramRecords {
  std::mutex mutex;
  std::unordered_map<const Program*, ProgramRecord*> by_program;
};

ProgramRecords& program_records() {
  static ProgramRecords* records = new ProgramRecords();
  return *records;
}

// A Program and its record, in one allocation; the record is found by the Program's address
// from when it is made until just before its memory is released.
struct RecordedProgram {
  RecordedProgram(Program p, bool use_cache) : program(std::move(p)) {
    record.use_cache = use_cache;
    ProgramRecords& records = program_records();
    std::lock_guard<std::mutex> lock(records.mutex);
    records.by_program.emplace(&program, &record);
  }
  ~RecordedProgram() {
    ProgramRecords& records = program_records();
    std::lock_guard<std::mutex> lock(records.mutex);
    records.by_program.erase(&program);
  }
  RecordedProgram(const RecordedProgram&) = delete;
  RecordedProgram& operator=(const RecordedProgram&) = delete;

  Program program;
  ProgramRecord record;
};

// The record of `program`; null for a Program the reading layer did not make.
ProgramRecord* record_of(const Program& program) {
  ProgramRecords& records = program_records();
  std::lock_guard<std::mutex> lock(records.mutex);
  auto it = records.by_program.find(&program);
  return it == records.by_program.end() ? nullptr : it->second;
}

// The shared Program of a RecordedProgram.
std::shared_ptr<const Program> recorded(std::shared_ptr<RecordedProgram> holder) {
  const Program* program = &holder->program;
  return std::shared_ptr<const Program>(std::move(holder), program);
}

// The dependencies of `program` read anew for `options`; the declarations must be those the
// kernel was bound with.
Dependencies read_program_dependencies(const Program& program, const CompileOptions& options,
                                       bool use_cache) {
  std::vector<KernelDecl> kernels;
  Dependencies deps = read_dependencies(program.source(), program.filename(), options.extra,
                                        options.std, options.arch, use_cache, &kernels);
  if (deps.exact() || !kernels.empty()) {
    if (binding_signature(program.kernels()) != binding_signature(kernels)) {
      std::string which;
      for (const KernelDecl& k : program.kernels()) {
        const KernelDecl* other = nullptr;
        for (const KernelDecl& o : kernels)
          if (o.name == k.name) other = &o;
        if (other == nullptr || binding_signature({k}) != binding_signature({*other})) {
          which = k.name;
          break;
        }
      }
      TORCH_CHECK_VALUE(false, "torch_cudajit: '", program.filename(), "' declares ",
                        which.empty() ? "its kernels" : "kernel '" + which + "'",
                        " differently when compiled for sm_", options.arch, " than when it was "
                        "read for the kernel (its declarations, or the headers they use, changed: "
                        "an `#if __CUDA_ARCH__` around parameters, or a header edited since). "
                        "Declare the parameters the same for every architecture, or define the "
                        "kernel again (cj.jit) after editing its headers.");
    }
  }
  return deps;
}

}  // namespace

std::string source_key(const std::string& source, const std::string& filename,
                       const std::vector<std::string>& frontend_args) {
  Sha256 h;
  h.field("torch_cudajit source").field(std::to_string(kSourceKeyVersion));
  h.field("front end").field(frontend_identity());
  h.field("arguments").field(std::to_string(frontend_args.size()));
  for (const auto& a : frontend_args) h.field(a);
  h.field("source").field(filename).field(source);
  return h.hex_digest();
}

std::string reflection_key(const std::string& source_key, const Dependencies& deps) {
  Sha256 h;
  h.field("torch_cudajit reflection").field(source_key);
  deps.hash_into(h);
  return h.hex_digest();
}

std::string encode_reflection_record(const std::string& key, const std::string& digest,
                                     const std::vector<KernelDecl>& kernels) {
  std::string out;
  put_str(out, kRecordTag);
  put_str(out, key);
  put_str(out, digest);
  put_str(out, libclang_identity());
  const std::string serialized = serialize_kernels(kernels);
  put_str(out, sha256_hex(serialized));
  put_str(out, serialized);
  return out;
}

std::vector<KernelDecl> decode_reflection_record(const std::string& key, const std::string& digest,
                                                 const std::string& bytes,
                                                 std::string* libclang) {
  ByteReader r{bytes};
  const std::string tag = r.str(), record_key = r.str(), record_digest = r.str();
  const std::string record_libclang = r.str(), kernels_digest = r.str(), kernels = r.str();
  if (libclang != nullptr) *libclang = record_libclang;
  TORCH_CHECK_VALUE(r.ok && r.pos == bytes.size() && tag == kRecordTag,
                    "torch_cudajit: the reflection record is damaged or of another format");
  // The record's own fields are quoted as text: they are bytes from outside.
  TORCH_CHECK_VALUE(record_key == key, "torch_cudajit: the reflection record was stored under "
                    "the key ", detail::utf8_text(record_key.substr(0, 16)), "..., not ",
                    key.substr(0, 16), "...");
  TORCH_CHECK_VALUE(record_digest == digest, "torch_cudajit: the reflection record was read from "
                    "another source (digest ", detail::utf8_text(record_digest.substr(0, 16)),
                    "..., this source's is ", digest.substr(0, 16), "...)");
  TORCH_CHECK_VALUE(sha256_hex(kernels) == kernels_digest, "torch_cudajit: the reflection "
                    "record's kernels do not match their SHA-256");
  return deserialize_kernels(kernels);
}

SourceReading read_source(const std::string& source, const std::string& filename,
                          const std::vector<std::string>& options, const std::string& std,
                          int arch, bool use_cache) {
  const std::vector<std::string> args = frontend_args(options, std, arch, filename);
  const std::string toolkit = toolkit_include_dir();
  DiskCache& cache = DiskCache::instance();
  if (!use_cache || !cache.usable()) return parse(source, filename, args, arch, toolkit);
  const std::string skey = source_key(source, filename, args);
  const std::string digest = source_digest(filename, source);
  std::vector<std::vector<FileDigest>> entries;
  if (std::optional<std::string> bytes = cache.load_manifest(skey)) {
    if (auto decoded = decode_manifest(skey, *bytes))
      entries = std::move(*decoded);
    else
      cache.warn_once("ignoring the manifest " + skey + ".cjm: it is damaged or belongs to "
                      "another source. The source is read again and the manifest replaced.");
  }
  for (const std::vector<FileDigest>& files : entries) {
    if (!files_unchanged(files, toolkit)) continue;
    // Every file the source read holds the bytes it held then: the reflection of that reading
    // is this source's.
    SourceReading out;
    out.arch = arch;
    out.deps.files = files;
    const std::string rkey = reflection_key(skey, out.deps);
    if (std::optional<std::string> record = cache.load_reflection(rkey)) {
      try {
        std::string read_with;
        out.kernels = decode_reflection_record(rkey, digest, *record, &read_with);
        // Read by another libclang than the one this process would load: read again. With none
        // to be found (a deployed process), the record is what there is.
        const std::string libclang = libclang_identity();
        out.from_cache = true;
        if (libclang.empty() || libclang == read_with) return out;
      } catch (const c10::Error& e) {
        cache.reject_reflection(rkey, e.what_without_backtrace());
      }
    }
    break;  // its record is gone (evicted) or refused: read the source again
  }
  SourceReading out = parse(source, filename, args, arch, toolkit);
  if (!out.deps.exact()) {
    cache.warn_once("'" + filename + "': " + out.deps.inexact + ", so the cache cannot tell "
                    "every file the compiler reads; its kernels compile without the disk cache.");
    return out;
  }
  const std::string rkey = reflection_key(skey, out.deps);
  cache.store_reflection(rkey, encode_reflection_record(rkey, digest, out.kernels));
  // Newest first, each list once, at most kManifestEntries of them.
  entries.erase(std::remove(entries.begin(), entries.end(), out.deps.files), entries.end());
  entries.insert(entries.begin(), out.deps.files);
  if (entries.size() > kManifestEntries) entries.resize(kManifestEntries);
  cache.store_manifest(skey, encode_manifest(skey, entries));
  return out;
}

Dependencies read_dependencies(const std::string& source, const std::string& filename,
                               const std::vector<std::string>& options, const std::string& std,
                               int arch, bool use_cache, std::vector<KernelDecl>* kernels) {
  try {
    SourceReading r = read_source(source, filename, options, std, arch, use_cache);
    if (kernels != nullptr) *kernels = std::move(r.kernels);
    return std::move(r.deps);
  } catch (const c10::ValueError&) {
    throw;  // the source itself is refused
  } catch (const c10::Error& e) {
    // No front end to read the source with (no libclang in a deployed process, say): the keys
    // cannot name the files it reads.
    Dependencies deps;
    deps.inexact = std::string("the front end cannot read it (") + e.what_without_backtrace() + ")";
    return deps;
  }
}

std::shared_ptr<const Program> read_program(std::string source, std::string filename,
                                            const std::vector<std::string>& options,
                                            const std::string& std, int arch, bool use_cache) {
  Program::check_source(source, filename, options);
  if (arch <= 0) arch = detail::current_context_arch();
  if (arch <= 0) arch = kDefaultFrontendArch;
  const long long start = detail::now_ns();
  SourceReading reading = read_source(source, filename, options, std, arch, use_cache);
  if (detail::log_enabled(LogLevel::kInfo)) {
    std::string names;
    for (const KernelDecl& k : reading.kernels) names += (names.empty() ? "" : ", ") + k.qualified_name;
    detail::log(LogLevel::kInfo, "read '" + filename + "' for sm_" + std::to_string(arch) + ": " +
                                     (names.empty() ? "no kernels" : "kernels " + names) + "; " +
                                     (reading.from_cache ? "declarations from the disk cache"
                                                         : "declarations read by the front end") +
                                     ", " + detail::elapsed_ms(start));
  }
  auto holder = std::make_shared<RecordedProgram>(
      Program(std::move(source), std::move(filename), std::move(reading.kernels)), use_cache);
  // Compiles for the architecture, standard and options it was read with need no second reading.
  holder->record.deps.emplace(dependency_memo_key(arch, std, options), std::move(reading.deps));
  return recorded(std::move(holder));
}

std::shared_ptr<const Program> load_program(std::string source, std::string filename,
                                            const std::string& reflection, bool use_cache) {
  return recorded(std::make_shared<RecordedProgram>(
      Program::from_reflection(std::move(source), std::move(filename), reflection), use_cache));
}

bool program_uses_cache(const Program& program) {
  const ProgramRecord* record = record_of(program);
  return record == nullptr || record->use_cache;
}

Dependencies program_dependencies(const Program& program, const CompileOptions& options) {
  ProgramRecord* record = record_of(program);
  if (record == nullptr) return read_program_dependencies(program, options, /*use_cache=*/true);
  const std::string memo_key = dependency_memo_key(options.arch, options.std, options.extra);
  std::lock_guard<std::mutex> lock(record->mutex);
  auto it = record->deps.find(memo_key);
  const std::string toolkit = toolkit_include_dir();
  if (it != record->deps.end() && it->second.exact() && files_unchanged(it->second.files, toolkit))
    return it->second;
  if (it != record->deps.end() && !it->second.exact()) return it->second;
  // Not read for this architecture yet, or a file changed since: read it again.
  Dependencies deps = read_program_dependencies(program, options, record->use_cache);
  record->deps[memo_key] = deps;
  return deps;
}

}  // namespace torch_cudajit
