// torch_cudajit: compiles a Program through the disk cache. A compile is stored as one record
// (its PTX or CUBIN, lowered names, probes and log) under compile_key; the byte store
// (cache.h) holds records as bytes and knows nothing of programs. A miss takes the key's lock,
// so processes starting together compile each specialization once; with a job store
// (job_store.h), ranks that share no folder do too.
#pragma once

#include "program.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch_cudajit {

/// Serializes a compile to the cache file payload (exposed for tests).
std::string serialize_compiled(const std::string& key, const CompiledProgram& compiled);
/// Parses a payload; nothing when it is malformed or was stored under another key.
std::optional<CompiledProgram> deserialize_compiled(const std::string& key, const std::string& payload);

/// What the disk cache did for one compile: not used, a hit, a miss compiled here, or a miss
/// that another rank of the job compiled and published through its store (job_store.h).
enum class CacheOutcome { kBypassed, kHit, kMiss, kReceived };

/// One request's share of a compile: the program that holds its kernel (shared by the requests
/// compiled together), the kernel's index there, and what the cache did for it.
struct CompiledInstance {
  std::shared_ptr<const CompiledProgram> compiled;
  size_t index = 0;
  CacheOutcome outcome = CacheOutcome::kBypassed;
};

/// A batch record's stand-in under one request's own key: the batch's key and the request's
/// index in it (exposed for tests).
std::string serialize_reference(const std::string& key, const std::string& batch_key,
                                size_t index);

/// Compiles through the cache. Each request is looked up under its own key, where either its
/// own record or a reference into a batch record is stored. The requests not found compile
/// together as one NVRTC program (one header parse for all of them): one alone is stored as its
/// own record, under its key's lock, so processes starting together compile it once; several
/// are stored once as a batch under the batch's key, with a reference under each request's
/// key, so a later process finds each alone; a batch too is compiled under its key's lock. With
/// a job store, a miss is compiled once in the job (job_store.h: compile_in_job) and the
/// record another rank published is stored here like this process's own. The cache is bypassed when `use_cache` is false,
/// when it is disabled, or when its folder cannot be used. Returns one instance per request.
std::vector<CompiledInstance> compile_cached(const Program& program,
                                             const std::vector<InstantiationRequest>& requests,
                                             const CompileOptions& options, bool use_cache);

}  // namespace torch_cudajit
