// examples/gpt/checkpoint.cpp — the gpt run's fields in its checkpoint file.
#include "examples/gpt/checkpoint.h"

#include <string>
#include <vector>

#include <memgrad/core/error.h>
#include "examples/common/run_checkpoint.h"

namespace gpt {
namespace {

// The sizes a checkpoint's tensors have: layers, heads, width, block and vocabulary.
std::vector<int64_t> model_sizes(const mg::nn::GPTOptions& options) {
  return {options.n_layer, options.n_head, options.n_embd, options.block_size, options.vocab_size};
}

std::string describe_sizes(const std::vector<int64_t>& sizes) {
  if (sizes.size() != 5) return std::to_string(sizes.size()) + " sizes";
  return mg::detail::str_cat(sizes[0], " layers, ", sizes[1], " heads, ", sizes[2], " wide, block ", sizes[3],
                             ", vocabulary ", sizes[4]);
}

const std::string kWindows = "windows";  // the windows' generator in the file (rng.windows)

}  // namespace

void save_checkpoint(const std::string& path, const mg::nn::GPT& model,
                     const mg::optim::OptimizerStateDict& optimizer_state, const RunParts& parts, const RunState& state) {
  examples::save_run_checkpoint(path, kModelName, parts.precision,
                                {.model = &model,
                                 .optimizer_state = &optimizer_state,
                                 .scheduler = &parts.scheduler,
                                 .generators = {{kWindows, &parts.windows}},
                                 .step = state.step,
                                 .tensors = {
                                     {"model_sizes", examples::run_integers(model_sizes(model.options()))},
                                     {"total_steps", examples::run_integer(state.total_steps)},
                                     {"best_val_loss", examples::run_real(state.best_val_loss)},
                                     {"best_step", examples::run_integer(state.best_step)},
                                     {"seconds", examples::run_real(state.seconds)},
                                     {"seconds_to_best", examples::run_real(state.seconds_to_best)},
                                     {"eval_steps", examples::run_integers(state.eval_steps)},
                                     {"val_losses", examples::run_reals(state.val_losses)},
                                     {"train_losses", examples::run_reals(state.train_losses)},
                                 }});
}

void save_checkpoint(const std::string& path, const mg::nn::GPT& model, const mg::optim::Optimizer& optimizer,
                     const RunParts& parts, const RunState& state) {
  save_checkpoint(path, model, mg::optim::state_dict(optimizer), parts, state);
}

RunState load_checkpoint(const std::string& path, mg::nn::GPT& model, mg::optim::Optimizer& optimizer,
                         const RunParts& parts, int64_t total_steps, const examples::DistributedRun& distributed) {
  RunState state;
  examples::load_run_checkpoint(
      path, kModelName, {.model = &model, .scheduler = &parts.scheduler, .generators = {{kWindows, &parts.windows}}},
      optimizer, parts.precision, distributed, [&](const examples::RunFields& fields) {
        const std::vector<int64_t> saved_sizes = fields.integers("model_sizes");
        MG_CHECK(saved_sizes == model_sizes(model.options()), "checkpoint '", path, "' holds a GPT of ",
                 describe_sizes(saved_sizes), "; this run builds one of ", describe_sizes(model_sizes(model.options())),
                 ". Hint: resume with the --preset and size flags the run started with.");
        state.step = fields.step();
        state.total_steps = fields.integer("total_steps");
        MG_CHECK(state.total_steps == total_steps, "checkpoint '", path, "' belongs to a run of ", state.total_steps,
                 " steps, but this one has ", total_steps, ". Hint: resume with the --steps it was saved with.");
        MG_CHECK(state.step >= 0 && state.step <= state.total_steps, "checkpoint '", path, "': step ", state.step,
                 " is outside its run of ", state.total_steps, " steps.");
        state.best_val_loss = fields.real("best_val_loss");
        state.best_step = fields.integer("best_step");
        state.seconds = fields.real("seconds");
        state.seconds_to_best = fields.real("seconds_to_best");
        state.eval_steps = fields.integers("eval_steps");
        state.val_losses = fields.reals("val_losses");
        state.train_losses = fields.reals("train_losses");
        MG_CHECK(state.val_losses.size() == state.eval_steps.size() &&
                     state.train_losses.size() == state.eval_steps.size(),
                 "checkpoint '", path, "': the loss histories disagree in length (", state.eval_steps.size(),
                 " steps, ", state.val_losses.size(), " validation and ", state.train_losses.size(),
                 " training losses).");
      });
  return state;
}

}  // namespace gpt
