# torch_cudajit: CMake package config of the pip-installed package.
#
#   cmake -DCMAKE_PREFIX_PATH="$(python -c 'import torch;print(torch.utils.cmake_prefix_path)');$(python -c 'import torch_cudajit;print(torch_cudajit.cmake_prefix_path)')"
#   find_package(torch_cudajit REQUIRED)
#   target_link_libraries(app PRIVATE torch_cudajit::torch_cudajit)
#
# The target is the same libtorch_cudajit.so that `import torch_cudajit` loads: one copy of the
# core and of the cudajit op registration for Python and C++. Its C++ API headers are included as
# <torch_cudajit/kernel.h>. The library registers the op family from static initializers, so the
# target links it with --no-as-needed. The target asks for the C++ standard torch requires, and
# CUDA sources of a consumer compile at it (torch_cudajitCxxStandard.cmake), with CMake 3.25 too.
include(CMakeFindDependencyMacro)
find_dependency(Torch)

get_filename_component(_cj_package_dir "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(_cj_library "${_cj_package_dir}/lib/libtorch_cudajit.so")
if(NOT EXISTS "${_cj_library}" OR NOT EXISTS "${_cj_package_dir}/cxx/torch_cudajit/kernel.h")
  set(torch_cudajit_FOUND FALSE)
  set(torch_cudajit_NOT_FOUND_MESSAGE
      "${_cj_package_dir} holds no built torch_cudajit (lib/libtorch_cudajit.so, cxx/). "
      "Install the package (pip install --no-build-isolation .) or build it in place "
      "(python setup.py build_ext --inplace).")
  return()
endif()

# cuda.h and nvrtc.h, which the C++ API headers include: torch's config found the toolkit.
set(_cj_cuda_includes ${CUDAToolkit_INCLUDE_DIRS})
if(NOT _cj_cuda_includes AND CUDA_INCLUDE_DIRS)
  set(_cj_cuda_includes ${CUDA_INCLUDE_DIRS})
endif()

# The C++ standard the installed torch requires, carried by the target (and nvcc's flag for it
# where CMake lacks one, so that a consumer's CUDA sources build too).
include("${CMAKE_CURRENT_LIST_DIR}/torch_cudajitCxxStandard.cmake")
set(_cj_features "")
if(TORCH_CUDAJIT_CXX_STANDARD)
  set(_cj_features cxx_std_${TORCH_CUDAJIT_CXX_STANDARD})
endif()

# A pip-installed torch finds its CUDA libraries in NVIDIA's wheels through its own run path, which
# the linker does not follow for an executable's indirect dependencies (a system NCCL of another
# version would be taken instead).
set(_cj_link_options "LINKER:--no-as-needed")
file(GLOB _cj_wheel_dirs LIST_DIRECTORIES true "${TORCH_INSTALL_PREFIX}/../nvidia/*/lib")
foreach(_cj_dir IN LISTS _cj_wheel_dirs)
  list(APPEND _cj_link_options "LINKER:-rpath-link,${_cj_dir}")
endforeach()

if(NOT TARGET torch_cudajit::torch_cudajit)
  add_library(torch_cudajit::torch_cudajit SHARED IMPORTED)
  set_target_properties(torch_cudajit::torch_cudajit PROPERTIES
    IMPORTED_LOCATION "${_cj_library}"
    IMPORTED_SONAME "libtorch_cudajit.so"
    INTERFACE_INCLUDE_DIRECTORIES "${_cj_package_dir}/cxx;${_cj_cuda_includes}"
    INTERFACE_LINK_LIBRARIES "${TORCH_LIBRARIES}"
    INTERFACE_LINK_OPTIONS "${_cj_link_options}"
    INTERFACE_COMPILE_FEATURES "${_cj_features}")
endif()
set(torch_cudajit_INCLUDE_DIRS "${_cj_package_dir}/cxx")
set(torch_cudajit_LIBRARIES torch_cudajit::torch_cudajit)
unset(_cj_library)
unset(_cj_cuda_includes)
unset(_cj_features)
unset(_cj_link_options)
unset(_cj_wheel_dirs)
