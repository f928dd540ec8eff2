// torch_cudajit C++ tests: one reader of the program (csrc/reading.h, dependencies.h). The front
// end reads a source with NVRTC's own arguments; the files it opened decide both the keys and
// the reflection, however a header is reached, and a record that is damaged or belongs to
// another source is never trusted. Compiles to CUBIN for sm_90, so no GPU is needed.
#include "cache.h"
#include "cache_key.h"
#include "dependencies.h"
#include "file_io.h"
#include "frontend.h"
#include "reading.h"
#include "sha256.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace torch_cudajit {
namespace {

using cjtest::expect_throws;
using cjtest::files_with;
using cjtest::make_temp_dir;
using cjtest::write_text;
using cjtest::make_spec_key;
using cjtest::tensor_sig;

// Rewrites a file with text of the same size and gives it back its modification time, to the
// nanosecond: only its bytes tell the edit (Clang's own check of a PCH compares size and time).
void edit_in_place(const std::string& path, const std::string& text) {
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  ASSERT_EQ(static_cast<size_t>(st.st_size), text.size());
  write_text(path, text);
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

std::vector<InstantiationRequest> float_request(const std::string& kernel) {
  return {{kernel, make_spec_key(90, {tensor_sig(TypeCode::kFloat, 1)}), ""}};
}

CompileOptions sm90(std::vector<std::string> extra = {}) {
  CompileOptions o;
  o.arch = 90;
  o.extra = std::move(extra);
  return o;
}

// A fresh cache folder and working directory for each test.
class ReadingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = DiskCache::instance().settings();
    root_ = make_temp_dir();
    cache_ = root_ + "/cache";
    DiskCache::instance().configure({true, cache_, int64_t(1) << 30});
    char cwd[4096];
    ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
    cwd_ = cwd;
    ASSERT_EQ(chdir(root_.c_str()), 0);
  }
  void TearDown() override {
    EXPECT_EQ(chdir(cwd_.c_str()), 0);
    DiskCache::instance().configure(saved_);
  }

  CacheSettings saved_;
  std::string root_, cache_, cwd_;
};

// However the preprocessor reaches a header, an edit of it (same size, same time) changes the
// compile key in this process and in a later one, and the reflection read after the edit sees
// it: each header here defines the type of the kernel's parameter and a value.
TEST_F(ReadingTest, HeaderEditChangesKeyAndReflectionHoweverItIsReached) {
  struct Case {
    const char* what;
    std::map<std::string, std::string> files;  // relative to the working directory
    std::string source, filename;
    std::vector<std::string> options;  // "@" stands for the working directory
    std::string header;                // the file edited
  };
  const std::string kType = "#define REAL float\n#define V 1\n";
  const Case cases[] = {
      {"include_next", {{"a/x.h", "#include_next <x.h>\n"}, {"b/x.h", kType}},
       "#include <x.h>\n__global__ void k(REAL* o) {}\n", "kernel.cu", {"-I@/a", "-I@/b"}, "b/x.h"},
      {"digraph", {{"v.h", kType}}, "%:include \"v.h\"\n__global__ void k(REAL* o) {}\n",
       "kernel.cu", {}, "v.h"},
      {"raw string holding /*",
       {{"v.h", kType}},
       "const char* s = R\"(\n/*\n)\";\n#include \"v.h\"\n__global__ void k(REAL* o) {}\n",
       "kernel.cu", {}, "v.h"},
      {"the program's folder", {{"sub/v.h", kType}},
       "#include \"v.h\"\n__global__ void k(REAL* o) {}\n", "sub/kernel.cu", {}, "sub/v.h"},
      {"the working directory", {{"v.h", kType}},
       "#include \"v.h\"\n__global__ void k(REAL* o) {}\n", "kernel.cu", {}, "v.h"},
      {"a computed include", {{"v.h", kType}},
       "#define HEADER \"v.h\"\n#include HEADER\n__global__ void k(REAL* o) {}\n", "kernel.cu",
       {}, "v.h"},
      {"a header of a header", {{"inc/outer.h", "#include \"inner.h\"\n"}, {"inc/inner.h", kType}},
       "#include <outer.h>\n__global__ void k(REAL* o) {}\n", "kernel.cu", {"-I@/inc"},
       "inc/inner.h"},
      {"--pre-include", {{"pre.h", kType}}, "__global__ void k(REAL* o) {}\n", "kernel.cu",
       {"--pre-include=@/pre.h"}, "pre.h"},
      {"-include", {{"pre.h", kType}}, "__global__ void k(REAL* o) {}\n", "kernel.cu",
       {"-include", "@/pre.h"}, "pre.h"},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string dir = root_ + "/case" + std::to_string(n++);
    ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
    ASSERT_EQ(chdir(dir.c_str()), 0);
    for (const auto& [path, text] : c.files) {
      const size_t slash = path.rfind('/');
      if (slash != std::string::npos) mkdir((dir + "/" + path.substr(0, slash)).c_str(), 0700);
      write_text(dir + "/" + path, text);
    }
    std::vector<std::string> options;
    for (std::string o : c.options) {
      const size_t at = o.find('@');
      if (at != std::string::npos) o.replace(at, 1, dir);
      options.push_back(o);
    }
    // A distinct source per case, so that no case reads another's records.
    const std::string source = c.source + "// " + c.what + "\n";
    const auto before = read_program(source, c.filename, options, "c++17", 90);
    ASSERT_EQ(before->kernel("k").params.size(), 1u);
    EXPECT_EQ(before->kernel("k").params[0].element, "float");
    const std::string key = compile_key(*before, float_request("k"), sm90(options));
    ASSERT_EQ(key.size(), 64u);
    EXPECT_EQ(compile_key(*read_program(source, c.filename, options, "c++17", 90), float_request("k"),
                          sm90(options)),
              key)
        << "a second reading of unchanged files gives the same key";
    // An edit of the value: the same declarations, another program.
    edit_in_place(dir + "/" + c.header, "#define REAL float\n#define V 2\n");
    uint64_t parses = frontend_parse_count();
    const std::string edited = compile_key(*before, float_request("k"), sm90(options));
    EXPECT_NE(edited, key) << "this process sees the edit";
    EXPECT_EQ(frontend_parse_count(), parses + 1) << "the files changed: the source is read again";
    EXPECT_EQ(compile_key(*read_program(source, c.filename, options, "c++17", 90), float_request("k"),
                          sm90(options)),
              edited)
        << "a later reading finds the new manifest entry";
    EXPECT_EQ(frontend_parse_count(), parses + 1);
    // An edit of the type: a later reading sees the new declaration, and the kernel defined
    // before the edit is not compiled against it.
    edit_in_place(dir + "/" + c.header, "#define REAL short\n#define V 2\n");
    parses = frontend_parse_count();
    const auto after = read_program(source, c.filename, options, "c++17", 90);
    EXPECT_EQ(frontend_parse_count(), parses + 1);
    EXPECT_EQ(after->kernel("k").params[0].element, "short");
    EXPECT_NE(compile_key(*after, float_request("k"), sm90(options)), key);
    const std::string msg = expect_throws<c10::ValueError>(
        [&] { compile_key(*before, float_request("k"), sm90(options)); });
    CJ_EXPECT_CONTAINS(msg, "declares kernel 'k' differently when compiled for sm_90");
  }
}

// __CUDA_ARCH__ is the compile's: a kernel declared only for sm_90 and newer exists when the
// source is read for sm_90 and not for sm_80, and a compile for an architecture whose
// declarations differ from those the kernel was bound with says so.
TEST_F(ReadingTest, ArchitectureOfTheCompileDecidesTheDeclarations) {
  const std::string src =
      "#if __CUDA_ARCH__ >= 900\n__global__ void hopper(float* o) {}\n#endif\n"
      "__global__ void k(\n#if __CUDA_ARCH__ >= 900\nfloat* o\n#else\nint* o\n#endif\n) {}\n";
  const auto for90 = read_program(src, "kernel.cu", {}, "c++17", 90);
  const auto for80 = read_program(src, "kernel.cu", {}, "c++17", 80);
  EXPECT_EQ(for90->kernels().size(), 2u);
  EXPECT_EQ(for80->kernels().size(), 1u);
  EXPECT_EQ(for90->kernel("k").params[0].element, "float");
  EXPECT_EQ(for80->kernel("k").params[0].element, "int");
  CompileOptions o = sm90();
  o.arch = 80;
  const std::string msg = expect_throws<c10::ValueError>([&] { program_dependencies(*for90, o); });
  CJ_EXPECT_CONTAINS(msg, "differently when compiled for sm_80");
  // The same declarations for every architecture: a compile for another one reads it again
  // and goes on.
  const auto plain = read_program("__global__ void k(float* o) {\n#if __CUDA_ARCH__ >= 900\n o[0] = 1;\n#endif\n}\n",
                      "kernel.cu", {}, "c++17", 90);
  EXPECT_TRUE(program_dependencies(*plain, o).exact());
}

// A Program the reading layer did not make (built from its source and reflection) has no
// record: its compiles may use the disk cache, and its dependencies are read on each call,
// checked against its declarations like a read one's.
TEST_F(ReadingTest, ProgramFromItsReflectionReadsItsDependenciesAndChecksThem) {
  const std::string src =
      "__global__ void k(\n#if __CUDA_ARCH__ >= 900\nfloat* o\n#else\nint* o\n#endif\n) {}\n"
      "// not recorded\n";
  const auto read = read_program(src, "kernel.cu", {}, "c++17", 90);
  const Program copy = Program::from_reflection(src, "kernel.cu", read->reflection());
  EXPECT_TRUE(program_uses_cache(copy));
  EXPECT_FALSE(program_uses_cache(*read_program(src, "kernel.cu", {}, "c++17", 90, false)));
  const uint64_t n = frontend_parse_count();
  EXPECT_EQ(program_dependencies(copy, sm90()).files, program_dependencies(*read, sm90()).files);
  EXPECT_EQ(frontend_parse_count(), n) << "the manifest written when it was read gives them";
  CompileOptions o = sm90();
  o.arch = 80;
  const std::string msg = expect_throws<c10::ValueError>([&] { program_dependencies(copy, o); });
  CJ_EXPECT_CONTAINS(msg, "declares kernel 'k' differently when compiled for sm_80");
}

// -std given among the options is the one NVRTC uses (the last wins): the front end reads the
// source with it too.
TEST_F(ReadingTest, LastStandardAmongTheOptionsIsTheFrontEnds) {
  const std::string src =
      "#if __cplusplus > 201703L\n__global__ void cxx20(float* o) {}\n#endif\n"
      "__global__ void k(float* o) {}\n";
  EXPECT_EQ(read_program(src, "kernel.cu", {"-std=c++20"}, "c++17", 90)->kernels().size(), 2u);
  EXPECT_EQ(read_program(src, "kernel.cu", {"-std=c++20", "--std=c++17"}, "c++17", 90)->kernels().size(),
            1u);
  EXPECT_EQ(read_program(src, "kernel.cu", {}, "c++17", 90)->kernels().size(), 1u);
}

// A pre-included header edited without changing its size or time is read anew: the
// precompiled preamble that held the old one is not used again.
TEST_F(ReadingTest, PreambleIsRemadeWhenAPreIncludedHeaderChanges) {
  write_text(root_ + "/pre.h", "#define REAL float\n");
  const std::vector<std::string> options = {"--pre-include=" + root_ + "/pre.h"};
  for (bool cached : {false, true}) {
    SCOPED_TRACE(cached ? "cache" : "no cache");
    write_text(root_ + "/pre.h", "#define REAL float\n");
    const std::string src = std::string("__global__ void k(REAL* o) {}\n// ") +
                            (cached ? "cached" : "uncached") + "\n";
    EXPECT_EQ(read_program(src, "kernel.cu", options, "c++17", 90, cached)->kernel("k").params[0].element,
              "float");
    edit_in_place(root_ + "/pre.h", "#define REAL short\n");
    EXPECT_EQ(read_program(src, "kernel.cu", options, "c++17", 90, cached)->kernel("k").params[0].element,
              "short");
  }
}

// Records carry who they belong to: another source's reflection record copied over this one's
// is refused (and replaced), never read as this source's.
TEST_F(ReadingTest, ForeignReflectionRecordIsRefused) {
  const std::string a = "__global__ void k(const float* x, float* y) {}\n";
  const std::string b = "__global__ void k(float* x, const float* y) {}\n";
  const auto pa = read_program(a, "kernel.cu", {}, "c++17", 90);
  const auto a_files = files_with(cache_, ".cjr");
  ASSERT_EQ(a_files.size(), 1u);
  const std::string a_record = a_files[0];
  std::ifstream in(a_record, std::ios::binary);
  const std::string a_bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  DiskCache::instance().configure({true, root_ + "/cache2", int64_t(1) << 30});
  const auto pb = read_program(b, "kernel.cu", {}, "c++17", 90);
  const auto b_files = files_with(root_ + "/cache2", ".cjr");
  ASSERT_EQ(b_files.size(), 1u);
  write_text(b_files[0], a_bytes);  // a valid record with a valid checksum, of source a
  chmod(b_files[0].c_str(), 0600);
  const uint64_t n = frontend_parse_count();
  const auto again = read_program(b, "kernel.cu", {}, "c++17", 90);
  EXPECT_EQ(frontend_parse_count(), n + 1) << "the foreign record is refused";
  EXPECT_EQ(param_role(again->kernel("k").params[0]), ParamRole::kOutput);
  EXPECT_EQ(param_role(again->kernel("k").params[1]), ParamRole::kInput);
  EXPECT_EQ(again->reflection(), pb->reflection());
  const auto third = read_program(b, "kernel.cu", {}, "c++17", 90);
  EXPECT_EQ(frontend_parse_count(), n + 1) << "the record was replaced";
}

// A record with a valid checksum whose contents do not decode is refused, read again and
// replaced; it never blocks the source.
TEST_F(ReadingTest, UndecodableRecordIsReadAgainAndReplaced) {
  const std::string src = "__global__ void k(float* o, int n) {}\n";
  const auto first = read_program(src, "kernel.cu", {}, "c++17", 90);
  const auto files = files_with(cache_, ".cjr");
  ASSERT_EQ(files.size(), 1u);
  const std::string name = files[0].substr(files[0].rfind('/') + 1);
  const std::string key = name.substr(0, name.size() - 4);
  const std::string digest = source_digest("kernel.cu", src);
  struct Case {
    const char* what;
    std::string payload;
  };
  // A record of this key and source whose serialized kernels are `kernels`.
  auto record_with = [&](const std::string& kernels) {
    std::string out;
    for (const std::string& field : {std::string("torch_cudajit reflection record 1"), key, digest,
                                      libclang_identity(), sha256_hex(kernels), kernels})
      detail::put_str(out, field);
    return out;
  };
  const Case cases[] = {
      {"garbage", "not a record"},
      {"a huge kernel count", record_with("26:torch_cudajit reflection 18:50000000")},
      {"a count that is no number", record_with("26:torch_cudajit reflection 12:-1")},
      {"a count past 2^64", record_with("26:torch_cudajit reflection 120:18446744073709551616")},
      {"another key", encode_reflection_record(std::string(64, 'a'), digest, first->kernels())},
      {"another source", encode_reflection_record(key, std::string(64, 'b'), first->kernels())},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    DiskCache::instance().store_reflection(key, c.payload);
    const uint64_t n = frontend_parse_count();
    const auto again = read_program(src, "kernel.cu", {}, "c++17", 90);
    EXPECT_EQ(frontend_parse_count(), n + 1);
    EXPECT_EQ(again->reflection(), first->reflection());
    const auto third = read_program(src, "kernel.cu", {}, "c++17", 90);
    EXPECT_EQ(frontend_parse_count(), n + 1) << "the record was replaced";
  }
}

// Without the cache (use_cache false, as `cache=False` asks) no record of any kind is read or
// written.
TEST_F(ReadingTest, NoCacheTouchesNoRecord) {
  const std::string src = "__global__ void k(float* o) {}\n// no cache\n";
  const uint64_t n = frontend_parse_count();
  const auto first = read_program(src, "kernel.cu", {}, "c++17", 90, /*use_cache=*/false);
  const auto second = read_program(src, "kernel.cu", {}, "c++17", 90, /*use_cache=*/false);
  EXPECT_EQ(frontend_parse_count(), n + 2);
  EXPECT_TRUE(files_with(cache_, "").empty());
  EXPECT_FALSE(program_uses_cache(*second));
}

// Headers that resolve to something other than a regular file are refused before Clang opens
// them (a FIFO would block it, /dev/zero would be read without end).
TEST_F(ReadingTest, SpecialFilesAsHeadersAreRefused) {
  ASSERT_EQ(mkfifo((root_ + "/fifo.h").c_str(), 0600), 0);
  write_text(root_ + "/outer.h", "#include \"fifo.h\"\n");
  struct Case {
    const char* what;
    std::string source, expected;
  };
  const Case cases[] = {
      {"a FIFO", "#include \"fifo.h\"\n__global__ void k(float* o) {}\n", "(a FIFO)"},
      {"a FIFO through a header", "#include \"outer.h\"\n__global__ void k(float* o) {}\n",
       "(a FIFO)"},
      {"a device", "#include \"/dev/zero\"\n__global__ void k(float* o) {}\n",
       "'/dev/zero', which is not a regular file (a character device)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string msg =
        expect_throws<c10::ValueError>([&] { read_program(c.source, "kernel.cu", {}, "c++17", 90); });
    CJ_EXPECT_CONTAINS(msg, c.expected);
  }
}

// Declarations nested thousands of templates deep are read (libclang's own parse thread
// overflows its stack on them).
TEST_F(ReadingTest, DeeplyNestedDeclarationsAreRead) {
  for (int depth : {3000, 5000}) {
    SCOPED_TRACE(depth);
    std::string type = "float";
    for (int i = 0; i < depth; ++i) type = "W<" + type + ">";
    const std::string src = "template <class T> struct W {};\n__global__ void k(" + type +
                            " w, float* o) {}\n";
    const auto p = read_program(src, "kernel.cu", {}, "c++17", 90, /*use_cache=*/false);
    EXPECT_EQ(p->kernel("k").params.size(), 2u);
  }
}

// Dependencies: a digest per file, a same-size edit seen, manifests that round-trip and refuse
// damage.
TEST_F(ReadingTest, ManifestRoundTripsAndRefusesDamage) {
  write_text(root_ + "/h.h", "one\n");
  const std::vector<FileDigest> files = {{root_ + "/h.h", content_digest(root_ + "/h.h")}};
  EXPECT_TRUE(files_unchanged(files, ""));
  const std::string bytes = encode_manifest("key", {files, {}});
  auto back = decode_manifest("key", bytes);
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0], files);
  struct Case {
    const char* what;
    std::string key, bytes;
  };
  std::string huge = bytes;
  huge.replace(huge.size() - 8, 8, std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8));
  const Case bad[] = {
      {"another key", "other", bytes},
      {"truncated", "key", bytes.substr(0, bytes.size() - 3)},
      {"trailing bytes", "key", bytes + "x"},
      {"a huge count", "key", huge},
  };
  for (const Case& c : bad) {
    SCOPED_TRACE(c.what);
    EXPECT_FALSE(decode_manifest(c.key, c.bytes).has_value());
  }
  edit_in_place(root_ + "/h.h", "two\n");
  EXPECT_FALSE(files_unchanged(files, ""));
}

}  // namespace
}  // namespace torch_cudajit
