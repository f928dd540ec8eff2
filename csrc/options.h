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
  /// nvJitLink's spelling of the options that shape machine code (register limit, ptxas
  /// optimization level, fast math).
  std::vector<std::string> link_options;
};

/// Reads `extra` (options as NVRTC takes them) by role.
UserOptions parse_user_options(const std::vector<std::string>& extra);

}  // namespace torch_cudajit
