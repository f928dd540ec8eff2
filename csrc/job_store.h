// torch_cudajit: one compile per specialization across a whole job, through torch.distributed's
// key-value store (c10d::Store). Every rank of a multi-node job asks for the same
// specializations at about the same time; the disk cache's per-key file lock makes the
// processes sharing one folder compile each once, and the store does the same across nodes,
// which share no folder. On a disk-cache miss (after the local lock and re-check), the first
// rank to claim a key in the store compiles it and publishes the framed record (cache.h:
// frame_record), or its compile error; the other ranks wait for it, check it exactly as a disk
// record, store it in their own disk cache and use it. A rank that waits past the timeout, sees
// the compiling rank stop beating, or cannot reach the store compiles for itself.
//
// Store keys, under "torch_cudajit/<compile key>/": "claim" (a counter; 1 wins), "result"
// ('R' + framed record, 'F' + compile error, 'A' when the compiling rank gave up for another
// reason) and "beat" (the compiling rank's heartbeat counter). They stay in the store for the
// job's life: one record per specialization compiled in the job. A process forked from one
// that uses a store (precompile's workers) compiles without it: the connection is the parent's.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace torch_cudajit {

class Program;

/// How ranks wait for each other's compiles.
struct CompileStoreOptions {
  /// How long a rank waits for another rank's compile before compiling for itself. Zero: the
  /// environment's TORCH_CUDAJIT_STORE_TIMEOUT (seconds), else kDefaultTimeout.
  std::chrono::milliseconds timeout{0};
  /// How often the compiling rank bumps its heartbeat counter; zero turns the heartbeat off
  /// (waiters then rely on the timeout alone).
  std::chrono::milliseconds heartbeat{1000};
  /// A waiter that sees the heartbeat counter unchanged this long takes the compiling rank for
  /// dead (killed mid-compile) and compiles for itself.
  std::chrono::milliseconds stale{15000};

  static constexpr std::chrono::milliseconds kDefaultTimeout{std::chrono::seconds(300)};
};

/// What the store did for this process's compiles.
struct CompileStoreCounters {
  std::atomic<uint64_t> compiled{0};           ///< disk-cache misses this process compiled
  std::atomic<uint64_t> received{0};           ///< records another rank compiled and published
  std::atomic<uint64_t> failures_received{0};  ///< compile errors another rank published
  std::atomic<uint64_t> timeouts{0};  ///< waits that ended without a result (timeout, dead rank)
  std::atomic<uint64_t> rejected{0};  ///< published records refused (damaged, another key)
  std::atomic<uint64_t> store_errors{0};  ///< store calls that failed (connection lost, ...)
};

/// Coordinates this process's disk-cache misses through `store` (shared by every rank of the
/// job, e.g. the default process group's store); a null store turns coordination off. The
/// options apply to stores the provider gives too.
void set_compile_store(c10::intrusive_ptr<c10d::Store> store, CompileStoreOptions options = {});
/// The store set with set_compile_store (null when none).
c10::intrusive_ptr<c10d::Store> compile_store();
/// A function asked on each disk-cache miss for a store when none was set, returning null for
/// none: the Python package's (the default process group's store, when one is initialised).
/// An empty function removes it.
void set_compile_store_provider(std::function<c10::intrusive_ptr<c10d::Store>()> provider);
/// The counters of this process.
CompileStoreCounters& compile_store_counters();

namespace detail {

/// The options in force: the set ones, with a zero timeout replaced by the environment's or
/// the default.
CompileStoreOptions effective_store_options();

/// A disk-cache miss of `key` (`what` names the kernels, for messages), compiled once in the
/// job. Without a store, or when this rank wins the claim or must compile for itself, runs
/// `compile` (which returns the record's payload, published for the others) and returns
/// nothing. Otherwise returns the payload another rank published, once `accept` took it (it
/// must parse under `key` and hold what was asked). A compile error another rank published is
/// thrown here as a CompileError about `program`.
std::optional<std::string> compile_in_job(const std::string& key, const std::string& what,
                                          const Program& program,
                                          const std::function<std::string()>& compile,
                                          const std::function<bool(const std::string&)>& accept);

}  // namespace detail
}  // namespace torch_cudajit
