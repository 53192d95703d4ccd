#pragma once
// Evaluation, probes and encoding run the model in eval mode (no dropout) and must hand it back in the mode they
// found it, also when they throw (a bad text, out of memory): the trainer goes on training after a failed
// evaluation is reported.

namespace spread {

// Eval mode for the guard's scope. `Module` is a LibTorch module holder (Transformer, ...).
template <class Module>
class EvalModeGuard {
 public:
  explicit EvalModeGuard(Module& module) : module_(module), was_training_(module->is_training()) { module_->eval(); }
  ~EvalModeGuard() { module_->train(was_training_); }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  Module& module_;
  bool was_training_;
};

}  // namespace spread
