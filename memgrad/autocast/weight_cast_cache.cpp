// autocast/weight_cast_cache.cpp — the per-thread map from a parameter to its 16-bit copy,
// and the working sets that regions leave behind for the next region that begins alike.
#include "memgrad/autocast/weight_cast_cache.h"

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>

#include "memgrad/autocast/autocast.h"

namespace mg::amp {

namespace {

// One parameter's 16-bit copy. The weak references tell whether the key's TensorImpl is
// still the one that was cast and still views the same storage; the version, whether the
// values changed in place since.
struct CachedCast {
  std::weak_ptr<TensorImpl> source;
  std::weak_ptr<Storage> storage;
  uint64_t version;
  bool has_history;
  bool used;  // false for a copy cast ahead of its use until a lookup returns it
  Tensor cast;
};

// A parameter a region used: enough to find it again, to tell whether it is still the same
// parameter, and to cast it as the region did.
struct UsedParameter {
  std::weak_ptr<TensorImpl> source;
  std::weak_ptr<Storage> storage;
  DType dtype;
  bool has_history;
};
using WorkingSet = std::vector<UsedParameter>;

// This region's copies; whether it learns and casts ahead, its parameters in order of first
// use, and whether it has missed yet.
thread_local std::unordered_map<const TensorImpl*, CachedCast> weight_casts;
thread_local bool region_with_working_set = false;
thread_local WorkingSet region_uses;
thread_local bool region_missed = false;
// Past regions' working sets, each under its first parameter (its front()).
thread_local std::unordered_map<const TensorImpl*, WorkingSet> working_sets;

void note_use(const Tensor& x, DType dtype, bool has_history) {
  if (region_with_working_set) region_uses.push_back(UsedParameter{x.impl_ptr(), x.storage(), dtype, has_history});
}

void store(const Tensor& x, Tensor cast, bool has_history, bool used) {
  cast.set_memory_category(MemoryCategory::AutocastCache);
  weight_casts[x.impl()] = CachedCast{x.impl_ptr(), x.storage(), x.version(), has_history, used, std::move(cast)};
}

}  // namespace

size_t autocast_cache_size() { return weight_casts.size(); }

namespace detail {

bool is_weight_cast_cacheable(const Tensor& x) {
  return x.dtype() == DType::Float32 && x.is_leaf() && x.requires_grad();
}

Tensor find_weight_cast(const Tensor& x, DType dtype, bool has_history) {
  auto found = weight_casts.find(x.impl());
  if (found == weight_casts.end()) return Tensor();
  CachedCast& entry = found->second;
  const bool valid = entry.source.lock() == x.impl_ptr() && entry.storage.lock() == x.storage() &&
                     entry.version == x.version() && entry.has_history == has_history && entry.cast.dtype() == dtype;
  if (!valid) return Tensor();
  if (!entry.used) {
    entry.used = true;
    note_use(x, dtype, has_history);
  }
  return entry.cast;
}

void keep_weight_cast(const Tensor& x, Tensor cast, bool has_history) {
  // A copy that went stale and is cast again is still one use of its parameter.
  auto previous = weight_casts.find(x.impl());
  const bool used_before = previous != weight_casts.end() && previous->second.used &&
                           previous->second.source.lock() == x.impl_ptr();
  if (!used_before) note_use(x, cast.dtype(), has_history);
  store(x, std::move(cast), has_history, /*used=*/true);
}

std::vector<Tensor> take_working_set(const Tensor& x, DType dtype, bool has_history) {
  if (!region_with_working_set || std::exchange(region_missed, true)) return {};
  auto found = working_sets.find(x.impl());
  if (found == working_sets.end() || found->second.front().source.lock() != x.impl_ptr()) return {};
  std::vector<Tensor> parameters;
  for (const UsedParameter& used : found->second) {
    std::shared_ptr<TensorImpl> impl = used.source.lock();
    if (!impl) continue;  // freed since
    Tensor parameter(std::move(impl));
    const bool valid = parameter.storage() == used.storage.lock() && is_weight_cast_cacheable(parameter) &&
                       is_autocast_on_for(parameter) && autocast_dtype(parameter.device().type) == dtype &&
                       used.dtype == dtype && used.has_history == has_history;
    if (valid) parameters.push_back(std::move(parameter));
  }
  return parameters;
}

void keep_prefetched_weight_cast(const Tensor& x, Tensor cast, bool has_history) {
  store(x, std::move(cast), has_history, /*used=*/false);
}

void begin_weight_cast_region(bool with_working_set) { region_with_working_set = with_working_set; }

void end_weight_cast_region() {
  weight_casts.clear();
  region_missed = false;
  if (region_uses.empty()) return;  // it learns no set, or used no parameter
  WorkingSet uses = std::exchange(region_uses, {});
  // A set whose first parameter died can never be looked up again.
  std::erase_if(working_sets, [](const auto& entry) { return entry.second.front().source.expired(); });
  if (const std::shared_ptr<TensorImpl> first = uses.front().source.lock()) working_sets[first.get()] = std::move(uses);
}

}  // namespace detail

}  // namespace mg::amp
