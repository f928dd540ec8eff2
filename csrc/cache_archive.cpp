// torch_cudajit: cache archives (see cache_archive.h).
#include "cache_archive.h"

#include "cache.h"
#include "compile_cache.h"
#include "dependencies.h"
#include "file_io.h"
#include "reading.h"
#include "serialize.h"
#include "sha256.h"

#include <c10/util/Exception.h>

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

namespace torch_cudajit {
namespace {

using detail::ByteReader;
using detail::put_str;
using detail::put_u64;
using detail::utf8_text;

constexpr char kArchiveMagic[8] = {'T', 'C', 'J', 'A', 'R', 'C', 'H', 'V'};
constexpr const char* kArchiveTag = "torch_cudajit cache archive";
constexpr size_t kKeyLength = 64;

// What a record holds, as far as choosing and checking records goes.
struct RecordContents {
  std::vector<std::string> kernels;      ///< an entry's compiled kernels; a reflection's declared ones
  std::optional<std::string> batch_key;  ///< an entry that refers into a batch record
  uint64_t index = 0;                    ///< its kernel's index there
  std::vector<std::string> reflections;  ///< the reflection keys a manifest leads to
};

// The contents of a record file's payload, checked against the key its name gives; nothing, with
// `problem` saying why, when it does not hold what its name says.
std::optional<RecordContents> record_contents(const std::string& name, const std::string& payload,
                                              std::string* problem) {
  const std::string key = name.substr(0, kKeyLength);
  const std::string kind = record_kind(name);
  RecordContents out;
  if (kind == "entry") {
    if (std::optional<CompiledProgram> c = deserialize_compiled(key, payload)) {
      for (const std::string& lowered : c->lowered_names)
        out.kernels.push_back(kernel_name_of_lowered(lowered));
      return out;
    }
    // A reference: read its fields, then require the exact bytes serialize_reference writes.
    ByteReader r{payload};
    r.str();
    r.str();
    std::string batch = r.str();
    const uint64_t index = r.u(8);
    if (r.ok && detail::is_record_name(batch + ".cj") &&
        serialize_reference(key, batch, static_cast<size_t>(index)) == payload) {
      out.batch_key = std::move(batch);
      out.index = index;
      return out;
    }
    *problem = "does not hold a compiled kernel or a batch reference stored under its key";
  } else if (kind == "reflection") {
    ByteReader r{payload};
    r.str();
    r.str();
    const std::string digest = r.str();
    try {
      for (const KernelDecl& d : decode_reflection_record(key, digest, payload))
        out.kernels.push_back(d.qualified_name.empty() ? d.name : d.qualified_name);
      return out;
    } catch (const c10::Error& e) {
      *problem = std::string("is not a reflection record of its key (") +
                 e.what_without_backtrace() + ")";
    }
  } else {
    if (auto lists = decode_manifest(key, payload)) {
      for (auto& files : *lists) {
        Dependencies deps;
        deps.files = std::move(files);
        out.reflections.push_back(reflection_key(key, deps));
      }
      return out;
    }
    *problem = "is not a manifest of its key (damaged, or stored under another key)";
  }
  return std::nullopt;
}

// `wanted` names `kernel` with its namespaces or without them.
bool names_kernel(const std::string& wanted, const std::string& kernel) {
  if (wanted == kernel) return true;
  const size_t colons = kernel.rfind("::");
  return colons != std::string::npos && kernel.compare(colons + 2, std::string::npos, wanted) == 0;
}

bool names_any(const std::vector<std::string>& wanted, const std::vector<std::string>& kernels,
               std::set<std::string>* matched) {
  bool any = false;
  for (const std::string& w : wanted)
    for (const std::string& k : kernels)
      if (names_kernel(w, k)) {
        matched->insert(w);
        any = true;
      }
  return any;
}

void count_member(ArchiveSummary& s, const std::string& name) {
  const std::string kind = record_kind(name);
  (kind == "entry" ? s.entries : kind == "reflection" ? s.reflections : s.manifests) += 1;
}

}  // namespace

std::string record_kind(const std::string& name) {
  const size_t dot = name.rfind('.');
  const std::string suffix = dot == std::string::npos ? "" : name.substr(dot);
  if (suffix == ".cjr") return "reflection";
  if (suffix == ".cjm") return "manifest";
  return "entry";
}

std::string kernel_name_of_lowered(const std::string& lowered) {
  std::string text = lowered;
  if (lowered.rfind("_Z", 0) == 0) {
    int status = 0;
    char* demangled = abi::__cxa_demangle(lowered.c_str(), nullptr, nullptr, &status);
    if (status == 0 && demangled != nullptr) text = demangled;
    std::free(demangled);
  }
  // "void ns::scale<float>(cj::Array<float, 1>, ...)": kernels return void; a plain function's
  // demangled name has no return type.
  if (text.rfind("void ", 0) == 0) text = text.substr(5);
  const std::string anonymous = "(anonymous namespace)::";
  size_t from = 0;
  while (text.compare(from, anonymous.size(), anonymous) == 0) from += anonymous.size();
  return text.substr(0, text.find_first_of("<(", from));
}

std::string encode_archive(const std::vector<ArchiveMember>& members) {
  std::string payload;
  put_str(payload, kArchiveTag);
  put_u64(payload, members.size());
  for (const ArchiveMember& m : members) {
    put_str(payload, m.name);
    put_str(payload, record_kind(m.name));
    put_str(payload, sha256_hex(m.bytes));
    put_str(payload, m.bytes);
  }
  return detail::frame_bytes(kArchiveMagic, kArchiveFormatVersion, payload);
}

std::vector<ArchiveMember> decode_archive(const std::string& bytes, const std::string& file) {
  auto fail = [&](const std::string& what) {
    TORCH_CHECK_VALUE(false, "torch_cudajit: the cache archive '", utf8_text(file), "' ", what,
                      "; nothing was imported. Export the archive again (python -m "
                      "torch_cudajit cache export) and copy it whole.");
  };
  std::string problem;
  std::optional<std::string> payload = detail::unframe_bytes(
      kArchiveMagic, kArchiveFormatVersion, "cache archive", bytes, &problem);
  if (!payload) fail(problem);
  ByteReader r{*payload};
  if (r.str() != kArchiveTag || !r.ok) fail("does not start with the archive tag");
  const uint64_t count = r.count();
  std::vector<ArchiveMember> members;
  std::set<std::string> names;
  for (uint64_t i = 0; i < count && r.ok; ++i) {
    ArchiveMember m;
    m.name = r.str();
    const std::string kind = r.str(), digest = r.str();
    m.bytes = r.str();
    if (!r.ok) break;
    const std::string which = "member " + std::to_string(i + 1) + " ('" + utf8_text(m.name) + "')";
    // The name becomes a file name in the target folder: a record's name and nothing else.
    if (!detail::is_record_name(m.name))
      fail("has a " + which + " whose name is not a cache record's (64 lowercase hex digits, "
           "then .cj, .cjr or .cjm)");
    if (!names.insert(m.name).second) fail("holds " + which + " twice");
    if (kind != record_kind(m.name))
      fail("lists " + which + " as kind '" + utf8_text(kind) + "', but its name makes it " +
           (record_kind(m.name) == "entry" ? "an " : "a ") + record_kind(m.name));
    if (sha256_hex(m.bytes) != digest)
      fail("has a " + which + " whose bytes do not match their SHA-256 in the archive's list");
    std::optional<std::string> record = unframe_record(m.bytes, &problem);
    if (!record) fail("has a " + which + " that " + problem);
    if (!record_contents(m.name, *record, &problem)) fail("has a " + which + " that " + problem);
    members.push_back(std::move(m));
  }
  if (!r.ok || r.pos != payload->size())
    fail("has a damaged member list (at byte " + std::to_string(r.pos) + " of its payload)");
  return members;
}

ArchiveSummary export_cache_archive(const std::string& path,
                                    const std::vector<std::string>& kernels) {
  DiskCache& cache = DiskCache::instance();
  const CacheSettings settings = cache.settings();
  std::vector<StoredRecord> records = cache.records();
  // The records that hold what their names say, by name.
  std::map<std::string, std::pair<const StoredRecord*, RecordContents>> usable;
  for (const StoredRecord& r : records) {
    std::string problem;
    if (std::optional<RecordContents> c = record_contents(r.name, r.payload, &problem))
      usable.emplace(r.name, std::make_pair(&r, std::move(*c)));
    else
      cache.warn_once("leaving '" + r.path + "' out of the archive: the file " + problem + ".");
  }
  std::string where = "the cache folder '" + settings.dir + "'";
  if (!settings.writable) where = "no writable cache folder (TORCH_CUDAJIT_CACHE=readonly)";
  for (const std::string& d : settings.readonly_dirs) where += ", the read-only folder '" + d + "'";
  TORCH_CHECK_VALUE(settings.enabled, "torch_cudajit: cannot export the kernel cache to '", path,
                    "': the disk cache is disabled (TORCH_CUDAJIT_CACHE=0). Enable it and "
                    "compile the kernels to export.");
  TORCH_CHECK_VALUE(!usable.empty(), "torch_cudajit: cannot export the kernel cache to '", path,
                    "': there are no records in ", where, ". Compile the kernels first (kernel."
                    "compile(..., arch=...) or kernel.precompile), then export.");

  // The kernels each entry provides: its own, or its batch's at its index.
  auto entry_kernels = [&](const RecordContents& c) -> std::vector<std::string> {
    if (!c.batch_key) return c.kernels;
    auto batch = usable.find(*c.batch_key + ".cj");
    if (batch == usable.end() || batch->second.second.batch_key ||
        c.index >= batch->second.second.kernels.size())
      return {};
    return {batch->second.second.kernels[c.index]};
  };
  std::set<std::string> chosen, matched, reflections;
  for (const auto& [name, record] : usable) {
    const RecordContents& c = record.second;
    const std::string kind = record_kind(name);
    if (kernels.empty()) {
      chosen.insert(name);
    } else if (kind == "entry" && names_any(kernels, entry_kernels(c), &matched)) {
      chosen.insert(name);
      if (c.batch_key) chosen.insert(*c.batch_key + ".cj");
    } else if (kind == "reflection") {
      std::set<std::string> declared;  // a declaration alone does not count as a match
      if (names_any(kernels, c.kernels, &declared)) {
        chosen.insert(name);
        reflections.insert(name.substr(0, kKeyLength));
      }
    }
  }
  for (const auto& [name, record] : usable)
    for (const std::string& rkey : record.second.reflections)
      if (reflections.count(rkey)) chosen.insert(name);
  for (const std::string& k : kernels) {
    if (matched.count(k)) continue;
    std::set<std::string> known;
    for (const auto& [name, record] : usable)
      if (record_kind(name) == "entry")
        for (const std::string& n : entry_kernels(record.second)) known.insert(n);
    std::string list;
    for (const std::string& n : known) list += (list.empty() ? "" : ", ") + n;
    TORCH_CHECK_VALUE(false, "torch_cudajit: cannot export the kernel cache to '", path,
                      "': no compiled entry holds a kernel named '", k, "' in ", where,
                      " (the entries hold: ", list.empty() ? "none" : list,
                      "). Compile it first (kernel.compile(..., arch=...) or kernel.precompile), "
                      "or name a kernel as declared, with or without its namespaces.");
  }

  ArchiveSummary summary;
  summary.path = path;
  std::vector<ArchiveMember> members;
  std::set<std::string> names;
  for (const std::string& name : chosen) {
    auto it = usable.find(name);
    if (it == usable.end()) continue;  // a batch record that is gone: its references miss
    members.push_back({name, it->second.first->bytes});
    count_member(summary, name);
    if (record_kind(name) == "entry")
      for (const std::string& n : entry_kernels(it->second.second)) names.insert(n);
  }
  summary.kernels.assign(names.begin(), names.end());
  const std::string data = encode_archive(members);
  summary.bytes = static_cast<int64_t>(data.size());
  const size_t slash = path.rfind('/');
  const std::string error =
      slash == std::string::npos
          ? detail::write_file_atomically(".", path, data, 0644)
          : detail::write_file_atomically(path.substr(0, std::max<size_t>(slash, 1)),
                                          path.substr(slash + 1), data, 0644);
  TORCH_CHECK_VALUE(error.empty(), "torch_cudajit: cannot write the cache archive '", path, "' (",
                    error, "). Choose a path in a folder you can write.");
  return summary;
}

ArchiveSummary import_cache_archive(const std::string& path, const std::string& dir) {
  std::string bytes;
  TORCH_CHECK_VALUE(detail::read_file(path, bytes), "torch_cudajit: cannot read the cache "
                    "archive '", path, "' (", detail::errno_text(), "). Check the path: it must "
                    "be a file written by python -m torch_cudajit cache export.");
  const std::vector<ArchiveMember> members = decode_archive(bytes, path);
  ArchiveSummary summary;
  summary.path = path;
  summary.bytes = static_cast<int64_t>(bytes.size());
  summary.dir = dir;
  if (summary.dir.empty()) {
    const CacheSettings s = DiskCache::instance().settings();
    TORCH_CHECK_VALUE(s.enabled && s.writable, "torch_cudajit: cannot import the cache archive '",
                      path, "': there is no writable cache folder (TORCH_CUDAJIT_CACHE=",
                      s.enabled ? "readonly" : "0", "). Name the folder to import into "
                      "(--dir DIR, or dir=).");
    summary.dir = s.dir;
  }
  std::string fix;
  const std::string problem = detail::prepare_writable_folder(summary.dir, &fix);
  TORCH_CHECK_VALUE(problem.empty(), "torch_cudajit: cannot import the cache archive '", path,
                    "': ", problem, ". Import into a folder of your own that only you can "
                    "write (--dir DIR, or dir=), or one that does not exist yet.");
  size_t written = 0;
  for (const ArchiveMember& m : members) {
    const std::string error = detail::write_file_atomically(summary.dir, m.name, m.bytes);
    TORCH_CHECK_VALUE(error.empty(), "torch_cudajit: cannot import the cache archive '", path,
                      "': cannot write to '", summary.dir, "' (", error, "); ", written, " of ", members.size(), " records were "
                      "written (each whole). Free space or fix the folder, then import again.");
    ++written;
    count_member(summary, m.name);
    if (record_kind(m.name) == "entry") {
      std::string ignored;
      auto c = record_contents(m.name, *unframe_record(m.bytes, &ignored), &ignored);
      for (const std::string& n : c->kernels) summary.kernels.push_back(n);
    }
  }
  std::sort(summary.kernels.begin(), summary.kernels.end());
  summary.kernels.erase(std::unique(summary.kernels.begin(), summary.kernels.end()),
                        summary.kernels.end());
  return summary;
}

}  // namespace torch_cudajit
