// torch_cudajit C++ tests: the disk cache (csrc/cache.h). Keys (what changes them and what
// does not), the file format (round trip, damage), hits and misses of compile_cached, and the
// size bound. Compiles to CUBIN for sm_90, so no GPU is needed.
#include "cache.h"
#include "cache_key.h"
#include "compile_cache.h"
#include "frontend.h"
#include "reading.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace torch_cudajit {
namespace {

using cjtest::make_spec_key;
using cjtest::make_temp_dir;
using cjtest::write_text;
using cjtest::tensor_sig;

const char* const kScale = cjtest::kScaleSource;

std::vector<InstantiationRequest> requests_for(TypeCode dtype) { return {cjtest::scale_request(dtype)}; }

CompileOptions options_with(std::vector<std::string> extra) {
  CompileOptions o;
  o.arch = 90;
  o.extra = std::move(extra);
  return o;
}

// Points the process-wide cache at a fresh folder for one test, then restores it.
class CacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = DiskCache::instance().settings();
    dir_ = make_temp_dir() + "/cache";
    DiskCache::instance().configure({true, dir_, int64_t(1) << 30});
  }
  void TearDown() override { DiskCache::instance().configure(saved_); }

  /// The record files of one kind: compiles (.cj), reflections (.cjr) or manifests (.cjm).
  std::vector<std::string> entry_files(const char* suffix = ".cj") const {
    return cjtest::files_with(dir_, suffix);
  }

  CacheSettings saved_;
  std::string dir_;
};

TEST_F(CacheTest, KeyIgnoresOptionOrderButNotOptions) {
  const auto program = read_program(kScale);
  const auto req = requests_for(TypeCode::kFloat);
  const std::string base = compile_key(*program, req, options_with({"-DA=1", "-DB=2"}));
  EXPECT_EQ(base.size(), 64u);
  EXPECT_EQ(compile_key(*program, req, options_with({"-DB=2", "-DA=1"})), base);
  struct Case {
    const char* what;
    std::string key;
  };
  CompileOptions debug = options_with({"-DA=1", "-DB=2"});
  debug.debug = true;
  CompileOptions sm80 = options_with({"-DA=1", "-DB=2"});
  sm80.arch = 80;
  CompileOptions cxx20 = options_with({"-DA=1", "-DB=2"});
  cxx20.std = "c++20";
  const Case changed[] = {
      {"another define", compile_key(*program, req, options_with({"-DA=1", "-DB=3"}))},
      {"debug", compile_key(*program, req, debug)},
      {"another architecture", compile_key(*program, req, sm80)},
      {"another standard", compile_key(*program, req, cxx20)},
      {"another specialization", compile_key(*program, requests_for(TypeCode::kDouble), options_with({"-DA=1", "-DB=2"}))},
      {"another source", compile_key(*read_program(std::string(kScale) + "\n// edited\n"), req, options_with({"-DA=1", "-DB=2"}))},
  };
  for (const auto& k : changed) {
    SCOPED_TRACE(k.what);
    EXPECT_NE(k.key, base);
  }
}

TEST_F(CacheTest, KeyFollowsIncludedHeadersAndIncludeOrder) {
  const std::string root = make_temp_dir();
  ASSERT_EQ(mkdir((root + "/a").c_str(), 0700), 0);
  ASSERT_EQ(mkdir((root + "/b").c_str(), 0700), 0);
  write_text(root + "/a/outer.h", "#include \"inner.h\"\n");
  write_text(root + "/a/inner.h", "#define V 1\n");
  write_text(root + "/b/outer.h", "#define V 2\n");
  const auto program = read_program("#include \"outer.h\"\n__global__ void k(float* o) { o[0] = V; }\n");
  const std::vector<InstantiationRequest> req = {{"k", make_spec_key(90, {tensor_sig(TypeCode::kFloat, 1)}), ""}};
  const std::string ab = compile_key(*program, req, options_with({"-I" + root + "/a", "-I" + root + "/b"}));
  EXPECT_EQ(compile_key(*program, req, options_with({"-I" + root + "/a", "-I" + root + "/b"})), ab);
  EXPECT_NE(compile_key(*program, req, options_with({"-I" + root + "/b", "-I" + root + "/a"})), ab);
  write_text(root + "/a/inner.h", "#define V 3\n");  // a header included by a header
  EXPECT_NE(compile_key(*program, req, options_with({"-I" + root + "/a", "-I" + root + "/b"})), ab);
}

TEST_F(CacheTest, SerializationRoundTrips) {
  const auto program = read_program(kScale);
  CompiledProgram compiled = program->compile(requests_for(TypeCode::kHalf), options_with({}));
  const std::string payload = serialize_compiled("k1", compiled);
  auto back = deserialize_compiled("k1", payload);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->target, compiled.target);
  EXPECT_EQ(back->cubin, compiled.cubin);
  EXPECT_EQ(back->ptx, compiled.ptx);
  EXPECT_EQ(back->options, compiled.options);
  EXPECT_EQ(back->lowered_names, compiled.lowered_names);
  EXPECT_EQ(back->name_expressions, compiled.name_expressions);
  ASSERT_EQ(back->probes.size(), compiled.probes.size());
  for (size_t i = 0; i < compiled.probes[0].size(); ++i) {
    SCOPED_TRACE("probe " + std::to_string(i));
    EXPECT_EQ(back->probes[0][i].code, compiled.probes[0][i].code);
    EXPECT_EQ(back->probes[0][i].size, compiled.probes[0][i].size);
    EXPECT_EQ(back->probes[0][i].align, compiled.probes[0][i].align);
  }
  EXPECT_FALSE(deserialize_compiled("k2", payload).has_value()) << "stored under another key";
  for (size_t cut : {size_t(0), size_t(10), payload.size() / 2, payload.size() - 1}) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    EXPECT_FALSE(deserialize_compiled("k1", payload.substr(0, cut)).has_value());
  }
}

TEST_F(CacheTest, CompileCachedMissesThenHits) {
  const auto program = read_program(kScale);
  const auto req = requests_for(TypeCode::kFloat);
  const uint64_t hits = DiskCache::instance().counters().hits, misses = DiskCache::instance().counters().misses;
  const CompiledInstance first = compile_cached(*program, req, options_with({}), true).at(0);
  EXPECT_EQ(first.outcome, CacheOutcome::kMiss);
  const CompiledInstance second = compile_cached(*program, req, options_with({}), true).at(0);
  EXPECT_EQ(second.outcome, CacheOutcome::kHit);
  EXPECT_EQ(second.index, 0u);
  EXPECT_EQ(second.compiled->cubin, first.compiled->cubin);
  EXPECT_EQ(second.compiled->lowered_names, first.compiled->lowered_names);
  EXPECT_EQ(compile_cached(*program, req, options_with({}), false).at(0).outcome,
            CacheOutcome::kBypassed);
  EXPECT_EQ(DiskCache::instance().counters().hits - hits, 1u);
  EXPECT_EQ(DiskCache::instance().counters().misses - misses, 1u);
  ASSERT_EQ(entry_files().size(), 1u);
  struct stat st;
  ASSERT_EQ(stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(CacheTest, DamagedFilesAreIgnored) {
  const auto program = read_program(kScale);
  const auto req = requests_for(TypeCode::kFloat);
  DiskCache& c = DiskCache::instance();
  const std::string key = compile_key(*program, req, options_with({}));
  compile_cached(*program, req, options_with({}), true);
  const std::string path = dir_ + "/" + key + ".cj";
  std::string good;
  {
    std::ifstream f(path, std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  ASSERT_GT(good.size(), 100u);
  std::string flipped = good;
  flipped[good.size() - 7] ^= 0x5a;
  const std::pair<const char*, std::string> cases[] = {
      {"empty", ""}, {"truncated", good.substr(0, good.size() - 1)},
      {"flipped byte", flipped}, {"foreign", std::string(200, 'z')}};
  for (const auto& [what, bytes] : cases) {
    SCOPED_TRACE(what);
    write_text(path, bytes);
    EXPECT_FALSE(c.load(key).has_value());
  }
  write_text(path, good);
  EXPECT_TRUE(c.load(key).has_value());
  chmod(path.c_str(), 0666);
  EXPECT_FALSE(c.load(key).has_value()) << "writable by others";
}

TEST(RecordFrame, RoundTripsAndNamesEachDamage) {
  const std::string payload = std::string("record\0bytes", 12);
  const std::string framed = frame_record(payload);
  std::string problem;
  ASSERT_EQ(unframe_record(framed, &problem), payload);
  struct Case {
    const char* name;
    std::string bytes;
    const char* problem;
  };
  std::string flipped = framed;
  flipped.back() ^= 1;
  std::string version = framed;
  version[8] ^= 1;
  const std::vector<Case> cases = {
      {"empty", "", "is truncated or not a torch_cudajit cache file"},
      {"foreign magic", "X" + framed.substr(1), "is truncated or not a torch_cudajit cache file"},
      {"short payload", framed.substr(0, framed.size() - 1), "is truncated"},
      {"long payload", framed + "x", "is truncated"},
      {"flipped payload bit", flipped, "is corrupted (its checksum does not match)"},
      {"other format version", version, "has another cache format version"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    problem.clear();
    EXPECT_FALSE(unframe_record(c.bytes, &problem).has_value());
    EXPECT_EQ(problem, c.problem);
  }
}

TEST_F(CacheTest, StoreHoldsAnyBytesUnderAKey) {
  DiskCache& c = DiskCache::instance();
  const std::string key(64, 'a');
  const std::string record("\0binary\xff record\n", 18);
  EXPECT_FALSE(c.load(key).has_value());
  c.store(key, record);
  const std::optional<std::string> back = c.load(key);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, record);
}

TEST_F(CacheTest, RecordOfAnotherKindIsCompiledAgainAndReplaced) {
  // A file that passes the store's checks but holds no compile of this program.
  const auto program = read_program(kScale);
  const auto req = requests_for(TypeCode::kFloat);
  const std::string key = compile_key(*program, req, options_with({}));
  DiskCache& c = DiskCache::instance();
  c.store(key, "not a compile record");
  const CompiledInstance compiled = compile_cached(*program, req, options_with({}), true).at(0);
  EXPECT_EQ(compiled.outcome, CacheOutcome::kMiss);
  const std::optional<std::string> stored = c.load(key);
  ASSERT_TRUE(stored.has_value());
  ASSERT_TRUE(deserialize_compiled(key, *stored).has_value());
  EXPECT_EQ(deserialize_compiled(key, *stored)->lowered_names, compiled.compiled->lowered_names);
  EXPECT_EQ(compile_cached(*program, req, options_with({}), true).at(0).outcome, CacheOutcome::kHit);
}

// Three dtypes asked together.
std::vector<InstantiationRequest> three_dtypes() {
  std::vector<InstantiationRequest> out;
  for (TypeCode t : {TypeCode::kFloat, TypeCode::kDouble, TypeCode::kInt32})
    out.push_back(requests_for(t)[0]);
  return out;
}

TEST_F(CacheTest, BatchCompilesOnceAndEachKeyFindsItsInstance) {
  const auto program = read_program(kScale);
  const auto reqs = three_dtypes();
  const uint64_t compiles = nvrtc_compile_count();
  const std::vector<CompiledInstance> batch = compile_cached(*program, reqs, options_with({}), true);
  EXPECT_EQ(nvrtc_compile_count() - compiles, 1u) << "one NVRTC program for the batch";
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_EQ(entry_files().size(), 4u) << "the batch, and a reference under each key";
  for (size_t i = 0; i < batch.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(batch[i].outcome, CacheOutcome::kMiss);
    EXPECT_EQ(batch[i].compiled, batch[0].compiled) << "one program holds them all";
    EXPECT_EQ(batch[i].index, i);
    // Each key alone finds its instance in the batch, spelled as a compile of it alone is.
    const CompiledInstance alone = compile_cached(*program, {reqs[i]}, options_with({}), true).at(0);
    EXPECT_EQ(alone.outcome, CacheOutcome::kHit);
    EXPECT_EQ(alone.index, i);
    EXPECT_EQ(alone.compiled->lowered_names[i], batch[0].compiled->lowered_names[i]);
    EXPECT_EQ(alone.compiled->name_expressions[i],
              program->generate({reqs[i]}).instantiations[0].kernel_expression);
  }
  EXPECT_EQ(nvrtc_compile_count() - compiles, 1u) << "the hits compiled nothing";
}

TEST_F(CacheTest, BatchCompilesOnlyWhatTheCacheLacks) {
  const auto program = read_program(kScale);
  const auto reqs = three_dtypes();
  compile_cached(*program, {reqs[1]}, options_with({}), true);
  const uint64_t compiles = nvrtc_compile_count();
  const std::vector<CompiledInstance> got = compile_cached(*program, reqs, options_with({}), true);
  EXPECT_EQ(nvrtc_compile_count() - compiles, 1u);
  EXPECT_EQ(got[0].outcome, CacheOutcome::kMiss);
  EXPECT_EQ(got[1].outcome, CacheOutcome::kHit);
  EXPECT_EQ(got[2].outcome, CacheOutcome::kMiss);
  EXPECT_EQ(got[0].compiled, got[2].compiled);
  EXPECT_EQ(got[2].index, 1u) << "the second of the two compiled together";
  EXPECT_NE(got[1].compiled, got[0].compiled);
}

TEST_F(CacheTest, ReferenceToAMissingBatchIsAMiss) {
  const auto program = read_program(kScale);
  const auto reqs = three_dtypes();
  const std::vector<CompiledInstance> batch = compile_cached(*program, reqs, options_with({}), true);
  const GeneratedSource generated = program->generate(reqs);
  const std::string batch_key =
      compile_key(*program, generated, options_with({}),
                  program_dependencies(*program, options_with({})));
  ASSERT_EQ(unlink((dir_ + "/" + batch_key + ".cj").c_str()), 0) << "evicted";
  const CompiledInstance again = compile_cached(*program, {reqs[2]}, options_with({}), true).at(0);
  EXPECT_EQ(again.outcome, CacheOutcome::kMiss);
  EXPECT_EQ(again.index, 0u);
  // Compiled alone, it now has a record of its own.
  const std::string key = compile_key(*program, {reqs[2]}, options_with({}));
  const std::optional<std::string> stored = DiskCache::instance().load(key);
  ASSERT_TRUE(stored.has_value());
  EXPECT_TRUE(deserialize_compiled(key, *stored).has_value());
  // A reference whose index is past the batch, or whose batch holds another instantiation
  // there, is a miss too.
  DiskCache::instance().store(batch_key, serialize_compiled(batch_key, *batch[0].compiled));
  for (size_t index : {size_t(1), size_t(7)}) {
    SCOPED_TRACE("index " + std::to_string(index));
    DiskCache::instance().store(key, serialize_reference(key, batch_key, index));
    EXPECT_EQ(compile_cached(*program, {reqs[2]}, options_with({}), true).at(0).outcome,
              CacheOutcome::kMiss);
  }
}

TEST_F(CacheTest, SizeBoundEvictsLeastRecentlyUsed) {
  const auto program = read_program(kScale);
  compile_cached(*program, requests_for(TypeCode::kFloat), options_with({}), true);
  const auto files = entry_files();
  ASSERT_EQ(files.size(), 1u);
  struct stat st;
  ASSERT_EQ(stat(files[0].c_str(), &st), 0);
  DiskCache::instance().configure({true, dir_, st.st_size + st.st_size / 2});
  compile_cached(*program, requests_for(TypeCode::kDouble), options_with({}), true);
  EXPECT_EQ(entry_files().size(), 1u) << "room for one entry only";
  CacheInfo info = DiskCache::instance().info();
  EXPECT_EQ(info.entries, 1);
  EXPECT_LE(info.bytes, st.st_size + st.st_size / 2 + 4096);
  // The source's reflection record and manifest count against the bound as well: older than
  // the entry that did not fit, they went with it.
  EXPECT_TRUE(entry_files(".cjr").empty());
  EXPECT_TRUE(entry_files(".cjm").empty());
  compile_cached(*read_program(std::string(kScale) + "// another\n"), requests_for(TypeCode::kFloat),
                 options_with({}), true);
  EXPECT_FALSE(entry_files(".cjr").empty());
  CacheInfo cleared = DiskCache::instance().clear();
  EXPECT_GE(cleared.removed, 3);  // entries, reflection records and manifests
  EXPECT_TRUE(entry_files().empty());
  EXPECT_TRUE(entry_files(".cjr").empty());
  EXPECT_TRUE(entry_files(".cjm").empty());
}

// prune(0) leaves no record of any kind.
TEST_F(CacheTest, PruneToZeroRemovesEveryRecord) {
  compile_cached(*read_program(std::string(kScale) + "// prune\n"), requests_for(TypeCode::kFloat),
                 options_with({}), true);
  ASSERT_EQ(entry_files(".cjr").size(), 1u);
  ASSERT_EQ(entry_files(".cjm").size(), 1u);
  DiskCache::instance().prune(0);
  EXPECT_TRUE(entry_files().empty());
  EXPECT_TRUE(entry_files(".cjr").empty());
  EXPECT_TRUE(entry_files(".cjm").empty());
  EXPECT_EQ(DiskCache::instance().info().bytes, 0);
}

// A source read before is not parsed again: its reflection comes from the disk cache, under a
// key that changes with the source, its file name, the options the front end sees and the
// standard.
TEST_F(CacheTest, ReflectionIsReadFromTheCacheWithoutParsing) {
  const std::string src = std::string(kScale) + "\n// reflection cache\n";
  const uint64_t before = frontend_parse_count();
  const auto first = read_program(src);
  EXPECT_EQ(frontend_parse_count(), before + 1);
  const auto second = read_program(src);
  EXPECT_EQ(frontend_parse_count(), before + 1) << "the second read comes from the cache";
  EXPECT_EQ(second->reflection(), first->reflection());
  EXPECT_EQ(entry_files(".cjr").size(), 1u);
  struct Case {
    const char* what;
    std::string source, filename;
    std::vector<std::string> options;
    std::string std;
  };
  const Case cases[] = {
      {"another source", src + "// edited\n", "kernel.cu", {}, "c++17"},
      {"another file name", src, "other.cu", {}, "c++17"},
      {"a define", src, "kernel.cu", {"-DCJT_REFLECTION=1"}, "c++17"},
      {"another standard", src, "kernel.cu", {}, "c++20"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const uint64_t n = frontend_parse_count();
    const auto parsed = read_program(c.source, c.filename, c.options, c.std);
    EXPECT_EQ(frontend_parse_count(), n + 1);
    const auto cached = read_program(c.source, c.filename, c.options, c.std);
    EXPECT_EQ(frontend_parse_count(), n + 1);
    EXPECT_EQ(cached->reflection(), parsed->reflection());
  }
}

// An edit of a header the source includes (here one a header includes) parses again, and the
// reflection sees the edit: the parameter's type (a macro of the header) turns from a pointer
// into a number.
TEST_F(CacheTest, ReflectionFollowsIncludedHeaders) {
  const std::string inc = make_temp_dir();
  write_text(inc + "/types.h", "#include \"buffer.h\"\n");
  write_text(inc + "/buffer.h", "#define BUFFER float*\n");
  const std::string src = "#include \"types.h\"\n__global__ void k(BUFFER b) {}\n";
  const std::vector<std::string> options = {"-I" + inc};
  const auto as_pointer = read_program(src, "kernel.cu", options);
  ASSERT_EQ(as_pointer->kernel("k").params.size(), 1u);
  EXPECT_EQ(as_pointer->kernel("k").params[0].kind, ParamKind::kPointer);
  const uint64_t n = frontend_parse_count();
  EXPECT_EQ(read_program(src, "kernel.cu", options)->reflection(), as_pointer->reflection());
  EXPECT_EQ(frontend_parse_count(), n);
  write_text(inc + "/buffer.h", "#define BUFFER float\n");
  const auto as_number = read_program(src, "kernel.cu", options);
  EXPECT_EQ(frontend_parse_count(), n + 1);
  ASSERT_EQ(as_number->kernel("k").params.size(), 1u);
  EXPECT_EQ(as_number->kernel("k").params[0].kind, ParamKind::kScalar);
}

TEST_F(CacheTest, ReflectionIsParsedEveryTimeWithTheCacheDisabled) {
  DiskCache::instance().configure({false, dir_, int64_t(1) << 30});
  const std::string src = std::string(kScale) + "\n// cache disabled\n";
  const uint64_t n = frontend_parse_count();
  const auto first = read_program(src);
  const auto second = read_program(src);
  EXPECT_EQ(frontend_parse_count(), n + 2);
  EXPECT_EQ(second->reflection(), first->reflection());
}

// A damaged reflection record is ignored with a warning, parsed again and replaced.
TEST_F(CacheTest, DamagedReflectionRecordIsParsedAgainAndReplaced) {
  const std::string src = std::string(kScale) + "\n// damaged reflection\n";
  const auto first = read_program(src);
  const auto files = entry_files(".cjr");
  ASSERT_EQ(files.size(), 1u);
  write_text(files[0], "not a record");
  const uint64_t n = frontend_parse_count();
  const auto second = read_program(src);
  EXPECT_EQ(frontend_parse_count(), n + 1);
  EXPECT_EQ(second->reflection(), first->reflection());
  const auto third = read_program(src);
  EXPECT_EQ(frontend_parse_count(), n + 1) << "the record was replaced";
}

}  // namespace
}  // namespace torch_cudajit
