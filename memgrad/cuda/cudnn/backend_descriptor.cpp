// cuda/cudnn/backend_descriptor.cpp — RAII over cudnnBackendDescriptor_t (see the header).
//
// NOTE: the destructor cannot throw, so it ignores the status of
// cudnnBackendDestroyDescriptor (a host-side free that fails only for a null descriptor,
// which it never passes).
#include "memgrad/cuda/cudnn/backend_descriptor.h"

#include <utility>

#include "memgrad/cuda/cudnn/check.h"

namespace mg::cuda::cudnn {

BackendDescriptor::BackendDescriptor(cudnnBackendDescriptorType_t type) {
  MG_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &descriptor_));
}

BackendDescriptor::~BackendDescriptor() {
  if (descriptor_ != nullptr) (void)cudnnBackendDestroyDescriptor(descriptor_);
}

BackendDescriptor::BackendDescriptor(BackendDescriptor&& other) noexcept
    : descriptor_(std::exchange(other.descriptor_, nullptr)) {}

BackendDescriptor& BackendDescriptor::operator=(BackendDescriptor&& other) noexcept {
  if (this != &other) {
    if (descriptor_ != nullptr) (void)cudnnBackendDestroyDescriptor(descriptor_);
    descriptor_ = std::exchange(other.descriptor_, nullptr);
  }
  return *this;
}

BackendDescriptor& BackendDescriptor::set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                                          int64_t count, const void* values) {
  MG_CUDNN_CHECK(cudnnBackendSetAttribute(descriptor_, name, type, count, values));
  return *this;
}

BackendDescriptor& BackendDescriptor::set_int64s(cudnnBackendAttributeName_t name,
                                                 std::initializer_list<int64_t> values) {
  return set(name, CUDNN_TYPE_INT64, static_cast<int64_t>(values.size()), values.begin());
}

BackendDescriptor& BackendDescriptor::set_descriptor(cudnnBackendAttributeName_t name,
                                                     const BackendDescriptor& value) {
  cudnnBackendDescriptor_t raw = value.get();
  return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
}

void BackendDescriptor::finalize() { MG_CUDNN_CHECK(cudnnBackendFinalize(descriptor_)); }

cudnnStatus_t BackendDescriptor::try_finalize() {
  const cudnnStatus_t status = cudnnBackendFinalize(descriptor_);
  if (status != CUDNN_STATUS_SUCCESS) detail::forget_cudnn_error();
  return status;
}

int64_t BackendDescriptor::get_int64(cudnnBackendAttributeName_t name) const {
  int64_t value = 0, count = 0;
  MG_CUDNN_CHECK(cudnnBackendGetAttribute(descriptor_, name, CUDNN_TYPE_INT64, 1, &count, &value));
  return value;
}

std::vector<BackendDescriptor> get_descriptors(const BackendDescriptor& owner, cudnnBackendAttributeName_t name,
                                               cudnnBackendDescriptorType_t element_type) {
  int64_t available = 0;
  MG_CUDNN_CHECK(
      cudnnBackendGetAttribute(owner.get(), name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &available, nullptr));
  std::vector<BackendDescriptor> elements;
  std::vector<cudnnBackendDescriptor_t> raw;
  elements.reserve(static_cast<size_t>(available));
  for (int64_t i = 0; i < available; ++i) {
    elements.emplace_back(element_type);
    raw.push_back(elements.back().get());
  }
  int64_t returned = 0;
  MG_CUDNN_CHECK(cudnnBackendGetAttribute(owner.get(), name, CUDNN_TYPE_BACKEND_DESCRIPTOR, available, &returned,
                                          raw.data()));
  elements.resize(static_cast<size_t>(returned));
  return elements;
}

std::vector<BackendDescriptor> heuristic_engine_configs(const BackendDescriptor& graph, cudnnBackendHeurMode_t mode) {
  BackendDescriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heuristics.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (heuristics.try_finalize() != CUDNN_STATUS_SUCCESS) return {};
  return get_descriptors(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
}

bool EngineFacts::has_note(cudnnBackendNumericalNote_t note) const {
  for (cudnnBackendNumericalNote_t present : notes) {
    if (present == note) return true;
  }
  return false;
}

EngineFacts engine_facts(const BackendDescriptor& config) {
  // A configuration has exactly one engine; asked for as cudnn_frontend asks for it.
  BackendDescriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t raw_engine = engine.get();
  int64_t engines = 0;
  MG_CUDNN_CHECK(cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                          1, &engines, &raw_engine));
  EngineFacts facts;
  facts.notes.resize(CUDNN_NUMERICAL_NOTE_TYPE_COUNT);
  int64_t count = 0;
  MG_CUDNN_CHECK(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                          static_cast<int64_t>(facts.notes.size()), &count, facts.notes.data()));
  facts.notes.resize(static_cast<size_t>(count));
  facts.index = engine.get_int64(CUDNN_ATTR_ENGINE_GLOBAL_INDEX);
  return facts;
}

}  // namespace mg::cuda::cudnn
