#pragma once
// cudaCheck / cublasCheck / ncclCheck: a failed call becomes a RuntimeError naming the call, file,
// line and the library's own message; the rank and host are added where it is caught.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "common/errors.h"

namespace tp {

[[noreturn]] inline void throw_gpu_error(const char* library, const std::string& message,
                                         const char* call, const char* file, int line) {
  throw RuntimeError(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                     library + ": " + message);
}

}  // namespace tp

#define cudaCheck(call)                                                                      \
  do {                                                                                       \
    const cudaError_t cuda_check_status_ = (call);                                           \
    if (cuda_check_status_ != cudaSuccess)                                                   \
      ::tp::throw_gpu_error("CUDA", cudaGetErrorString(cuda_check_status_), #call, __FILE__, \
                            __LINE__);                                                       \
  } while (0)

#define cublasCheck(call)                                                                 \
  do {                                                                                    \
    const cublasStatus_t cublas_check_status_ = (call);                                   \
    if (cublas_check_status_ != CUBLAS_STATUS_SUCCESS)                                    \
      ::tp::throw_gpu_error("cuBLAS", cublasGetStatusString(cublas_check_status_), #call, \
                            __FILE__, __LINE__);                                          \
  } while (0)
