// distributed/gradient_buckets.h — the flat tensors DistributedDataParallel all-reduces:
// which parameters share a bucket, and each parameter's .grad as a view into its bucket,
// so that reducing a bucket reduces its gradients in place (no second copy).
//
// Layout, as PyTorch's compute_bucket_assignment_by_size applied to the order gradients
// become ready: parameters are taken from the last registered to the first (backward
// produces the last layers' gradients first) and grouped by dtype and device. A bucket is
// closed as soon as its bytes reach its cap: `first_bucket_bytes` for the first bucket of
// each dtype and device (small, so the first all_reduce starts early in backward),
// `bucket_bytes` for the later ones. So a bucket may pass its cap by its last parameter,
// and a parameter at least as large as the cap is a bucket of its own. Buckets are
// numbered in the order their first parameter comes, which is the order they are reduced.
// Within a bucket the gradients lie end to end in that same order, without padding, each
// in its parameter's layout (a channels_last weight's .grad is channels_last).
//
// Memory: a bucket is one allocation of exactly the bytes of its parameters' gradients,
// made at construction and tagged GRADIENT: it is the gradients' storage, not a copy of
// them. Dropping .grad (zero_grad with set_to_none) drops the view, not the bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "memgrad/core/tensor.h"

namespace mg::distributed {

struct BucketCaps {
  int64_t first_bucket_bytes = int64_t{1} << 20;  // PyTorch's _DEFAULT_FIRST_BUCKET_BYTES
  int64_t bucket_bytes = int64_t{25} << 20;       // PyTorch's bucket_cap_mb default
};

// The parameters of each bucket (indices into `parameters`), buckets in reduction order.
std::vector<std::vector<size_t>> assign_buckets(const std::vector<Tensor>& parameters, const BucketCaps& caps);

class GradientBuckets {
 public:
  GradientBuckets(std::vector<Tensor> parameters, const BucketCaps& caps);

  size_t num_buckets() const { return flats_.size(); }
  // Bucket b's storage: (elements,), one dtype and device.
  const Tensor& flat(size_t bucket) const { return flats_[bucket]; }
  // Its parameters (indices into the constructor's list), in storage order.
  const std::vector<size_t>& members(size_t bucket) const { return members_[bucket]; }
  size_t bucket_of(size_t parameter) const { return bucket_of_[parameter]; }

  // True when parameter p's .grad is its view into its bucket.
  bool is_attached(size_t parameter) const;
  // Makes parameter p's .grad its view into the bucket: kept when it already is; otherwise
  // the view takes .grad's values (zeros when .grad is undefined) and becomes .grad.
  void attach(size_t parameter) const;

 private:
  std::vector<Tensor> parameters_;
  std::vector<Tensor> views_;  // per parameter: its gradient's place in its bucket
  std::vector<Tensor> flats_;
  std::vector<std::vector<size_t>> members_;
  std::vector<size_t> bucket_of_;
};

}  // namespace mg::distributed
