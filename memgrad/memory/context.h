// memory/context.h — what the program is doing when memory moves: the op, the module
// path ("layer1.0.conv1") and the phase (forward, backward, optimizer) of the current
// thread, set by RAII scopes, so that a memory::Recorder can say who allocated each byte.
//
//   { mg::memory::PhaseScope phase(mg::memory::Phase::Optimizer); optimizer.step(); }
//
// Module::operator(), the autograd engine and Optimizer set these scopes themselves; a user
// only needs them to name their own regions. The context is kept while someone reads it: a
// running Recorder, or autograd's anomaly mode (which tells each backward node the op and
// module that recorded it). NOTE: otherwise every scope costs one relaxed atomic read, so
// they may sit on hot paths.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace mg::memory {

enum class Phase : uint8_t { Other, Forward, Backward, Optimizer };
inline constexpr int kNumPhases = 4;

// "other", "forward", "backward", "optimizer".
const char* phase_name(Phase phase);

namespace detail {

// Number of running Recorders (0 or 1); the one check every hook makes first.
extern std::atomic<int> running_recorders;
inline bool recording() { return running_recorders.load(std::memory_order_relaxed) != 0; }

// Readers of the context (a running Recorder, anomaly mode); the scopes below keep it only
// while there is one.
extern std::atomic<int> context_readers;
inline bool tracking() { return context_readers.load(std::memory_order_relaxed) != 0; }

// Labels (op names, module paths) are interned: an event stores a 32-bit id, never a
// string, so recording an event allocates nothing. Id 0 is the empty label.
uint32_t intern_label(std::string_view text);
std::string label_text(uint32_t id);

struct Context {
  uint32_t op = 0;
  uint32_t module = 0;
  Phase phase = Phase::Other;
  // The nn::Module whose forward runs (opaque here: core sits below nn), so that a child
  // called from it is named by its caller; null outside any module.
  const void* calling_module = nullptr;
};
// The calling thread's context.
Context& current_context();

}  // namespace detail

// The calling thread's phase (Other outside any PhaseScope, and whenever nothing reads the
// context).
Phase current_phase();

// Names the op that allocates inside it (the engine names each backward node this way).
class OpScope {
 public:
  explicit OpScope(std::string_view op_name);
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  bool engaged_ = false;  // false when nothing recorded at construction: nothing to undo
  uint32_t previous_ = 0;
};

// Appends `name` to the module path for the scope's lifetime: "layer1" inside "" gives
// "layer1", "0" inside it "layer1.0".
class ModuleScope {
 public:
  explicit ModuleScope(std::string_view name);
  ~ModuleScope();
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;

 private:
  bool engaged_ = false;
  uint32_t previous_ = 0;
};

// A backward node's scope: op = its name, module path = the one it was recorded under.
class NodeScope {
 public:
  NodeScope(const void* node, const char* node_name);
  ~NodeScope();
  NodeScope(const NodeScope&) = delete;
  NodeScope& operator=(const NodeScope&) = delete;

 private:
  bool engaged_ = false;
  detail::Context previous_;
};

// The whole context, saved where a computation is set aside and restored where it resumes:
// checkpoint recomputes its forward in backward under the forward's module path and
// calling module, so the recomputed allocations carry the forward's names.
detail::Context saved_context();
class ContextScope {
 public:
  explicit ContextScope(const detail::Context& context);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  bool engaged_ = false;
  detail::Context previous_;
};

class PhaseScope {
 public:
  explicit PhaseScope(Phase phase);
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  bool engaged_ = false;
  Phase previous_ = Phase::Other;
};

}  // namespace mg::memory
