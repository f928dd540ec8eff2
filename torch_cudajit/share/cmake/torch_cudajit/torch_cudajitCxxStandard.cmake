# torch_cudajit: the C++ standard the installed torch requires, for host and CUDA sources alike.
# Included after find_package(Torch), in the same scope, by torch_cudajitConfig.cmake (the pip
# package) and by the top-level CMake build (which installs it beside its own config).
#
# Sets TORCH_CUDAJIT_CXX_STANDARD to the newest standard the torch target asks for (empty where it
# names none): newer torch puts it on its target as a compile feature (cxx_std_20), older torch
# only sets the target's CXX_STANDARD property (17), which CMake does not pass on to consumers.
#
# Torch's config enables CUDA and sets CMAKE_CUDA_STANDARD_REQUIRED, under which CMake compiles a
# target's CUDA sources at the C++ standard of its compile features. CMake releases before 3.25.2
# (Debian 12 ships 3.25.1) know no nvcc flag for C++20 and stop at generation: 'requires the
# language dialect "CUDA20" ... does not support this'. Where the CUDA compiler is nvcc and CMake
# has no flag for the standard torch requires, define nvcc's, as later CMake releases do.
set(TORCH_CUDAJIT_CXX_STANDARD "")
get_target_property(_cj_torch_features torch INTERFACE_COMPILE_FEATURES)
get_target_property(_cj_torch_std torch CXX_STANDARD)
string(REGEX MATCHALL "cxx_std_[0-9]+" _cj_torch_std_features "${_cj_torch_features}")
foreach(_cj_std IN LISTS _cj_torch_std_features _cj_torch_std)
  string(REGEX REPLACE "^cxx_std_" "" _cj_std "${_cj_std}")
  if(_cj_std MATCHES "^[0-9]+$" AND
     (NOT TORCH_CUDAJIT_CXX_STANDARD OR _cj_std GREATER TORCH_CUDAJIT_CXX_STANDARD))
    set(TORCH_CUDAJIT_CXX_STANDARD ${_cj_std})
  endif()
endforeach()

if(TORCH_CUDAJIT_CXX_STANDARD AND CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA" AND
   NOT DEFINED CMAKE_CUDA${TORCH_CUDAJIT_CXX_STANDARD}_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA${TORCH_CUDAJIT_CXX_STANDARD}_STANDARD_COMPILE_OPTION
      "-std=c++${TORCH_CUDAJIT_CXX_STANDARD}")
  set(CMAKE_CUDA${TORCH_CUDAJIT_CXX_STANDARD}_EXTENSION_COMPILE_OPTION
      "-std=c++${TORCH_CUDAJIT_CXX_STANDARD}")
  message(STATUS "torch_cudajit: CMake ${CMAKE_VERSION} knows no nvcc flag for "
                 "C++${TORCH_CUDAJIT_CXX_STANDARD}, which torch requires; CUDA sources use "
                 "-std=c++${TORCH_CUDAJIT_CXX_STANDARD}")
endif()
unset(_cj_torch_features)
unset(_cj_torch_std)
unset(_cj_torch_std_features)
unset(_cj_std)
