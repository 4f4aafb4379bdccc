// memory/context.cpp — the thread-local context and the label table.
#include "memgrad/memory/context.h"

#include <deque>
#include <mutex>
#include <unordered_map>

#include "memgrad/memory/recorder.h"

namespace mg::memory {

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::Other: return "other";
    case Phase::Forward: return "forward";
    case Phase::Backward: return "backward";
    case Phase::Optimizer: return "optimizer";
  }
  return "other";
}

namespace detail {

std::atomic<int> running_recorders{0};
std::atomic<int> context_readers{0};

namespace {

struct LabelTable {
  std::mutex mutex;
  std::deque<std::string> texts{std::string()};  // id -> text; a deque keeps references valid
  std::unordered_map<std::string_view, uint32_t> ids{{std::string_view(), 0}};
};

LabelTable& label_table() {
  // NOTE: never destroyed: a recording thread may outlive static destruction order.
  static LabelTable* const table = new LabelTable();
  return *table;
}

}  // namespace

uint32_t intern_label(std::string_view text) {
  LabelTable& table = label_table();
  std::lock_guard<std::mutex> lock(table.mutex);
  if (auto it = table.ids.find(text); it != table.ids.end()) return it->second;
  const auto id = static_cast<uint32_t>(table.texts.size());
  const std::string& stored = table.texts.emplace_back(text);
  table.ids.emplace(std::string_view(stored), id);
  return id;
}

std::string label_text(uint32_t id) {
  LabelTable& table = label_table();
  std::lock_guard<std::mutex> lock(table.mutex);
  return id < table.texts.size() ? table.texts[id] : std::string();
}

Context& current_context() {
  thread_local Context context;
  return context;
}

}  // namespace detail

Phase current_phase() { return detail::tracking() ? detail::current_context().phase : Phase::Other; }

OpScope::OpScope(std::string_view op_name) {
  if (!detail::tracking()) return;
  engaged_ = true;
  previous_ = detail::current_context().op;
  detail::current_context().op = detail::intern_label(op_name);
}

OpScope::~OpScope() {
  if (engaged_) detail::current_context().op = previous_;
}

ModuleScope::ModuleScope(std::string_view name) {
  if (!detail::tracking()) return;
  engaged_ = true;
  detail::Context& context = detail::current_context();
  previous_ = context.module;
  const std::string path =
      previous_ == 0 ? std::string(name) : detail::label_text(previous_) + "." + std::string(name);
  context.module = detail::intern_label(path);
  // Events before this point belong to the enclosing module's ops, not to this one's.
  detail::close_forward_op_window();
}

ModuleScope::~ModuleScope() {
  if (!engaged_) return;
  detail::current_context().module = previous_;
  detail::close_forward_op_window();
}

NodeScope::NodeScope(const void* node, const char* node_name) {
  if (!detail::tracking()) return;
  engaged_ = true;
  detail::Context& context = detail::current_context();
  previous_ = context;
  context.op = detail::intern_label(node_name);
  context.module = detail::module_of_node(node);
}

NodeScope::~NodeScope() {
  if (engaged_) detail::current_context() = previous_;
}

detail::Context saved_context() { return detail::tracking() ? detail::current_context() : detail::Context{}; }

ContextScope::ContextScope(const detail::Context& context) {
  if (!detail::tracking()) return;
  engaged_ = true;
  detail::Context& current = detail::current_context();
  previous_ = current;
  // The phase stays the current one (backward, for a recompute).
  current = {context.op, context.module, current.phase, context.calling_module};
}

ContextScope::~ContextScope() {
  if (engaged_) detail::current_context() = previous_;
}

PhaseScope::PhaseScope(Phase phase) {
  if (!detail::tracking()) return;
  engaged_ = true;
  previous_ = detail::current_context().phase;
  detail::current_context().phase = phase;
  detail::close_forward_op_window();
}

PhaseScope::~PhaseScope() {
  if (!engaged_) return;
  detail::current_context().phase = previous_;
  detail::close_forward_op_window();
}

}  // namespace mg::memory
