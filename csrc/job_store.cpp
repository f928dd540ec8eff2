// torch_cudajit: one compile per specialization across a job, through a c10d::Store (see
// job_store.h).
#include "job_store.h"

#include "cache.h"
#include "file_io.h"
#include "log.h"
#include "program.h"
#include "serialize.h"

#include <c10/util/Exception.h>

#include <pthread.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace torch_cudajit {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kKeyPrefix = "torch_cudajit/";
// The first byte of a published result.
constexpr char kRecord = 'R';
constexpr char kFailure = 'F';
constexpr char kAbandoned = 'A';

// Set in a child forked from this process (precompile's worker processes): the parent's store
// connection is not the child's to use, so the child compiles without a store.
std::atomic<bool> g_forked_child{false};

struct Coordinator {
  Coordinator() { pthread_atfork(nullptr, nullptr, [] { g_forked_child = true; }); }

  std::mutex mutex;
  c10::intrusive_ptr<c10d::Store> store;
  CompileStoreOptions options;
  std::function<c10::intrusive_ptr<c10d::Store>()> provider;
  CompileStoreCounters counters;
  std::vector<std::string> warned;
};

Coordinator& coordinator() {
  static Coordinator* c = new Coordinator();  // never destroyed: compiles may run during exit
  return *c;
}

// One warning per distinct text and process: a job of many keys whose store is gone warns once.
void warn_once(const std::string& what) {
  Coordinator& c = coordinator();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    if (std::find(c.warned.begin(), c.warned.end(), what) != c.warned.end()) return;
    c.warned.push_back(what);
  }
  TORCH_WARN("torch_cudajit job store: ", what);
}

void log_info(const std::string& message) {
  if (detail::log_enabled(LogLevel::kInfo)) detail::log(LogLevel::kInfo, message);
}

std::string error_text(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  return detail::utf8_text(c10_error ? c10_error->what_without_backtrace() : e.what());
}

// A failed store call: counted, reported once, and the rank goes on without the store.
void store_failed(const std::string& doing, const std::exception& e) {
  compile_store_counters().store_errors++;
  warn_once("the store failed while " + doing + " (" + error_text(e) +
            "); this process compiles for itself. Check that the store's server (the "
            "TCPStore of rank 0) is reachable, or turn the store off with "
            "torch_cudajit.distributed.use_store(None).");
}

std::string to_string(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }
std::vector<uint8_t> to_bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

// The compiling rank's heartbeats, for every key any thread of this process compiles: one
// thread, started on first use and never joined (a compile path never waits for it, so a store
// that needs the GIL only delays beats).
class Heartbeat {
 public:
  static Heartbeat& instance() {
    static Heartbeat* h = new Heartbeat();
    return *h;
  }

  void add(const c10::intrusive_ptr<c10d::Store>& store, const std::string& key,
           milliseconds period) {
    std::lock_guard<std::mutex> lock(mutex_);
    beats_.emplace_back(store, key);
    period_ = period;
    if (!started_) {
      started_ = true;
      std::thread([this] { run(); }).detach();
    }
  }

  void remove(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = std::find_if(beats_.begin(), beats_.end(),
                           [&](const auto& b) { return b.second == key; });
    if (it != beats_.end()) beats_.erase(it);
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait_for(lock, period_);
      auto beats = beats_;
      lock.unlock();
      for (auto& [store, key] : beats) {
        try {
          store->add(key, 1);
        } catch (const std::exception&) {
          // The waiters see no beat and compile for themselves.
        }
      }
      beats.clear();  // the store references go before the lock is taken again
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::pair<c10::intrusive_ptr<c10d::Store>, std::string>> beats_;
  milliseconds period_{1000};
  bool started_ = false;
};

// Beats for one key while this rank compiles it.
class Beating {
 public:
  Beating(const c10::intrusive_ptr<c10d::Store>& store, std::string key, milliseconds period)
      : key_(std::move(key)), on_(period.count() > 0) {
    if (on_) Heartbeat::instance().add(store, key_, period);
  }
  ~Beating() {
    if (on_) Heartbeat::instance().remove(key_);
  }
  Beating(const Beating&) = delete;
  Beating& operator=(const Beating&) = delete;

 private:
  std::string key_;
  bool on_;
};

std::string serialize_failure(const CompileError& e) {
  std::string out;
  detail::put_str(out, e.kernel_name());
  detail::put_str(out, e.arch());
  detail::put_u64(out, e.options().size());
  for (const auto& o : e.options()) detail::put_str(out, o);
  detail::put_str(out, e.log());
  detail::put_str(out, e.hint());
  return out;
}

// The compile error another rank published, about this rank's copy of the program; nothing
// when the bytes are not one.
std::optional<CompileError> deserialize_failure(const std::string& bytes, const Program& program) {
  detail::ByteReader r{bytes};
  std::string kernel_name = r.str();
  std::string arch = r.str();
  std::vector<std::string> options;
  for (uint64_t n = r.count(), i = 0; i < n && r.ok; ++i) options.push_back(r.str());
  std::string log = r.str();
  std::string hint = r.str();
  if (!r.ok || r.pos != bytes.size()) return std::nullopt;
  hint = "Another rank of this job compiled this kernel (through the torch.distributed store) "
         "and published this error; this rank compiles the same source with the same options, "
         "so it would fail the same way.\n" + hint;
  return CompileError(std::move(kernel_name), std::move(arch), std::move(options), std::move(log),
                      program.source(), program.filename(), std::move(hint));
}

double env_seconds(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return 0;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(s > 0)) {
    warn_once(std::string(name) + " is '" + detail::utf8_text(v) +
              "', not a number of seconds such as 300; using the default of " +
              std::to_string(CompileStoreOptions::kDefaultTimeout.count() / 1000) + " s.");
    return 0;
  }
  return s;
}

// The store to use for one miss: the one set, else the provider's.
c10::intrusive_ptr<c10d::Store> current_store() {
  if (g_forked_child) return {};
  Coordinator& c = coordinator();
  std::function<c10::intrusive_ptr<c10d::Store>()> provider;
  c10::intrusive_ptr<c10d::Store> store;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    store = c.store;
    provider = c.provider;
  }
  if (!store && provider) {
    try {
      store = provider();
    } catch (const std::exception& e) {
      warn_once("asking for the default process group's store failed (" + error_text(e) +
                "); kernels compile without it.");
    }
  }
  // The process group's own connection: a clone per process would open a connection of its own,
  // and a job's ranks all opening one at their first miss queue at the server's accept backlog.
  // A wait holds the connection for one slice (two heartbeats) at most.
  return store;
}

// The test hook TORCH_CUDAJIT_STORE_TEST_DELAY: seconds the winning rank sleeps before it
// compiles, so that tests can kill it mid-compile.
void test_delay() {
  if (const double s = env_seconds("TORCH_CUDAJIT_STORE_TEST_DELAY"); s > 0)
    std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

}  // namespace

void set_compile_store(c10::intrusive_ptr<c10d::Store> store, CompileStoreOptions options) {
  TORCH_CHECK_VALUE(options.timeout.count() >= 0 && options.heartbeat.count() >= 0 &&
                        options.stale.count() >= 0,
                    "torch_cudajit: the store's timeout, heartbeat and stale intervals must not "
                    "be negative; got ", options.timeout.count(), " ms, ",
                    options.heartbeat.count(), " ms and ", options.stale.count(), " ms.");
  Coordinator& c = coordinator();
  c10::intrusive_ptr<c10d::Store> old;
  std::lock_guard<std::mutex> lock(c.mutex);
  old = std::exchange(c.store, std::move(store));
  c.options = options;
}

c10::intrusive_ptr<c10d::Store> compile_store() {
  Coordinator& c = coordinator();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.store;
}

void set_compile_store_provider(std::function<c10::intrusive_ptr<c10d::Store>()> provider) {
  Coordinator& c = coordinator();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.provider = std::move(provider);
}

CompileStoreCounters& compile_store_counters() { return coordinator().counters; }

namespace detail {

CompileStoreOptions effective_store_options() {
  CompileStoreOptions o;
  {
    Coordinator& c = coordinator();
    std::lock_guard<std::mutex> lock(c.mutex);
    o = c.options;
  }
  if (o.timeout.count() == 0) {
    const double s = env_seconds("TORCH_CUDAJIT_STORE_TIMEOUT");
    o.timeout = s > 0 ? milliseconds(static_cast<int64_t>(s * 1000)) : CompileStoreOptions::kDefaultTimeout;
  }
  return o;
}

std::optional<std::string> compile_in_job(const std::string& key, const std::string& what,
                                          const Program& program,
                                          const std::function<std::string()>& compile,
                                          const std::function<bool(const std::string&)>& accept) {
  CompileStoreCounters& counters = compile_store_counters();
  auto compile_here = [&]() -> std::optional<std::string> {
    compile();
    counters.compiled++;
    return std::nullopt;
  };
  const c10::intrusive_ptr<c10d::Store> store = current_store();
  if (!store) return compile_here();
  const CompileStoreOptions options = effective_store_options();
  const std::string base = kKeyPrefix + key;
  const std::string result_key = base + "/result", beat_key = base + "/beat";

  int64_t claim = 0;
  try {
    claim = store->add(base + "/claim", 1);
  } catch (const std::exception& e) {
    store_failed("claiming a compile", e);
    return compile_here();
  }

  if (claim == 1) {
    // This rank compiles; the others wait for what it publishes, whatever happens.
    auto publish = [&](const std::string& value) {
      try {
        store->set(result_key, to_bytes(value));
      } catch (const std::exception& e) {
        store_failed("publishing a compile", e);
      }
    };
    Beating beating(store, beat_key, options.heartbeat);
    std::string payload;
    try {
      test_delay();
      payload = compile();
    } catch (const CompileError& e) {
      publish(kFailure + serialize_failure(e));
      throw;
    } catch (...) {
      publish(std::string(1, kAbandoned));
      throw;
    }
    counters.compiled++;
    publish(kRecord + frame_record(payload));
    log_info("compiled " + what + " (key " + key.substr(0, 16) + ") for the job: published in the store");
    return std::nullopt;
  }

  // Another rank compiles: wait for its result, in slices of the heartbeat so that a rank
  // killed mid-compile is noticed without waiting for the whole timeout.
  const long long start = now_ns();
  const Clock::time_point deadline = Clock::now() + options.timeout;
  int64_t last_beat = -1;
  Clock::time_point last_change = Clock::now();
  std::string reason;
  bool ready = false;
  while (!ready && reason.empty()) {
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      reason = "waited " + std::to_string(options.timeout.count() / 1000) +
               " s (TORCH_CUDAJIT_STORE_TIMEOUT) for another rank's compile of a kernel";
      break;
    }
    milliseconds slice = std::chrono::duration_cast<milliseconds>(deadline - now) + milliseconds(1);
    if (options.heartbeat.count() > 0) slice = std::min(slice, 2 * options.heartbeat);
    try {
      store->wait({result_key}, slice);
      ready = true;
      break;
    } catch (const std::exception&) {
      // A timeout of this slice, or a store that is gone: the heartbeat read below tells.
    }
    if (Clock::now() - now < slice / 2)  // failed at once: no busy loop on a broken store
      std::this_thread::sleep_for(slice / 2);
    if (options.heartbeat.count() == 0) continue;
    int64_t beat = 0;
    try {
      beat = store->add(beat_key, 0);
    } catch (const std::exception& e) {
      store_failed("waiting for another rank's compile", e);
      return compile_here();
    }
    if (beat != last_beat) {
      last_beat = beat;
      last_change = Clock::now();
    } else if (Clock::now() - last_change >= options.stale) {
      reason = "waited for another rank's compile of a kernel, and that rank has shown no sign "
               "of life (heartbeat) for " + std::to_string(options.stale.count() / 1000) +
               " s: it was killed or lost the store";
    }
  }
  if (!ready) {
    counters.timeouts++;
    // One warning per process and reason; each kernel is in the log.
    warn_once("this process " + reason + ", so this process compiled it for itself; later waits that "
              "end the same way are not reported again.");
    log_info("no result for " + what + " from the store: " + reason + "; compiling here");
    return compile_here();
  }

  std::string value;
  try {
    value = to_string(store->get(result_key));
  } catch (const std::exception& e) {
    store_failed("reading another rank's compile", e);
    return compile_here();
  }
  if (!value.empty() && value[0] == kFailure) {
    if (std::optional<CompileError> error = deserialize_failure(value.substr(1), program)) {
      counters.failures_received++;
      log_info("compile of " + what + " failed on another rank: raising its error");
      throw *error;
    }
  } else if (!value.empty() && value[0] == kAbandoned) {
    log_info("the rank compiling " + what + " gave up; compiling here");
    return compile_here();
  } else if (!value.empty() && value[0] == kRecord) {
    std::string problem = "does not hold this kernel";
    std::optional<std::string> payload = unframe_record(value.substr(1), &problem);
    if (payload && accept(*payload)) {
      counters.received++;
      log_info("received " + what + " (key " + key.substr(0, 16) + ") from another rank, " +
               elapsed_ms(start) + " after asking");
      return payload;
    }
    counters.rejected++;
    warn_once("the record another rank published for " + what + " " + problem +
              "; this process compiles it for itself.");
    return compile_here();
  }
  counters.rejected++;
  warn_once("the store holds no result of torch_cudajit's form under '" + result_key +
            "'; this process compiles " + what + " for itself.");
  return compile_here();
}

}  // namespace detail
}  // namespace torch_cudajit
