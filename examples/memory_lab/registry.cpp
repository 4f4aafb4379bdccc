// examples/memory_lab/registry.cpp — the list of experiments and their claims, in one place
// so that --list, --experiment and the final table agree.
#include "examples/memory_lab/experiment.h"

namespace memory_lab {

const std::vector<Experiment>& all_experiments() {
  static const std::vector<Experiment> experiments = {
      {"no_grad", "Wrap evaluation in no_grad: it saves the activation memory.", run_no_grad},
      {"detach_clone", "detach() is free, clone() doubles the memory.", run_detach_clone},
      {"empty_cache", "Call empty_cache() after del to free the memory.", run_empty_cache},
      {"retain_graph", "backward(retain_graph=True) in a loop keeps every iteration's graph alive.",
       run_retain_graph},
      {"kept_losses", "Keeping loss tensors instead of loss.item() leaks memory.", run_kept_losses},
      {"accumulation", "Gradient accumulation over 8 steps needs 7x more memory.", run_accumulation},
      {"zero_grad", "zero_grad(set_to_none=True) saves the gradients' memory.", run_zero_grad},
      {"optimizer_state",
       "Optimizer state costs: SGD nothing, SGD with momentum 1x the parameters, Adam 2x, Adagrad 1x.",
       run_optimizer_state},
      {"autocast", "Mixed precision (16-bit autocast) halves the memory.", run_autocast},
      {"checkpointing", "Gradient checkpointing trades one extra forward for most of the activation memory.",
       run_checkpointing},
      {"attention_memory", "Attention memory is quadratic in the sequence length.", run_attention_memory},
      {"adamw_state", "AdamW's state costs twice the parameters (and mixed precision does not change it).",
       run_adamw_state},
      {"bert_case",
       "BERT-base, batch 8 out of memory: gradient checkpointing took it from 24 GB to 14 GB, mixed precision "
       "then to 9 GB.",
       run_bert_case},
  };
  return experiments;
}

const Experiment* find_experiment(const std::string& name) {
  for (const Experiment& experiment : all_experiments()) {
    if (experiment.name == name) return &experiment;
  }
  return nullptr;
}

}  // namespace memory_lab
