// torch_cudajit C++ tests: excerpts of a source for error messages (csrc/excerpt.h): the lines
// around each error, numbered, with "..." where lines are left out; the error lines NVRTC's
// log names for one file.
#include "excerpt.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace torch_cudajit::detail {
namespace {

// "line 1\n" ... "line n\n".
std::string lines_source(size_t n) {
  std::string s;
  for (size_t i = 1; i <= n; ++i) s += "line " + std::to_string(i) + "\n";
  return s;
}

TEST(ExcerptTest, ShowsTheLinesAroundEachError) {
  struct Case {
    const char* what;
    size_t lines;
    std::vector<size_t> errors;
    size_t context;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"one error in the middle", 12, {6}, 1,
       "  ...\n 5 | line 5\n 6 | line 6\n 7 | line 7\n  ...\n"},
      {"first line", 12, {1}, 2, " 1 | line 1\n 2 | line 2\n 3 | line 3\n  ...\n"},
      {"last line", 9, {9}, 1, "  ...\n8 | line 8\n9 | line 9\n"},
      {"overlapping windows merge, repeats and order do not matter", 20, {10, 8, 10}, 1,
       "  ...\n 7 | line 7\n 8 | line 8\n 9 | line 9\n10 | line 10\n11 | line 11\n  ...\n"},
      {"apart windows are separated", 30, {5, 20}, 0,
       "  ...\n 5 | line 5\n  ...\n20 | line 20\n  ...\n"},
      {"a line past the end is ignored", 3, {7}, 1, ""},
      {"no error: a short source whole", 2, {}, 2, "1 | line 1\n2 | line 2\n"},
      {"no error: a long source not at all", kWholeSourceLines + 1, {}, 2, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(source_excerpt(lines_source(c.lines), c.errors, c.context), c.expected);
  }
}

TEST(ExcerptTest, NumbersLinesLikeTheCompiler) {
  EXPECT_EQ(numbered_lines("a\nb\nc", 2, 3), "2 | b\n3 | c\n");
  EXPECT_EQ(numbered_lines(lines_source(100), 99, std::string::npos), " 99 | line 99\n100 | line 100\n");
}

TEST(ExcerptTest, FindsTheErrorLinesOfOneFile) {
  struct Case {
    const char* what;
    std::string log;
    std::vector<size_t> expected;
  };
  const std::vector<Case> cases = {
      {"errors in the file", "kernel.cu(3): error: x\nkernel.cu(12): error: y\n", {3, 12}},
      {"warnings are not errors", "kernel.cu(4): warning #177-D: unused\n", {}},
      {"another file's errors are not the file's", "other.cuh(7): error: z\n", {}},
      {"the generated part is not the file", "torch_cudajit_generated(40): error: w\n", {}},
      {"catastrophic errors count", "kernel.cu(2): catastrophic error: cannot open\n", {2}},
      {"no digits", "kernel.cu(x): error: q\n", {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(nvrtc_error_lines(c.log, "kernel.cu"), c.expected);
  }
}

TEST(ExcerptTest, MapsLineDirectivesBackToTheSource) {
  // A whole file with a header written in: NVRTC names the header's lines and the file's lines
  // after it; the excerpt shows the source's own lines.
  const std::string source =
      "#include <x.h>\n"              // 1
      "#line 1 \"/p/common.h\"\n"  // 2
      "int a;\n"                      // 3: common.h line 1
      "int b;\n"                      // 4: common.h line 2
      "#line 2 \"/p/main.cu\"\n"   // 5
      "int c;\n"                      // 6: main.cu line 2
      "int d;\n";                     // 7: main.cu line 3
  struct Case {
    const char* what;
    std::string log;
    std::vector<size_t> expected;
  };
  const std::vector<Case> cases = {
      {"a header's line", "/p/common.h(2): error: x\n", {4}},
      {"the file's line after the header", "/p/main.cu(3): error: y\n", {7}},
      {"a line no directive names", "/p/other.h(1): error: z\n", {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(nvrtc_error_lines(c.log, "/p/main.cu", source), c.expected);
  }
}

}  // namespace
}  // namespace torch_cudajit::detail
