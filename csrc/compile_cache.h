// torch_cudajit: compiles a Program through the disk cache. A compile is stored as one record
// (its PTX or CUBIN, lowered names, probes and log) under compile_key; the byte store
// (cache.h) holds records as bytes and knows nothing of programs. A miss takes the key's lock,
// so processes starting together compile each specialization once.
#pragma once

#include "program.h"

#include <optional>
#include <string>
#include <vector>

namespace torch_cudajit {

/// Serializes a compile to the cache file payload (exposed for tests).
std::string serialize_compiled(const std::string& key, const CompiledProgram& compiled);
/// Parses a payload; nothing when it is malformed or was stored under another key.
std::optional<CompiledProgram> deserialize_compiled(const std::string& key, const std::string& payload);

/// What the disk cache did for one compile.
enum class CacheOutcome { kBypassed, kHit, kMiss };

/// Compiles through the cache: loads a stored compile when there is one, else takes the key's
/// lock, compiles and stores. The cache is bypassed when `use_cache` is false, when it is
/// disabled, or when its folder cannot be used.
CompiledProgram compile_cached(const Program& program,
                               const std::vector<InstantiationRequest>& requests,
                               const CompileOptions& options, bool use_cache,
                               CacheOutcome* outcome = nullptr);

}  // namespace torch_cudajit
