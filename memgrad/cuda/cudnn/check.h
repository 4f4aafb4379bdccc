// cuda/cudnn/check.h — every cuDNN call is checked like the CUDA and cuBLAS ones
// (cuda/check.h): a failure becomes an mg::Error naming the call, the file and the line,
// with cuDNN's status name and its last error message (which says which parameter it
// rejected).
#pragma once

#include <cudnn.h>

#include "memgrad/core/error.h"

namespace mg::cuda::detail {

[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line);

// Clears cuDNN's message about the last failure, after a failure that is an answer rather
// than an error (an engine that does not apply), so a later real error reports its own.
void forget_cudnn_error();

}  // namespace mg::cuda::detail

#define MG_CUDNN_CHECK(call)                                                               \
  do {                                                                                     \
    cudnnStatus_t mg_cudnn_status = (call);                                                \
    if (mg_cudnn_status != CUDNN_STATUS_SUCCESS) [[unlikely]]                              \
      ::mg::cuda::detail::throw_cudnn_error(mg_cudnn_status, #call, __FILE__, __LINE__);   \
  } while (0)
