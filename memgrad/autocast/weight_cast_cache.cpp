// autocast/weight_cast_cache.cpp — the per-thread map from a parameter to its 16-bit copy.
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
  Tensor cast;
};

thread_local std::unordered_map<const TensorImpl*, CachedCast> weight_casts;

}  // namespace

size_t autocast_cache_size() { return weight_casts.size(); }

namespace detail {

bool is_weight_cast_cacheable(const Tensor& x) {
  return x.dtype() == DType::Float32 && x.is_leaf() && x.requires_grad();
}

Tensor find_weight_cast(const Tensor& x, DType dtype, bool has_history) {
  auto found = weight_casts.find(x.impl());
  if (found == weight_casts.end()) return Tensor();
  const CachedCast& entry = found->second;
  const bool valid = entry.source.lock() == x.impl_ptr() && entry.storage.lock() == x.storage() &&
                     entry.version == x.version() && entry.has_history == has_history && entry.cast.dtype() == dtype;
  return valid ? entry.cast : Tensor();
}

void keep_weight_cast(const Tensor& x, Tensor cast, bool has_history) {
  cast.set_memory_category(MemoryCategory::AutocastCache);
  weight_casts[x.impl()] = CachedCast{x.impl_ptr(), x.storage(), x.version(), has_history, std::move(cast)};
}

void clear_weight_casts() { weight_casts.clear(); }

}  // namespace detail

}  // namespace mg::amp
