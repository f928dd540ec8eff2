// torch_cudajit: the user's NVRTC options (CompileOptions::extra), read once into what each
// consumer needs. NVRTC itself gets the options as given; the Clang front end and the cache key
// need the preprocessor options (include folders, macros, pre-included files), and nvJitLink,
// which generates the machine code of linked kernels, needs the options that shape it.
#pragma once

#include <string>
#include <vector>

namespace torch_cudajit {

/// The user's options by role. Every spelling NVRTC accepts is read: "-DX", "-D X",
/// "--define-macro=X" and "--define-macro X" (likewise -U, -I, --pre-include and -include).
struct UserOptions {
  std::vector<std::string> include_dirs;  ///< -I / --include-path folders, in order
  std::vector<std::string> macros;        ///< "-DNAME[=VALUE]" or "-UNAME", in order
  std::vector<std::string> pre_includes;  ///< --pre-include / -include files, in order
  std::vector<std::string> others;        ///< every other option, as given
  /// The language standard of the last -std / --std option ("c++20"), "" when none is given:
  /// NVRTC takes the last one, after the plugin's own.
  std::string std;
  /// An architecture-specific target asked for with -arch (`sm_90a`, `sm_100f`), "" when none:
  /// the compile targets it when its compute capability is the one compiled for.
  std::string arch_variant;
  /// nvJitLink's spelling of the options that shape machine code (register limit, ptxas
  /// optimization level, fast math).
  std::vector<std::string> link_options;
};

/// True for `-arch=sm_90a` / `--gpu-architecture=sm_100f`: an architecture-specific target,
/// which the compile honours for its compute capability (UserOptions::arch_variant).
bool is_arch_variant_option(const std::string& option);

/// Reads `extra` (options as NVRTC takes them) by role.
UserOptions parse_user_options(const std::vector<std::string>& extra);

/// The C++ standards a kernel can be compiled with (std= of jit, -std= in the options): those
/// NVRTC takes that cj/cj.cuh compiles under.
const std::vector<std::string>& supported_standards();

namespace detail {
/// Throws c10::ValueError naming the option when one holds a NUL byte (NVRTC and Clang would
/// read it only up to there), sets the target architecture (-arch, --gpu-architecture, -code:
/// the device or compile(arch=...) decides it), or names a language standard that is not one of
/// supported_standards().
void check_options(const std::vector<std::string>& options);
/// Throws c10::ValueError when a program name holds a NUL byte or a line break (it is written
/// into #line directives and messages), or is empty.
void check_program_name(const std::string& filename);
}  // namespace detail

}  // namespace torch_cudajit
