// tests/cuda/deterministic_convolutions.h — a scope in which cuDNN runs only engines that
// give the same bits on every run (cuda::set_cudnn_deterministic): tests that compare two
// runs bit for bit need it, since some backward engines add partial sums with atomics.
#pragma once

#include "memgrad/cuda/cudnn/settings.h"

namespace mg_test {

class DeterministicConvolutions {
 public:
  DeterministicConvolutions() : before_(mg::cuda::cudnn_deterministic()) { mg::cuda::set_cudnn_deterministic(true); }
  ~DeterministicConvolutions() { mg::cuda::set_cudnn_deterministic(before_); }
  DeterministicConvolutions(const DeterministicConvolutions&) = delete;
  DeterministicConvolutions& operator=(const DeterministicConvolutions&) = delete;

 private:
  bool before_;
};

}  // namespace mg_test
