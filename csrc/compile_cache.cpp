// torch_cudajit: compiles through the disk cache (see compile_cache.h).
#include "compile_cache.h"

#include "cache.h"
#include "cache_key.h"
#include "file_io.h"
#include "headers.h"
#include "job_store.h"
#include "reading.h"

#include <functional>
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

namespace {

// A reference record: the request's key, this tag, the batch's key and the request's index.
constexpr const char* kReferenceTag = "torch_cudajit batch reference";

struct Reference {
  std::string batch_key;
  uint64_t index = 0;
};

std::optional<Reference> deserialize_reference(const std::string& key, const std::string& payload) {
  ByteReader r{payload};
  if (r.str() != key || !r.ok || r.str() != kReferenceTag || !r.ok) return std::nullopt;
  Reference ref;
  ref.batch_key = r.str();
  ref.index = r.u(8);
  if (!r.ok || r.pos != payload.size()) return std::nullopt;
  return ref;
}

// True when `c` holds `single`'s instantiation at `index`, with one probe per parameter; a
// record of another build (other probes) compiles again silently.
bool holds(const CompiledProgram& c, size_t index, const GeneratedSource& single) {
  const size_t n = c.lowered_names.size();
  return index < n && c.probes.size() == n && c.name_expressions.size() == n &&
         c.name_expressions[index] == single.instantiations[0].kernel_expression &&
         c.probes[index].size() == single.requests[0].key.size;
}

// The record stored as `payload` under `key` when it holds exactly the requests `which` (of
// `singles`), at its indexes 0, 1, ...; nothing otherwise.
std::optional<CompiledProgram> record_for(const std::string& key, const std::string& payload,
                                          const std::vector<GeneratedSource>& singles,
                                          const std::vector<size_t>& which) {
  std::optional<CompiledProgram> c = deserialize_compiled(key, payload);
  if (!c || c->lowered_names.size() != which.size()) return std::nullopt;
  for (size_t j = 0; j < which.size(); ++j)
    if (!holds(*c, j, singles[which[j]])) return std::nullopt;
  return c;
}

// Records read during one compile_cached call, by key: the requests a batch record serves share
// one program (and so, once loaded, one module).
using LoadedRecords = std::vector<std::pair<std::string, std::shared_ptr<const CompiledProgram>>>;

// The kernel of `single` (one request's GeneratedSource) as stored under `key`: its own record,
// or the batch record a reference names. Nothing when neither is there or fits.
std::optional<CompiledInstance> load_instance(DiskCache& cache, const std::string& key,
                                              const GeneratedSource& single,
                                              LoadedRecords& loaded) {
  std::optional<std::string> bytes = cache.load(key);
  if (!bytes) return std::nullopt;
  std::string record_key = key;
  size_t index = 0;
  if (std::optional<Reference> ref = deserialize_reference(key, *bytes)) {
    record_key = ref->batch_key;
    index = static_cast<size_t>(ref->index);
    bytes.reset();
  }
  std::shared_ptr<const CompiledProgram> program;
  for (const auto& [k, p] : loaded)
    if (k == record_key) program = p;
  if (!program) {
    if (!bytes) bytes = cache.load(record_key);  // an evicted batch is a miss
    if (!bytes) return std::nullopt;
    std::optional<CompiledProgram> c = deserialize_compiled(record_key, *bytes);
    if (!c) {
      cache.reject(record_key, "does not hold this kernel");
      return std::nullopt;
    }
    program = std::make_shared<const CompiledProgram>(std::move(*c));
    loaded.emplace_back(record_key, program);
  }
  if (!holds(*program, index, single)) return std::nullopt;
  return CompiledInstance{std::move(program), index, CacheOutcome::kHit};
}

// Compiles requests as one program; every instance gets `outcome`.
void compile_together(const Program& program, const std::vector<InstantiationRequest>& requests,
                      const std::vector<size_t>& which, const CompileOptions& options,
                      CacheOutcome outcome, std::vector<CompiledInstance>& out) {
  std::vector<InstantiationRequest> batch;
  for (size_t i : which) batch.push_back(requests[i]);
  auto compiled = std::make_shared<const CompiledProgram>(program.compile(program.generate(batch), options));
  for (size_t j = 0; j < which.size(); ++j) out[which[j]] = {compiled, j, outcome};
}

// The record of `key` for the requests `which` (of `singles`, at indexes 0, 1, ... of the
// record), compiled from `generated` once in the job (job_store.h): by this process, which
// then stores it, or by another rank, whose checked record is stored here (`outcome` says
// which: kMiss or kReceived). Nothing is stored when `store` says the files read changed
// meanwhile.
std::shared_ptr<const CompiledProgram> compile_for_job(const Program& program,
                                                       const GeneratedSource& generated,
                                                       const std::string& key,
                                                       const std::vector<GeneratedSource>& singles,
                                                       const std::vector<size_t>& which,
                                                       const CompileOptions& options,
                                                       const std::function<bool()>& store,
                                                       CacheOutcome& outcome) {
  std::shared_ptr<const CompiledProgram> compiled;
  std::string payload;
  auto compile = [&] {
    compiled = std::make_shared<const CompiledProgram>(program.compile(generated, options));
    payload = serialize_compiled(key, *compiled);
    return payload;
  };
  auto accept = [&](const std::string& received) {
    std::optional<CompiledProgram> c = record_for(key, received, singles, which);
    if (c) compiled = std::make_shared<const CompiledProgram>(std::move(*c));
    return c.has_value();
  };
  if (std::optional<std::string> received =
          detail::compile_in_job(key, "kernel(s) " + detail::kernel_names(generated.requests) +
                                          " of '" + program.filename() + "'",
                                 program, compile, accept))
    payload = std::move(*received), outcome = CacheOutcome::kReceived;
  else
    outcome = CacheOutcome::kMiss;
  TORCH_INTERNAL_ASSERT(compiled, "a compile for the job returned no program");
  if (store()) DiskCache::instance().store(key, payload);
  return compiled;
}

}  // namespace

std::string serialize_reference(const std::string& key, const std::string& batch_key,
                                size_t index) {
  std::string out;
  put_str(out, key);
  put_str(out, kReferenceTag);
  put_str(out, batch_key);
  put_u64(out, index);
  return out;
}

std::vector<CompiledInstance> compile_cached(const Program& program,
                                             const std::vector<InstantiationRequest>& requests,
                                             const CompileOptions& options, bool use_cache) {
  std::vector<CompiledInstance> out(requests.size());
  std::vector<size_t> all(requests.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  DiskCache& cache = DiskCache::instance();
  if (!use_cache || !program_uses_cache(program) || !cache.usable()) {
    compile_together(program, requests, all, options, CacheOutcome::kBypassed, out);
    return out;
  }
  // The files the source reads when compiled for this architecture, as the front end found
  // them (checked against the disk now).
  const Dependencies deps = program_dependencies(program, options);
  // Each request under its own key, which its generated source decides.
  std::vector<GeneratedSource> singles;
  std::vector<std::string> keys;
  std::vector<size_t> missing;
  LoadedRecords loaded;
  for (size_t i = 0; i < requests.size(); ++i) {
    singles.push_back(program.generate({requests[i]}));
    std::string inexact;
    keys.push_back(compile_key(program, singles[i], options, deps, &inexact));
    if (keys[i].empty()) {
      // One source and one set of headers: when one key cannot be exact, none can.
      cache.warn_once("kernel '" + requests[i].kernel + "' in '" + program.filename() + "': " +
                      inexact + ", so the cache cannot tell every file the compiler reads; it "
                      "compiles without the disk cache.");
      compile_together(program, requests, all, options, CacheOutcome::kBypassed, out);
      return out;
    }
    if (std::optional<CompiledInstance> hit = load_instance(cache, keys[i], singles[i], loaded)) {
      cache.counters().hits++;
      out[i] = std::move(*hit);
    } else {
      missing.push_back(i);
    }
  }
  // A file edited while NVRTC read it: the code may hold either version, so it is not stored.
  const std::string toolkit = toolkit_include_dir();
  auto still_exact = [&] { return files_unchanged(deps.files, toolkit); };
  if (missing.size() == 1) {
    const size_t i = missing[0];
    // Processes that start together queue here; all but the first then find the record.
    DiskCache::KeyLock lock = cache.lock(keys[i]);
    if (std::optional<CompiledInstance> hit = load_instance(cache, keys[i], singles[i], loaded)) {
      cache.counters().hits++;
      out[i] = std::move(*hit);
      return out;
    }
    CacheOutcome outcome;
    auto compiled =
        compile_for_job(program, singles[i], keys[i], singles, {i}, options, still_exact, outcome);
    cache.counters().misses++;
    out[i] = {std::move(compiled), 0, outcome};
  } else if (!missing.empty()) {
    // One NVRTC program for all of them, stored once; each key refers into it.
    std::vector<InstantiationRequest> batch;
    for (size_t i : missing) batch.push_back(requests[i]);
    const GeneratedSource generated = program.generate(batch);
    const std::string batch_key = compile_key(program, generated, options, deps);
    TORCH_INTERNAL_ASSERT(!batch_key.empty(), "a batch of exact keys has an inexact key");
    // As for one request: processes asking for the same batch together compile it once.
    DiskCache::KeyLock lock = cache.lock(batch_key);
    std::shared_ptr<const CompiledProgram> compiled;
    // Found here: the process that held the lock stored it, with a reference under each key.
    CacheOutcome outcome = CacheOutcome::kHit;
    if (std::optional<std::string> bytes = cache.load(batch_key))
      if (std::optional<CompiledProgram> c = record_for(batch_key, *bytes, singles, missing))
        compiled = std::make_shared<const CompiledProgram>(std::move(*c));
    bool store = false;
    if (!compiled) {
      compiled = compile_for_job(
          program, generated, batch_key, singles, missing, options,
          [&] { return store = still_exact(); }, outcome);
    }
    for (size_t j = 0; j < missing.size(); ++j) {
      if (store) cache.store(keys[missing[j]], serialize_reference(keys[missing[j]], batch_key, j));
      out[missing[j]] = {compiled, j, outcome};
      (outcome == CacheOutcome::kHit ? cache.counters().hits : cache.counters().misses)++;
    }
  }
  return out;
}

}  // namespace torch_cudajit
