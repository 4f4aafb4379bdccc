// cuda/cudnn/algorithm_cache.cpp — the process-wide map from ConvKey to ConvPlan.
#include "memgrad/cuda/cudnn/algorithm_cache.h"

#include <mutex>
#include <unordered_map>

namespace mg::cuda {

namespace {

struct ConvKeyHash {
  size_t operator()(const ConvKey& key) const {
    uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a over 64-bit words, folded at the end
    for (int64_t field : key.fields) {
      hash ^= static_cast<uint64_t>(field);
      hash *= 0x100000001b3ull;
    }
    return static_cast<size_t>(hash ^ (hash >> 32));
  }
};

struct Cache {
  std::mutex mutex;
  std::unordered_map<ConvKey, std::unique_ptr<ConvPlan>, ConvKeyHash> plans;
};
Cache& cache() {
  // NOTE: leaked on purpose, like the handles: plans hold only host memory, and destroying
  // them during static destruction would race threads still converting.
  static auto* all = new Cache;
  return *all;
}

}  // namespace

const char* direction_name(ConvDirection direction) {
  switch (direction) {
    case ConvDirection::Forward: return "forward";
    case ConvDirection::BackwardData: return "backward data";
    case ConvDirection::BackwardFilter: return "backward filter";
    case ConvDirection::ForwardStatistics: return "forward with statistics";
    case ConvDirection::ForwardNormalizedStatistics: return "forward of relu(x * scale + bias) with statistics";
    case ConvDirection::BackwardDataAccumulate: return "backward data, accumulating";
    case ConvDirection::BackwardDataReluBatchNorm: return "backward data with ReLU and batch norm backward sums";
  }
  return "?";
}

ConvKey make_conv_key(ConvDirection direction, Device device, DType dtype, MemoryFormat layout, const Shape& input,
                      const Shape& weight, const Shape& output, const Window2d& window, bool allow_tf32,
                      bool deterministic, bool benchmark, int alignment) {
  ConvKey key;
  size_t i = 0;
  auto put = [&](int64_t value) { key.fields[i++] = value; };
  put(static_cast<int64_t>(direction));
  put(device.index);
  put(static_cast<int64_t>(dtype));
  put(static_cast<int64_t>(layout));
  for (const Shape* sizes : {&input, &weight, &output}) {
    for (int d = 0; d < 4; ++d) put((*sizes)[d]);
  }
  for (int64_t value : {window.stride_h, window.stride_w, window.pad_h, window.pad_w, window.dilation_h,
                        window.dilation_w, window.groups}) {
    put(value);
  }
  put(allow_tf32 ? 1 : 0);
  put(deterministic ? 1 : 0);
  put(benchmark ? 1 : 0);
  put(alignment);
  MG_ASSERT(i == key.fields.size(), "ConvKey holds ", key.fields.size(), " fields, filled ", i);
  return key;
}

const ConvPlan* find_conv_plan(const ConvKey& key) {
  Cache& all = cache();
  std::lock_guard lock(all.mutex);
  auto found = all.plans.find(key);
  return found == all.plans.end() ? nullptr : found->second.get();
}

const ConvPlan& insert_conv_plan(const ConvKey& key, std::unique_ptr<ConvPlan> plan) {
  Cache& all = cache();
  std::lock_guard lock(all.mutex);
  auto [entry, inserted] = all.plans.try_emplace(key, std::move(plan));
  return *entry->second;
}

size_t cudnn_algorithm_cache_size() {
  Cache& all = cache();
  std::lock_guard lock(all.mutex);
  return all.plans.size();
}

std::vector<CudnnAlgorithmChoice> cudnn_algorithm_choices() {
  Cache& all = cache();
  std::lock_guard lock(all.mutex);
  std::vector<CudnnAlgorithmChoice> choices;
  choices.reserve(all.plans.size());
  for (const auto& [key, plan] : all.plans) {
    choices.push_back({plan->direction, plan->engine, plan->workspace_bytes, plan->coefficient_dtype});
  }
  return choices;
}

void clear_cudnn_algorithm_cache() {
  Cache& all = cache();
  std::lock_guard lock(all.mutex);
  all.plans.clear();
}

}  // namespace mg::cuda
