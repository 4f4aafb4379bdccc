// cuda/cudnn/backend_descriptor.h — one object of cuDNN's backend (graph) API as an RAII
// value: tensors, the convolution, the operation graph, engine configurations, execution
// plans and variant packs are all cudnnBackendDescriptor_t, built by setting attributes
// and then finalized.
//
// Why the backend API (cuda/cudnn/conv.cpp): a finalized execution plan is the whole
// choice — engine, knobs, workspace — made once per shape, and executing it costs a few
// microseconds of host time. A legacy cudnnConvolution* call with cached descriptors cost
// about 40 µs more per call on the lent H200 machine (bench_train_step --host-overhead
// --tiny-op conv: 50.4 µs against 10.4 µs through a plan), which made ResNet-50's mixed
// precision step host-bound.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace mg::cuda::cudnn {

class BackendDescriptor {
 public:
  BackendDescriptor() = default;
  explicit BackendDescriptor(cudnnBackendDescriptorType_t type);
  ~BackendDescriptor();
  BackendDescriptor(BackendDescriptor&& other) noexcept;
  BackendDescriptor& operator=(BackendDescriptor&& other) noexcept;
  BackendDescriptor(const BackendDescriptor&) = delete;
  BackendDescriptor& operator=(const BackendDescriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return descriptor_; }
  bool defined() const { return descriptor_ != nullptr; }

  // Sets an attribute of `count` values of `type` at `values`; a failure throws.
  BackendDescriptor& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                         const void* values);
  BackendDescriptor& set_int64s(cudnnBackendAttributeName_t name, std::initializer_list<int64_t> values);
  BackendDescriptor& set_descriptor(cudnnBackendAttributeName_t name, const BackendDescriptor& value);
  void finalize();
  // cuDNN's answer without throwing: an engine configuration that does not apply to a
  // graph fails to finalize its plan, which is an answer, not an error.
  cudnnStatus_t try_finalize();

  int64_t get_int64(cudnnBackendAttributeName_t name) const;

 private:
  cudnnBackendDescriptor_t descriptor_ = nullptr;
};

// The descriptors a list attribute of type CUDNN_TYPE_BACKEND_DESCRIPTOR holds (the engine
// configurations of a heuristics query), each created as `element_type` and filled by
// cuDNN.
std::vector<BackendDescriptor> get_descriptors(const BackendDescriptor& owner, cudnnBackendAttributeName_t name,
                                               cudnnBackendDescriptorType_t element_type);

// Engine configurations cuDNN's heuristics in `mode` rank for a finalized operation
// graph, best expected first; empty when the mode has nothing for it (an answer: try the
// next mode), not an error.
std::vector<BackendDescriptor> heuristic_engine_configs(const BackendDescriptor& graph, cudnnBackendHeurMode_t mode);

// The one engine of an engine configuration: cuDNN's global index for it and its
// numerical notes (tensor cores, reduced precision, nondeterministic, ...).
struct EngineFacts {
  int64_t index = -1;
  std::vector<cudnnBackendNumericalNote_t> notes;
  bool has_note(cudnnBackendNumericalNote_t note) const;
};
EngineFacts engine_facts(const BackendDescriptor& config);

}  // namespace mg::cuda::cudnn
