// distributed/gradient_buckets.cpp — bucket assignment and the gradient views
// (gradient_buckets.h says which layout and why).
#include "memgrad/distributed/gradient_buckets.h"

#include <algorithm>
#include <map>

#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/distributed/tensor_group_key.h"

namespace mg::distributed {

std::vector<std::vector<size_t>> assign_buckets(const std::vector<Tensor>& parameters, const BucketCaps& caps) {
  MG_CHECK(caps.first_bucket_bytes > 0 && caps.bucket_bytes > 0, "DistributedDataParallel: bucket caps must be "
           "positive, got first_bucket_bytes = ", caps.first_bucket_bytes, " and bucket_bytes = ", caps.bucket_bytes, ".");
  struct OpenBucket {
    std::vector<size_t> members;
    int64_t bytes = 0;
    bool first = true;  // the first bucket of its dtype and device: the small cap applies
  };
  std::vector<std::vector<size_t>> buckets;
  std::map<TensorGroupKey, OpenBucket> open;
  for (size_t index = parameters.size(); index-- > 0;) {
    const Tensor& parameter = parameters[index];
    OpenBucket& bucket = open[tensor_group_key(parameter)];
    bucket.members.push_back(index);
    bucket.bytes += static_cast<int64_t>(parameter.nbytes());
    if (bucket.bytes >= (bucket.first ? caps.first_bucket_bytes : caps.bucket_bytes)) {
      buckets.push_back(std::move(bucket.members));
      bucket = OpenBucket{.members = {}, .bytes = 0, .first = false};
    }
  }
  for (auto& [key, bucket] : open) {
    if (!bucket.members.empty()) buckets.push_back(std::move(bucket.members));
  }
  // Reduction order: by each bucket's first parameter, in the order gradients are expected
  // (the last registered first). Only buckets of different dtypes or devices interleave.
  std::sort(buckets.begin(), buckets.end(),
            [](const std::vector<size_t>& a, const std::vector<size_t>& b) { return a.front() > b.front(); });
  return buckets;
}

GradientBuckets::GradientBuckets(std::vector<Tensor> parameters, const BucketCaps& caps)
    : parameters_(std::move(parameters)), views_(parameters_.size()), bucket_of_(parameters_.size()) {
  members_ = assign_buckets(parameters_, caps);
  for (size_t bucket = 0; bucket < members_.size(); ++bucket) {
    int64_t numel = 0;
    for (size_t index : members_[bucket]) numel += parameters_[index].numel();
    const Tensor& first = parameters_[members_[bucket].front()];
    const Tensor flat = zeros({numel}, {.dtype = first.dtype(), .device = first.device(),
                                        .category = MemoryCategory::Gradient});
    int64_t offset = 0;
    for (size_t index : members_[bucket]) {
      const Tensor& parameter = parameters_[index];
      const Shape strides = strides_for(parameter.sizes(), suggest_memory_format(parameter));
      views_[index] = make_view(flat, parameter.sizes(), strides, offset);
      bucket_of_[index] = bucket;
      offset += parameter.numel();
    }
    flats_.push_back(flat);
  }
}

bool GradientBuckets::is_attached(size_t parameter) const {
  const Tensor grad = parameters_[parameter].grad();
  const Tensor& view = views_[parameter];
  return grad.defined() && grad.storage() == view.storage() && grad.storage_offset() == view.storage_offset() &&
         grad.strides() == view.strides();
}

void GradientBuckets::attach(size_t parameter) const {
  if (is_attached(parameter)) return;
  NoGradGuard no_grad;
  const Tensor& view = views_[parameter];
  const Tensor grad = parameters_[parameter].grad();
  if (grad.defined()) {
    view.copy_(grad);
  } else {
    view.zero_();
  }
  parameters_[parameter].set_grad(view);
}

}  // namespace mg::distributed
