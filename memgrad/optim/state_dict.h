// optim/state_dict.h — an optimizer's state as named tensors, and checkpoints of it in a
// safetensors file, laid out like PyTorch's optimizer.state_dict():
//
//   state.<i>.<entry>          parameter i's state: momentum_buffer (SGD), exp_avg,
//                              exp_avg_sq, max_exp_avg_sq (Adam), sum (Adagrad), master_param
//                              (offloaded Adam: float32, on the host), step (a 0-d
//                              float32 counter); i counts the parameters of all groups in
//                              order, and a parameter not stepped yet has no entries.
//                              Adam8bit/AdamW8bit: exp_avg and exp_avg_sq are uint8 codes
//                              of the parameter's shape, with exp_avg_absmax and
//                              exp_avg_sq_absmax (1-d float32, one per block) beside them
//                              (optim/adam_8bit.h); its small parameters keep Adam's entries
//   param_groups.<g>.params    1-d int64: the indices i of group g's parameters
//   param_groups.<g>.lr        0-d float64, and one such tensor per other hyper-parameter
//                              (param_groups.<g>.momentum, .beta1, .weight_decay, ...)
//
// The file's __metadata__ holds {"format": "pt", "optimizer": "<kind>"} (SGD, Adam, AdamW,
// Adagrad, Adam8bit, AdamW8bit, OffloadedAdam, OffloadedAdamW) plus whatever the caller adds
// (an epoch, say).
// NOTE: hyper-parameters are float64 scalar tensors rather than JSON in __metadata__: they
// read back bit for bit with no float parser, and PyTorch's safetensors loader sees them too.
//
// Loading checks everything before it changes anything: the optimizer's kind, the number
// of groups and of parameters in each, every entry's name, shape and dtype. The learning
// rate is restored (schedulers move it during a run); every other hyper-parameter belongs
// to the optimizer's constructor, so one that differs from the checkpoint's is refused
// rather than silently kept or overwritten.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "memgrad/core/tensor.h"
#include "memgrad/optim/optimizer.h"

namespace mg::optim {

struct OptimizerStateDict {
  std::string kind;  // "SGD", "Adam", "AdamW", "Adam8bit", "AdamW8bit", "Adagrad"
  std::vector<std::pair<std::string, Tensor>> tensors;  // named as above
};

// "SGD", "Adam", "AdamW", "Adam8bit", "AdamW8bit" or "Adagrad" (an optimizer defined elsewhere: its C++ type name).
std::string kind_name(const Optimizer& optimizer);

// The state and hyper-parameters; the state tensors are the optimizer's own (not copies).
OptimizerStateDict state_dict(const Optimizer& optimizer);
// Replaces `optimizer`'s state with `state` (copied onto each parameter's device, tagged
// OPTIMIZER_STATE) and sets every group's lr. `source` names where `state` came from in
// error messages ("optimizer checkpoint 'run.safetensors'").
void load_state_dict(Optimizer& optimizer, const OptimizerStateDict& state,
                     const std::string& source = "the optimizer state dict");

// load_state_dict in two halves, for a caller that checks several states before it changes
// any (training/checkpoint.h): check_state_dict checks `state` against `optimizer` and
// copies it onto the parameters' devices, changing nothing; apply_state_dict then takes it
// and cannot fail.
struct CheckedOptimizerState {
  std::vector<double> lrs;         // one per group
  std::vector<ParamState> states;  // one per all_params() entry
};
CheckedOptimizerState check_state_dict(const Optimizer& optimizer, const OptimizerStateDict& state,
                                       const std::string& source = "the optimizer state dict");
void apply_state_dict(Optimizer& optimizer, CheckedOptimizerState checked);

// Writes state_dict(optimizer) to `path` atomically (an earlier file survives a failed
// save); `metadata` is added to the file's __metadata__.
void save(const Optimizer& optimizer, const std::string& path,
          const std::vector<std::pair<std::string, std::string>>& metadata = {});
// Reads a file written by save() into `optimizer`; a file that does not fit, or a corrupt
// one, changes nothing and throws mg::Error naming the file.
void load(Optimizer& optimizer, const std::string& path);

// The two halves of save() and load(), for callers that keep entries of their own in the
// same file (amp::save adds a GradScaler's "scaler.*" and amp::load takes them out before
// load_state_dict, which refuses names it does not know).
void save(const OptimizerStateDict& state, const std::string& path,
          const std::vector<std::pair<std::string, std::string>>& metadata = {});
OptimizerStateDict read_state_dict(const std::string& path);
// How error messages name the checkpoint at `path`: "optimizer checkpoint '<path>'".
std::string checkpoint_source(const std::string& path);

}  // namespace mg::optim
