// examples/common/init_from.cpp — --init-from: checked on the command line, then at the
// start of the run (the file's header), then loaded into the model alone.
#include "examples/common/init_from.h"

#include <memgrad/core/error.h>
#include <memgrad/io/safetensors.h>
#include <memgrad/training/checkpoint.h>
#include "examples/common/cli.h"
#include "examples/common/run_checkpoint.h"

namespace examples {

std::string init_from_usage() {
  return R"(  --init-from FILE         start a new run from the model weights of a checkpoint that
                           --save wrote (of the same model and size), and nothing else of
                           it: a fresh optimizer and schedule, step 0 (fine-tuning, or a
                           finished run extended to more steps); not with --resume
)";
}

void check_init_from_flags(const std::string& init_from, const std::string& resume, const std::string& mode) {
  if (init_from.empty()) return;
  if (!resume.empty()) {
    throw UsageError("--init-from starts a new run from a checkpoint's weights and --resume continues the saved run "
                     "as it was: give one of them");
  }
  if (!mode.empty()) throw UsageError("--init-from is for training: " + mode + " trains nothing");
}

void check_initial_weights(const std::string& path, const std::string& model_name) {
  try {
    check_checkpoint_model(path, mg::read_safetensors_metadata(path), model_name);
  } catch (const mg::Error& error) {
    throw mg::Error(mg::detail::str_cat("--init-from: ", error.what()));
  }
}

void load_initial_weights(const std::string& path, const std::string& model_name, mg::nn::Module& model) {
  try {
    const mg::CheckpointMetadata file_metadata = mg::read_safetensors_metadata(path);
    if (is_pre_library_checkpoint(file_metadata)) {  // its model.* entries are the weights
      check_checkpoint_model(path, file_metadata, model_name);
      mg::nn::NamedTensors weights;
      for (auto& [key, tensor] : mg::load_safetensors(path)) {
        if (key.starts_with("model.")) weights.emplace_back(key.substr(6), std::move(tensor));
      }
      model.load_state_dict(weights);
      return;
    }
    mg::load_checkpoint(path, {.model = &model,
                               .default_generator = false,
                               .check = [&](const mg::Checkpoint& checkpoint) {
                                 check_checkpoint_model(path, checkpoint.metadata, model_name);
                               }});
  } catch (const mg::Error& error) {
    throw mg::Error(mg::detail::str_cat("--init-from: ", error.what()));
  }
}

}  // namespace examples
