# The GPU backend: libtrainproof_gpu.so, next to build/trainproof, loaded with dlopen only when a
# GPU backend is asked for. TRAINPROOF_CUDA=AUTO builds it when CUDA and NCCL are found; ON makes
# their absence an error; OFF never builds it.
set(TRAINPROOF_GPU_BACKEND OFF)
if(TRAINPROOF_CUDA STREQUAL "OFF")
  message(STATUS "trainproof: GPU backend disabled (TRAINPROOF_CUDA=OFF)")
  return()
endif()
if(NOT TRAINPROOF_GPU_TOOLCHAIN_FOUND)
  if(TRAINPROOF_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TRAINPROOF_CUDA=ON but CUDA or NCCL was not found (set CUDAToolkit_ROOT, NCCL_HOME)")
  endif()
  return()
endif()

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  # Ampere and Hopper machine code, plus Hopper PTX for newer GPUs to JIT.
  set(CMAKE_CUDA_ARCHITECTURES "80-real;90")
endif()
if(NOT CMAKE_CUDA_COMPILER)
  set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
endif()
enable_language(CUDA)
# CUDA sources are C++17 (CMake 3.25 cannot ask nvcc for C++20); the headers they share with the
# host code keep to C++17.
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(TRAINPROOF_GPU_BACKEND ON)
message(STATUS "trainproof: building the GPU backend for CUDA architectures ${CMAKE_CUDA_ARCHITECTURES}")
