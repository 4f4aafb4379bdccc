// examples/common/init_from.h — --init-from FILE: a new run that starts from the model's
// weights in a checkpoint of the same program (written by --save), and from nothing else
// there: a fresh optimizer and schedule, step 0, the run's own --seed for everything that
// draws. For fine-tuning with other settings, or for extending a finished run to more
// steps (--resume continues a run exactly as it was laid out; --init-from lays out a new one).
#pragma once

#include <string>

#include <memgrad/nn/module.h>

namespace examples {

// The usage text's lines for --init-from.
std::string init_from_usage();

// Throws UsageError for --init-from with --resume (a new run, or the saved one: one of the
// two), or in a mode that trains nothing (`mode`: the flag that chose it, "" when training).
void check_init_from_flags(const std::string& init_from, const std::string& resume, const std::string& mode);

// At the start of the run, before any work: `path` is a readable checkpoint of
// `model_name` (only its header is read). Throws mg::Error naming --init-from and the file.
void check_initial_weights(const std::string& path, const std::string& model_name);

// The model's weights from the checkpoint `path` of `model_name` (of any --amp: the weights
// are float32), nothing else. A checkpoint of another size is refused with the entry and
// both shapes named, and changes nothing.
void load_initial_weights(const std::string& path, const std::string& model_name, mg::nn::Module& model);

}  // namespace examples
