// autograd/grad_mode.h — whether ops record history, per thread (like torch.no_grad).
#pragma once

namespace mg {

class GradMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// Disables gradient recording in a scope: ops save nothing for backward, so evaluation
// costs no activation memory.
class NoGradGuard {
 public:
  NoGradGuard() : previous_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Re-enables recording inside a NoGradGuard scope.
class EnableGradGuard {
 public:
  EnableGradGuard() : previous_(GradMode::is_enabled()) { GradMode::set_enabled(true); }
  ~EnableGradGuard() { GradMode::set_enabled(previous_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace mg
