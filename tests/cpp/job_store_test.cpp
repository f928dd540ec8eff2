// torch_cudajit C++ tests: one compile per specialization across a job (csrc/job_store.h),
// through an in-process c10d::HashStore. Each simulated rank has its own cache folder (ranks on
// different nodes share no disk): the winner publishes, a waiter receives and stores, a compile
// error travels, a missing or damaged result makes the waiter compile for itself, and a broken
// store is survived. Compiles to CUBIN for sm_90, so no GPU is needed.
#include "cache.h"
#include "cache_key.h"
#include "compile_cache.h"
#include "job_store.h"
#include "reading.h"

#include "test_util.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace torch_cudajit {
namespace {

using cjtest::make_spec_key;
using cjtest::make_temp_dir;
using cjtest::scale_request;
using cjtest::tensor_sig;
using std::chrono::milliseconds;

const char* const kScale = cjtest::kScaleSource;


CompileOptions sm90() {
  CompileOptions o;
  o.arch = 90;
  return o;
}

uint64_t count(const std::atomic<uint64_t>& c) { return c.load(); }

// A store every call of which fails, as one whose server went away does.
class BrokenStore : public c10d::HashStore {
 public:
  int64_t add(const std::string&, int64_t) override { fail(); }
  std::vector<uint8_t> get(const std::string&) override { fail(); }
  void wait(const std::vector<std::string>&, const milliseconds&) override { fail(); }

 private:
  [[noreturn]] static void fail() { TORCH_CHECK(false, "connection reset by peer"); }
};

// Two simulated ranks on two nodes: a HashStore both reach, and a cache folder each.
class JobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = DiskCache::instance().settings();
    store_ = c10::make_intrusive<c10d::HashStore>();
    rank_dirs_ = {make_temp_dir() + "/node0", make_temp_dir() + "/node1"};
    on_rank(0);
    set_store(store_);
  }
  void TearDown() override {
    set_compile_store(nullptr);
    DiskCache::instance().configure(saved_);
  }

  void set_store(c10::intrusive_ptr<c10d::Store> store, milliseconds timeout = milliseconds(20000),
                 milliseconds heartbeat = milliseconds(100), milliseconds stale = milliseconds(600)) {
    CompileStoreOptions o;
    o.timeout = timeout;
    o.heartbeat = heartbeat;
    o.stale = stale;
    set_compile_store(std::move(store), o);
  }
  // The process now plays rank `r`: its node's cache folder.
  void on_rank(int r) { DiskCache::instance().configure({true, rank_dirs_[r], int64_t(1) << 30}); }

  std::string store_key(const Program& program, const std::vector<InstantiationRequest>& requests,
                        const char* part) const {
    return "torch_cudajit/" + compile_key(program, requests, sm90()) + "/" + part;
  }

  CacheSettings saved_;
  c10::intrusive_ptr<c10d::HashStore> store_;
  std::vector<std::string> rank_dirs_;
};

TEST_F(JobStoreTest, SecondRankReceivesTheFirstRanksCompile) {
  const auto program = read_program(kScale);
  const std::vector<InstantiationRequest> req = {scale_request(TypeCode::kFloat)};
  CompileStoreCounters& counters = compile_store_counters();
  const uint64_t compiled = count(counters.compiled), received = count(counters.received);
  const uint64_t nvrtc = nvrtc_compile_count();
  const auto first = compile_cached(*program, req, sm90(), true);
  EXPECT_EQ(nvrtc_compile_count() - nvrtc, 1u);
  EXPECT_EQ(first[0].outcome, CacheOutcome::kMiss);
  EXPECT_TRUE(store_->check({store_key(*program, req, "result")}));

  on_rank(1);
  const auto second = compile_cached(*program, req, sm90(), true);
  EXPECT_EQ(nvrtc_compile_count() - nvrtc, 1u) << "the second rank compiled nothing";
  EXPECT_EQ(count(counters.compiled) - compiled, 1u);
  EXPECT_EQ(count(counters.received) - received, 1u);
  EXPECT_EQ(second[0].outcome, CacheOutcome::kReceived);
  EXPECT_EQ(second[0].compiled->cubin, first[0].compiled->cubin);
  EXPECT_EQ(second[0].compiled->lowered_names, first[0].compiled->lowered_names);
  // Stored on the second node: a later process there finds it on disk.
  EXPECT_TRUE(DiskCache::instance().load(compile_key(*program, req, sm90())).has_value());
  EXPECT_EQ(compile_cached(*program, req, sm90(), true)[0].outcome, CacheOutcome::kHit);
}

TEST_F(JobStoreTest, BatchIsCompiledOnceAndReferencedOnEachNode) {
  const auto program = read_program(kScale);
  const std::vector<InstantiationRequest> req = {scale_request(TypeCode::kFloat),
                                                 scale_request(TypeCode::kDouble)};
  const uint64_t nvrtc = nvrtc_compile_count();
  compile_cached(*program, req, sm90(), true);
  on_rank(1);
  const auto got = compile_cached(*program, req, sm90(), true);
  EXPECT_EQ(nvrtc_compile_count() - nvrtc, 1u);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].index, 1u);
  for (const auto& g : got) EXPECT_EQ(g.outcome, CacheOutcome::kReceived);
  // Each request alone now hits the received batch through its reference.
  for (const auto& r : req)
    EXPECT_EQ(compile_cached(*program, {r}, sm90(), true)[0].outcome, CacheOutcome::kHit);
  EXPECT_EQ(nvrtc_compile_count() - nvrtc, 1u);
}

TEST_F(JobStoreTest, WaiterWaitsForTheCompilingRank) {
  const auto program = read_program(kScale);
  std::atomic<bool> winner_started{false};
  std::string got_by_winner;
  std::thread winner([&] {
    detail::compile_in_job("k1", "test kernel", *program, [&] {
      winner_started = true;
      std::this_thread::sleep_for(milliseconds(700));  // longer than `stale`: beats keep it alive
      return std::string("payload of k1");
    }, [](const std::string&) { return true; });
  });
  while (!winner_started) std::this_thread::yield();
  bool compiled_here = false;
  std::optional<std::string> got = detail::compile_in_job(
      "k1", "test kernel", *program, [&] {
        compiled_here = true;
        return std::string("mine");
      },
      [](const std::string& p) { return p == "payload of k1"; });
  winner.join();
  EXPECT_FALSE(compiled_here);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, "payload of k1");
}

TEST_F(JobStoreTest, CompileErrorIsPublished) {
  const auto program = read_program(R"(
template <typename T>
__global__ void broken(cj::Array<T, 1> out) { out[0] = T::undefined_name; }
)");
  const std::vector<InstantiationRequest> req = {
      {"broken", make_spec_key(90, {tensor_sig(TypeCode::kFloat, 1)}), ""}};
  const std::string first = cjtest::expect_throws<CompileError>([&] { compile_cached(*program, req, sm90(), true); });
  CJ_EXPECT_CONTAINS(first, "undefined_name");
  on_rank(1);
  const uint64_t nvrtc = nvrtc_compile_count();
  const uint64_t failures = count(compile_store_counters().failures_received);
  try {
    compile_cached(*program, req, sm90(), true);
    ADD_FAILURE() << "no CompileError";
  } catch (const CompileError& e) {
    CJ_EXPECT_CONTAINS(e.what_without_backtrace(), "Another rank of this job compiled");
    CJ_EXPECT_CONTAINS(e.log(), "undefined_name");
    EXPECT_EQ(e.kernel_name(), "broken");
    CJ_EXPECT_CONTAINS(e.numbered_source(), "undefined_name");
  }
  EXPECT_EQ(nvrtc_compile_count(), nvrtc) << "the error came from the store";
  EXPECT_EQ(count(compile_store_counters().failures_received) - failures, 1u);
}

TEST_F(JobStoreTest, MissingResultTimesOutThenCompilesHere) {
  const auto program = read_program(kScale);
  const std::vector<InstantiationRequest> req = {scale_request(TypeCode::kFloat)};
  // Another rank claimed the key and never publishes (nor beats): the timeout ends the wait.
  store_->add(store_key(*program, req, "claim"), 1);
  set_store(store_, milliseconds(500), milliseconds(0));
  const uint64_t timeouts = count(compile_store_counters().timeouts);
  const uint64_t nvrtc = nvrtc_compile_count();
  const auto start = std::chrono::steady_clock::now();
  const auto got = compile_cached(*program, req, sm90(), true);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(500));
  EXPECT_EQ(nvrtc_compile_count() - nvrtc, 1u);
  EXPECT_EQ(count(compile_store_counters().timeouts) - timeouts, 1u);
  EXPECT_FALSE(got[0].compiled->cubin.empty());
}

TEST_F(JobStoreTest, DeadWinnerIsNoticedBeforeTheTimeout) {
  const auto program = read_program(kScale);
  const std::vector<InstantiationRequest> req = {scale_request(TypeCode::kFloat)};
  store_->add(store_key(*program, req, "claim"), 1);  // claimed, then killed: no beat
  set_store(store_, milliseconds(60000), milliseconds(100), milliseconds(400));
  const uint64_t timeouts = count(compile_store_counters().timeouts);
  const auto start = std::chrono::steady_clock::now();
  compile_cached(*program, req, sm90(), true);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(20000));
  EXPECT_EQ(count(compile_store_counters().timeouts) - timeouts, 1u);
}

TEST_F(JobStoreTest, DamagedOrForeignRecordIsRefused) {
  const auto program = read_program(kScale);
  const std::vector<InstantiationRequest> req = {scale_request(TypeCode::kFloat)};
  const std::vector<InstantiationRequest> other = {scale_request(TypeCode::kDouble)};
  compile_cached(*program, req, sm90(), true);
  compile_cached(*program, other, sm90(), true);
  const std::string result = store_key(*program, req, "result");
  const std::vector<uint8_t> good = store_->get(result);
  std::vector<uint8_t> flipped = good;
  flipped[flipped.size() / 2] ^= 0x01;
  struct Case {
    const char* what;
    std::vector<uint8_t> value;
  };
  const std::vector<Case> cases = {{"a flipped byte", flipped},
                                   {"another key's record", store_->get(store_key(*program, other, "result"))},
                                   {"not a result", {'?'}}};
  int node = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    store_->set(result, c.value);
    rank_dirs_.push_back(make_temp_dir() + "/node" + std::to_string(++node));
    on_rank(node);
    const uint64_t rejected = count(compile_store_counters().rejected);
    const uint64_t nvrtc = nvrtc_compile_count();
    const auto got = compile_cached(*program, req, sm90(), true);
    EXPECT_EQ(nvrtc_compile_count() - nvrtc, 1u) << "compiled here instead";
    EXPECT_EQ(count(compile_store_counters().rejected) - rejected, 1u);
    EXPECT_EQ(got[0].compiled->name_expressions[0].find("double"), std::string::npos);
  }
}

TEST_F(JobStoreTest, BrokenStoreCompilesHere) {
  const auto program = read_program(kScale);
  set_store(c10::make_intrusive<BrokenStore>());
  const uint64_t errors = count(compile_store_counters().store_errors);
  const uint64_t nvrtc = nvrtc_compile_count();
  compile_cached(*program, {scale_request(TypeCode::kFloat)}, sm90(), true);
  EXPECT_EQ(nvrtc_compile_count() - nvrtc, 1u);
  EXPECT_EQ(count(compile_store_counters().store_errors) - errors, 1u);
}

}  // namespace
}  // namespace torch_cudajit
