// torch_cudajit C++ tests: ahead-of-time caches. Read-only folders layered under the writable one
// (order, trust, damage, no writes), cache archives (what an import refuses, before writing
// anything) and the choice of records an export of named kernels makes. No GPU, no compile.
#include "cache.h"
#include "cache_archive.h"
#include "compile_cache.h"
#include "file_io.h"
#include "sha256.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace torch_cudajit {
namespace {

using cjtest::expect_throws;
using cjtest::files_with;
using cjtest::make_temp_dir;
using cjtest::write_text;

std::string key_of(char c) { return std::string(64, c); }

// A compile record holding kernels of these lowered names (nothing is compiled).
std::string compiled_record(const std::string& key, std::vector<std::string> lowered) {
  CompiledProgram c;
  c.target = "sm_90";
  c.has_cubin = true;
  c.cubin = "cubin";
  c.name_expressions = lowered;
  c.probes.resize(lowered.size());
  c.lowered_names = std::move(lowered);
  return serialize_compiled(key, c);
}

int64_t mtime_ns(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// Gives the process-wide cache a writable folder and two read-only ones for one test.
class LayeredCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = DiskCache::instance().settings();
    const std::string root = make_temp_dir();
    writable_ = root + "/writable";
    first_ = root + "/image1";
    second_ = root + "/image2";
    for (const std::string& d : {writable_, first_, second_}) ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  }
  void TearDown() override { DiskCache::instance().configure(saved_); }

  void use(bool writable) {
    DiskCache::instance().configure({true, writable_, int64_t(1) << 30, {first_, second_}, writable});
  }
  static void put(const std::string& dir, const std::string& key, const std::string& payload) {
    ASSERT_EQ(detail::write_file_atomically(dir, key + ".cj", frame_record(payload)), "");
  }

  CacheSettings saved_;
  std::string writable_, first_, second_;
};

TEST_F(LayeredCacheTest, LoadsLookInTheWritableFolderThenEachReadOnlyOneInOrder) {
  struct Case {
    const char* name;
    bool writable;                             // the writable folder is used
    std::optional<std::string> in_writable;    // the record's payload there
    std::optional<std::string> in_first;       // in the first read-only folder ("!": damaged)
    std::optional<std::string> in_second;
    mode_t first_mode;                         // the first read-only file's mode
    std::optional<std::string> expected;
  };
  const std::vector<Case> cases = {
      {"writable first", true, "W", "R1", "R2", 0444, "W"},
      {"read-only folders in order", true, std::nullopt, "R1", "R2", 0444, "R1"},
      {"second read-only folder", true, std::nullopt, std::nullopt, "R2", 0444, "R2"},
      {"damaged read-only record skipped", true, std::nullopt, "!", "R2", 0444, "R2"},
      {"group-writable read-only file refused", true, std::nullopt, "R1", "R2", 0664, "R2"},
      {"world-writable read-only file refused", true, std::nullopt, "R1", std::nullopt, 0646,
       std::nullopt},
      {"writable folder not used", false, "W", "R1", "R2", 0444, "R1"},
      {"nowhere", true, std::nullopt, std::nullopt, std::nullopt, 0444, std::nullopt},
  };
  char k = 'a';
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string key = key_of(k++);  // one key per case: warnings are given once per file
    if (c.in_writable) put(writable_, key, *c.in_writable);
    if (c.in_first) {
      put(first_, key, *c.in_first);
      if (*c.in_first == "!") write_text(first_ + "/" + key + ".cj", "damaged");
      ASSERT_EQ(::chmod((first_ + "/" + key + ".cj").c_str(), c.first_mode), 0);
    }
    if (c.in_second) put(second_, key, *c.in_second);
    std::vector<int64_t> times;
    for (const std::string& d : {first_, second_})
      for (const std::string& f : files_with(d, ".cj")) times.push_back(mtime_ns(f));
    use(c.writable);
    DiskCache& cache = DiskCache::instance();
    EXPECT_TRUE(cache.usable());
    EXPECT_EQ(cache.can_store(), c.writable);
    EXPECT_EQ(cache.load(key), c.expected);
    // A read-only hit touches nothing: no modification time, no lock file.
    std::vector<int64_t> after;
    for (const std::string& d : {first_, second_})
      for (const std::string& f : files_with(d, ".cj")) after.push_back(mtime_ns(f));
    EXPECT_EQ(after, times);
  }
  for (const std::string& d : {first_, second_}) EXPECT_TRUE(files_with(d, ".lock").empty());
}

TEST_F(LayeredCacheTest, WithoutAWritableFolderNothingIsWrittenLockedOrRemoved) {
  use(false);
  DiskCache& cache = DiskCache::instance();
  put(first_, key_of('1'), "image");
  {
    DiskCache::KeyLock lock = cache.lock(key_of('2'));
    cache.store(key_of('2'), "compiled");
    cache.store_reflection(key_of('3'), "reflection");
  }
  EXPECT_FALSE(cache.load(key_of('2')).has_value());
  for (const std::string& d : {writable_, first_, second_}) {
    SCOPED_TRACE(d);
    EXPECT_TRUE(files_with(d, ".lock").empty());
    EXPECT_TRUE(files_with(d, ".cjr").empty());
    EXPECT_EQ(files_with(d, ".cj").size(), d == first_ ? 1u : 0u);
  }
  // clear and prune act on the writable folder alone.
  use(true);
  cache.store(key_of('4'), "mine");
  cache.clear();
  cache.prune(0);
  EXPECT_EQ(files_with(first_, ".cj").size(), 1u);
  EXPECT_TRUE(files_with(writable_, ".cj").empty());
  EXPECT_EQ(cache.load(key_of('1')), "image");
}

TEST_F(LayeredCacheTest, ReadOnlyFoldersMustBeTrusted) {
  struct Case {
    const char* name;
    mode_t mode;
    const char* problem;  // "" when the folder is used
  };
  const std::vector<Case> cases = {
      {"private", 0755, ""},
      {"read-only", 0555, ""},
      {"group-writable", 0775, "with mode 0775"},
      {"world-writable", 0777, "with mode 0777"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_EQ(::chmod(first_.c_str(), c.mode), 0);
    use(true);
    const std::vector<CacheInfo> info = DiskCache::instance().readonly_info();
    ASSERT_EQ(info.size(), 2u);
    EXPECT_EQ(info[0].dir, first_);
    CJ_EXPECT_CONTAINS(info[0].problem, c.problem);
    EXPECT_EQ(info[0].problem.empty(), std::string(c.problem).empty());
  }
  ASSERT_EQ(::chmod(first_.c_str(), 0755), 0);
  DiskCache::instance().configure({true, writable_, int64_t(1) << 30, {first_ + "/missing"}, true});
  CJ_EXPECT_CONTAINS(DiskCache::instance().readonly_info().at(0).problem,
                     "cannot be read (No such file or directory)");
}

// --- archives --------------------------------------------------------------------------------

TEST(CacheArchive, KernelNamesOfLoweredNames) {
  struct Case {
    const char* lowered;
    const char* name;
  };
  const std::vector<Case> cases = {
      {"_Z5scaleIfEvPT_", "scale"},
      {"_ZN2ns5shiftEPf", "ns::shift"},
      {"_ZN12_GLOBAL__N_11kEv", "(anonymous namespace)::k"},
      {"extern_c_kernel", "extern_c_kernel"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.lowered);
    EXPECT_EQ(kernel_name_of_lowered(c.lowered), c.name);
  }
}

// A framed, SHA-256-checked archive payload whose members are written field by field, so that
// members the encoder would never write can be tried.
struct RawMember {
  std::string name, kind, digest, bytes;
};
std::string raw_archive(const std::vector<RawMember>& members) {
  std::string payload;
  detail::put_str(payload, "torch_cudajit cache archive");
  detail::put_u64(payload, members.size());
  for (const RawMember& m : members) {
    detail::put_str(payload, m.name);
    detail::put_str(payload, m.kind);
    detail::put_str(payload, m.digest.empty() ? sha256_hex(m.bytes) : m.digest);
    detail::put_str(payload, m.bytes);
  }
  return detail::frame_bytes("TCJARCHV", kArchiveFormatVersion, payload);
}

TEST(CacheArchive, ImportRefusesEachDamage) {
  const std::string a = key_of('a'), b = key_of('b');
  const std::string entry = frame_record(compiled_record(a, {"_Z5scaleIfEvPT_"}));
  const std::string reference = frame_record(serialize_reference(b, a, 0));
  const std::string good = encode_archive({{a + ".cj", entry}, {b + ".cj", reference}});
  ASSERT_EQ(decode_archive(good, "good.cjar").size(), 2u);
  std::string flipped = good;
  flipped[good.size() / 2] ^= 1;
  std::string damaged_entry = entry;
  damaged_entry.back() ^= 1;
  struct Case {
    const char* name;
    std::string bytes;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"flipped byte", flipped, "'x.cjar' is corrupted (its checksum does not match)"},
      {"truncated", good.substr(0, good.size() - 3), "'x.cjar' is truncated"},
      {"a cache record", entry, "is truncated or not a torch_cudajit cache archive"},
      {"parent folder", raw_archive({{"../x", "entry", "", entry}}),
       "member 1 ('../x') whose name is not a cache record's"},
      {"absolute path", raw_archive({{"/tmp/" + a + ".cj", "entry", "", entry}}),
       "whose name is not a cache record's"},
      {"lock file", raw_archive({{a + ".lock", "entry", "", entry}}),
       "whose name is not a cache record's"},
      {"hidden temporary", raw_archive({{"." + a + ".1.2.tmp", "entry", "", entry}}),
       "whose name is not a cache record's"},
      {"twice", raw_archive({{a + ".cj", "entry", "", entry}, {a + ".cj", "entry", "", entry}}),
       "holds member 2 ('" + std::string(a) + ".cj') twice"},
      {"kind", raw_archive({{a + ".cj", "reflection", "", entry}}),
       "as kind 'reflection', but its name makes it an entry"},
      {"digest", raw_archive({{a + ".cj", "entry", std::string(64, '0'), entry}}),
       "whose bytes do not match their SHA-256 in the archive's list"},
      {"damaged member", raw_archive({{a + ".cj", "entry", "", damaged_entry}}),
       "that is corrupted (its checksum does not match)"},
      {"entry under another key", raw_archive({{b + ".cj", "entry", "", entry}}),
       "does not hold a compiled kernel or a batch reference stored under its key"},
      {"not a manifest", raw_archive({{a + ".cjm", "manifest", "", entry}}),
       "that is not a manifest of its key"},
      {"not a reflection", raw_archive({{a + ".cjr", "reflection", "", entry}}),
       "that is not a reflection record of its key"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string message =
        expect_throws<c10::ValueError>([&] { decode_archive(c.bytes, "x.cjar"); });
    CJ_EXPECT_CONTAINS(message, c.message);
    CJ_EXPECT_CONTAINS(message, "nothing was imported");
  }
}

TEST_F(LayeredCacheTest, ExportOfNamedKernelsTakesTheirEntriesAndBatches) {
  use(true);
  const std::string single = key_of('1'), batch = key_of('2'), first = key_of('3'),
                    second = key_of('4');
  DiskCache& cache = DiskCache::instance();
  cache.store(single, compiled_record(single, {"_ZN2ns5shiftEPf"}));
  cache.store(batch, compiled_record(batch, {"_Z5scaleIfEvPT_", "_Z5otherIdEvPT_"}));
  cache.store(first, serialize_reference(first, batch, 0));
  cache.store(second, serialize_reference(second, batch, 1));
  const std::string archive = make_temp_dir() + "/a.cjar";
  struct Case {
    std::vector<std::string> kernels;
    std::vector<std::string> members;  // the keys exported
  };
  const std::vector<Case> cases = {
      {{"scale"}, {batch, first}},
      {{"other"}, {batch, second}},
      {{"shift"}, {single}},
      {{"ns::shift"}, {single}},
      {{"shift", "other"}, {single, batch, second}},
      {{}, {single, batch, first, second}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.kernels.empty() ? "everything" : c.kernels[0]);
    const ArchiveSummary s = export_cache_archive(archive, c.kernels);
    std::string bytes;
    ASSERT_TRUE(detail::read_file(archive, bytes));
    std::vector<std::string> keys;
    for (const ArchiveMember& m : decode_archive(bytes, archive)) keys.push_back(m.name.substr(0, 64));
    std::vector<std::string> expected = c.members;
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(keys, expected);
    EXPECT_EQ(s.entries, int64_t(expected.size()));
  }
  CJ_EXPECT_CONTAINS(expect_throws<c10::ValueError>([&] { export_cache_archive(archive, {"ns"}); }),
                     "no compiled entry holds a kernel named 'ns' in the cache folder");
  // An import writes every record, framed as the store frames them.
  export_cache_archive(archive, {});
  const std::string target = make_temp_dir() + "/imported";
  const ArchiveSummary s = import_cache_archive(archive, target);
  EXPECT_EQ(s.entries, 4);
  EXPECT_EQ(s.kernels, (std::vector<std::string>{"ns::shift", "other", "scale"}));
  EXPECT_EQ(files_with(target, ".cj").size(), 4u);
  DiskCache::instance().configure({true, target, int64_t(1) << 30});
  EXPECT_EQ(DiskCache::instance().load(first), serialize_reference(first, batch, 0));
}

}  // namespace
}  // namespace torch_cudajit
