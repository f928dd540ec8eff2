// torch_cudajit: compiles through the disk cache (see compile_cache.h).
#include "compile_cache.h"

#include "cache.h"
#include "cache_key.h"
#include "file_io.h"

#include <utility>

namespace torch_cudajit {

using detail::ByteReader;
using detail::put_str;
using detail::put_u32;
using detail::put_u64;

std::string serialize_compiled(const std::string& key, const CompiledProgram& c) {
  std::string out;
  put_str(out, key);
  put_str(out, c.target);
  put_u32(out, c.has_cubin ? 1 : 0);
  put_str(out, c.ptx);
  put_str(out, c.cubin);
  put_str(out, c.log);
  put_u64(out, c.options.size());
  for (const auto& o : c.options) put_str(out, o);
  put_u64(out, c.lowered_names.size());
  for (size_t i = 0; i < c.lowered_names.size(); ++i) {
    put_str(out, c.lowered_names[i]);
    put_str(out, c.name_expressions[i]);
    put_u64(out, c.probes[i].size());
    for (const auto& p : c.probes[i]) {
      put_u32(out, static_cast<uint32_t>(static_cast<int32_t>(p.code)));
      put_u32(out, p.size);
      put_u32(out, p.align);
    }
  }
  return out;
}

std::optional<CompiledProgram> deserialize_compiled(const std::string& key, const std::string& payload) {
  ByteReader r{payload};
  CompiledProgram c;
  if (r.str() != key || !r.ok) return std::nullopt;
  c.target = r.str();
  c.has_cubin = r.u(4) != 0;
  c.ptx = r.str();
  c.cubin = r.str();
  c.log = r.str();
  for (uint64_t n = r.count(), i = 0; i < n && r.ok; ++i) c.options.push_back(r.str());
  for (uint64_t n = r.count(), i = 0; i < n && r.ok; ++i) {
    c.lowered_names.push_back(r.str());
    c.name_expressions.push_back(r.str());
    std::vector<ParamProbe> probes;
    for (uint64_t m = r.count(), j = 0; j < m && r.ok; ++j) {
      ParamProbe p;
      p.code = static_cast<TypeCode>(static_cast<int32_t>(r.u(4)));
      p.size = static_cast<uint32_t>(r.u(4));
      p.align = static_cast<uint32_t>(r.u(4));
      probes.push_back(p);
    }
    c.probes.push_back(std::move(probes));
  }
  if (!r.ok || r.pos != payload.size()) return std::nullopt;
  if (c.has_cubin == c.cubin.empty() || c.lowered_names.empty()) return std::nullopt;
  return c;
}

CompiledProgram compile_cached(const Program& program,
                               const std::vector<InstantiationRequest>& requests,
                               const CompileOptions& options, bool use_cache,
                               CacheOutcome* outcome) {
  CacheOutcome unused;
  CacheOutcome& result = outcome ? *outcome : unused;
  result = CacheOutcome::kBypassed;
  DiskCache& cache = DiskCache::instance();
  if (!use_cache || !cache.usable()) return program.compile(requests, options);
  std::string inexact;
  const std::string key = compile_key(program, requests, options, &inexact);
  if (key.empty()) {
    cache.warn_once(
        "kernel '" + requests.front().kernel + "': `" + inexact + "` names a header through a "
        "macro, so the cache cannot tell which files the compiler reads; it compiles without the disk cache. Write the header's name in the "
        "#include line to cache it.");
    return program.compile(requests, options);
  }
  // An entry must hold one instantiation per request, with one probe per parameter.
  auto fits = [&](const std::optional<CompiledProgram>& c) {
    if (!c || c->lowered_names.size() != requests.size() || c->probes.size() != requests.size())
      return false;
    for (size_t i = 0; i < requests.size(); ++i)
      if (c->probes[i].size() != requests[i].key.size) return false;
    return true;
  };
  // A stored record that does not parse is replaced by this compile; one that parses but does
  // not fit (another build's probes) is compiled again silently.
  auto load = [&]() -> std::optional<CompiledProgram> {
    const std::optional<std::string> bytes = cache.load(key);
    if (!bytes) return std::nullopt;
    std::optional<CompiledProgram> c = deserialize_compiled(key, *bytes);
    if (!c) cache.reject(key, "does not hold this kernel");
    return fits(c) ? std::move(c) : std::nullopt;
  };
  auto found = load();
  if (!found) {
    // Processes that start together queue here; all but the first then find the file.
    DiskCache::KeyLock lock = cache.lock(key);
    found = load();
    if (!found) {
      result = CacheOutcome::kMiss;
      cache.counters().misses++;
      CompiledProgram compiled = program.compile(requests, options);
      cache.store(key, serialize_compiled(key, compiled));
      return compiled;
    }
  }
  result = CacheOutcome::kHit;
  cache.counters().hits++;
  return std::move(*found);
}

}  // namespace torch_cudajit
