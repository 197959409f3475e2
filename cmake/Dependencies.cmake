# Every dependency is a real system package (see scripts/setup.sh); nothing is vendored.
find_package(MPI REQUIRED COMPONENTS C)
find_package(Boost 1.74 REQUIRED COMPONENTS program_options)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)
# libunwind for the crash report's stack (common/crash_stack.cpp), through its generic library:
# libunwind.so itself also exports _Unwind_RaiseException and friends, and linked directly it would
# come before libgcc_s in the symbol search and unwind every C++ exception the program throws.
# Loaded as a dependency of the generic library, it comes after libgcc_s. (Its static archive is
# not position-independent, so it cannot go into a PIE or the GPU backend.)
# (pkg-config's libunwind-generic names libunwind too, so the library is found by name.)
find_library(UNWIND_GENERIC_LIBRARY NAMES unwind-generic REQUIRED)
find_path(UNWIND_INCLUDE_DIR libunwind.h REQUIRED)
add_library(trainproof_unwind INTERFACE)
target_include_directories(trainproof_unwind SYSTEM INTERFACE ${UNWIND_INCLUDE_DIR})
target_link_libraries(trainproof_unwind INTERFACE ${UNWIND_GENERIC_LIBRARY})

# Debian installs the parallel (Open MPI) HDF5 flavour under its own prefix; prefer it explicitly so
# a serial HDF5 on the same host is never picked up by accident.
set(HDF5_PREFER_PARALLEL TRUE)
if(EXISTS /usr/lib/x86_64-linux-gnu/hdf5/openmpi AND NOT HDF5_ROOT)
  set(HDF5_ROOT /usr/lib/x86_64-linux-gnu/hdf5/openmpi)
endif()
find_package(HDF5 REQUIRED COMPONENTS C HL)
if(NOT HDF5_IS_PARALLEL)
  message(FATAL_ERROR "HDF5 found at ${HDF5_INCLUDE_DIRS} is not the parallel flavour; install libhdf5-openmpi-dev")
endif()
add_library(trainproof_hdf5 INTERFACE)
target_include_directories(trainproof_hdf5 SYSTEM INTERFACE ${HDF5_INCLUDE_DIRS})
target_link_libraries(trainproof_hdf5 INTERFACE ${HDF5_C_LIBRARIES} ${HDF5_HL_LIBRARIES})
target_compile_definitions(trainproof_hdf5 INTERFACE ${HDF5_DEFINITIONS})

# CUDA and NCCL: optional. When both are found (and TRAINPROOF_CUDA is not OFF) the run-time-loaded
# GPU backend library is built; see cmake/GpuBackend.cmake.
if(NOT CUDAToolkit_ROOT AND NOT DEFINED ENV{CUDAToolkit_ROOT} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit QUIET)
set(_nccl_hints $ENV{NCCL_HOME} $ENV{NCCL_ROOT} ${NCCL_HOME} ${NCCL_ROOT})
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
find_library(NCCL_LIBRARY nccl HINTS ${_nccl_hints} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64)
if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  set(TRAINPROOF_GPU_TOOLCHAIN_FOUND TRUE)
  message(STATUS "trainproof: CUDA ${CUDAToolkit_VERSION} and NCCL (${NCCL_LIBRARY}) detected")
else()
  set(TRAINPROOF_GPU_TOOLCHAIN_FOUND FALSE)
  message(STATUS "trainproof: CUDA/NCCL not found; CPU-only build")
endif()
