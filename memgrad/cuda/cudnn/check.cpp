// cuda/cudnn/check.cpp — turning cuDNN status codes into mg::Error.
#include "memgrad/cuda/cudnn/check.h"

#include <array>

namespace mg::cuda::detail {

void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line) {
  // cuDNN 9 keeps a per-thread message about the last failure; reading it clears it.
  std::array<char, 512> message{};
  cudnnGetLastErrorString(message.data(), message.size());
  mg::detail::throw_error(mg::detail::str_cat("cuDNN error ", cudnnGetErrorString(status), " in ", call, " at ",
                                              file, ":", line, message[0] != '\0' ? ": " : "", message.data()));
}

void forget_cudnn_error() {
  std::array<char, 512> message{};
  cudnnGetLastErrorString(message.data(), message.size());  // reading it clears it
}

}  // namespace mg::cuda::detail
