// Tests of the user's NVRTC options read by role (csrc/options.h): every spelling NVRTC takes
// lands in the same place, order is kept within a role, and nvJitLink gets its own spelling of
// the options that shape machine code; options that set the target architecture or name a
// standard NVRTC does not take are refused before anything is read.
#include "options.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace torch_cudajit {
namespace {

using Strings = std::vector<std::string>;

TEST(OptionsTest, EverySpellingLandsInItsRole) {
  struct Case {
    const char* what;
    Strings extra;
    Strings include_dirs, macros, pre_includes, others;
  };
  const Case cases[] = {
      {"attached short flags", {"-Ia", "-DX=1", "-UY"}, {"a"}, {"-DX=1", "-UY"}, {}, {}},
      {"separate short flags", {"-I", "a", "-D", "X=1", "-U", "Y"}, {"a"}, {"-DX=1", "-UY"}, {},
       {}},
      {"long flags with =", {"--include-path=a", "--define-macro=X", "--undefine-macro=Y"},
       {"a"}, {"-DX", "-UY"}, {}, {}},
      {"long flags, separate value", {"--include-path", "a", "--define-macro", "X"}, {"a"},
       {"-DX"}, {}, {}},
      {"pre-included files", {"--pre-include=p.h", "-include", "q.h", "--pre-include", "r.h"},
       {}, {}, {"p.h", "q.h", "r.h"}, {}},
      {"order kept within a role", {"-Ib", "-DX=1", "-Ia", "-UX", "-DX=2"}, {"b", "a"},
       {"-DX=1", "-UX", "-DX=2"}, {}, {}},
      {"others as given", {"--use_fast_math", "-lineinfo", "-Ia"}, {"a"}, {}, {},
       {"--use_fast_math", "-lineinfo"}},
      {"a flag with no value left is kept as given", {"-I"}, {}, {}, {}, {"-I"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const UserOptions got = parse_user_options(c.extra);
    EXPECT_EQ(got.include_dirs, c.include_dirs);
    EXPECT_EQ(got.macros, c.macros);
    EXPECT_EQ(got.pre_includes, c.pre_includes);
    EXPECT_EQ(got.others, c.others);
  }
}

TEST(OptionsTest, MachineCodeOptionsInNvJitLinkSpelling) {
  struct Case {
    const char* what;
    Strings extra, link_options;
  };
  const Case cases[] = {
      {"register limit, long", {"--maxrregcount=32"}, {"-maxrregcount=32"}},
      {"register limit, short", {"-maxrregcount=64"}, {"-maxrregcount=64"}},
      {"ptxas optimization level", {"--ptxas-options=-O1"}, {"-O1"}},
      {"fast math", {"--use_fast_math"},
       {"-ftz=true", "-prec-div=false", "-prec-sqrt=false", "-fma=true"}},
      {"preprocessor options do not reach the linker", {"-DX", "-Ia", "-lineinfo"}, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(parse_user_options(c.extra).link_options, c.link_options);
  }
}

TEST(OptionsTest, ArchitectureOptionsAreRefused) {
  struct Case {
    Strings options;
    const char* shown;  // the option as the message shows it
    const char* advice;
  };
  const Case cases[] = {
      {{"-arch=sm_80"}, "options[0] is '-arch=sm_80'", "pass arch='sm_80' to compile or precompile"},
      {{"-G", "--gpu-architecture=compute_80"}, "options[1] is '--gpu-architecture=compute_80'",
       "pass arch='sm_80'"},
      {{"-arch", "compute_80"}, "options[0] is '-arch', followed by 'compute_80'",
       "pass arch='sm_80'"},
      {{"--gpu-architecture", "sm_80"}, "options[0] is '--gpu-architecture', followed by 'sm_80'",
       "pass arch='sm_80'"},
      {{"-code=sm_90"}, "options[0] is '-code=sm_90'", "pass arch='sm_90'"},
      {{"-arch", "sm_90a"}, "options[0] is '-arch', followed by 'sm_90a'",
       "an architecture-specific target is written -arch=sm_90a (one option, with '=')"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.shown);
    const std::string msg =
        cjtest::expect_throws<c10::ValueError>([&] { detail::check_options(c.options); });
    CJ_EXPECT_CONTAINS(msg, c.shown);
    CJ_EXPECT_CONTAINS(msg, "which sets the target architecture; options cannot set it");
    CJ_EXPECT_CONTAINS(msg, "compile(..., arch=...) or precompile(..., arch=...)");
    CJ_EXPECT_CONTAINS(msg, c.advice);
  }
}

TEST(OptionsTest, StandardsNvrtcDoesNotTakeAreRefused) {
  for (const Strings& options :
       {Strings{"-std=gnu++17"}, Strings{"--std=c++99"}, Strings{"-std", "c++11"}}) {
    SCOPED_TRACE(options[0]);
    const std::string msg =
        cjtest::expect_throws<c10::ValueError>([&] { detail::check_options(options); });
    CJ_EXPECT_CONTAINS(msg, "options[0] is '" + options[0]);
    CJ_EXPECT_CONTAINS(msg, "the C++ standard must be one of 'c++14', 'c++17', 'c++20'");
  }
  const std::string gnu =
      cjtest::expect_throws<c10::ValueError>([] { detail::check_options({"-std=gnu++20"}); });
  CJ_EXPECT_CONTAINS(gnu, "no GNU dialect");
  CJ_EXPECT_CONTAINS(gnu, "Pass std='c++20' to jit instead.");
}

TEST(OptionsTest, StandardIsReadInEverySpelling) {
  for (const Strings& o : {Strings{"-std=c++17"}, Strings{"--std=c++17"}, Strings{"-std", "c++17"},
                           Strings{"--std", "c++17", "-DX"}}) {
    SCOPED_TRACE(o[0] + (o.size() > 1 ? " " + o[1] : ""));
    const UserOptions parsed = parse_user_options(o);
    EXPECT_EQ(parsed.std, "c++17");
    EXPECT_EQ(parsed.others, Strings{"-std=c++17"});  // one spelling reaches the compilers
    EXPECT_NO_THROW(detail::check_options(o));
  }
}

TEST(OptionsTest, OtherOptionsPass) {
  for (const std::string& standard : supported_standards())
    detail::check_options({"-std=" + standard, "--std=" + standard});
  // Options NVRTC takes that only a compile can judge are left to it.
  detail::check_options({"-G", "-lineinfo", "-DARCH=sm_80", "--use_fast_math", "-Iarch",
                         "--maxrregcount=32", "--extra-device-vectorization"});
}

}  // namespace
}  // namespace torch_cudajit

namespace torch_cudajit {
namespace {

TEST(OptionsTest, ArchitectureSpecificTargetsAreTakenAsOneOption) {
  struct Case {
    std::vector<std::string> options;
    std::string variant;
  };
  const std::vector<Case> cases = {
      {{"-arch=sm_90a"}, "sm_90a"},
      {{"-DX", "--gpu-architecture=sm_100f"}, "sm_100f"},
      {{"-arch=sm_90"}, ""},  // refused by check_options, no variant
      {{"-arch=compute_90a"}, ""},
      {{"-arch=sm_90ab"}, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.options.back());
    EXPECT_EQ(parse_user_options(c.options).arch_variant, c.variant);
    if (!c.variant.empty()) EXPECT_NO_THROW(detail::check_options(c.options));
  }
  // The variant is not passed on as a user option: the compile's own -arch carries it.
  EXPECT_EQ(parse_user_options({"-arch=sm_90a", "-DX"}).others, std::vector<std::string>{});
}

}  // namespace
}  // namespace torch_cudajit
