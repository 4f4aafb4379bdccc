// examples/gpt/summary.cpp — the gpt program's --summary-json.
#include "examples/gpt/summary.h"

#include <vector>

#include <memgrad/memory/snapshot.h>
#include "examples/common/memory_report.h"
#include "examples/common/mixed_precision.h"
#include "examples/common/summary.h"

namespace gpt {
namespace {

template <class T>
void write_array(mg::JsonWriter& json, const char* key, const std::vector<T>& values) {
  json.key(key).begin_array();
  for (const T& value : values) json.value(value);
  json.end_array();
}

// The last value of `values`, or null before the first.
void write_last(mg::JsonWriter& json, const char* key, const std::vector<double>& values) {
  json.key(key);
  if (values.empty()) {
    json.null();
  } else {
    json.value(values.back());
  }
}

}  // namespace

void write_setup(mg::JsonWriter& json, const Args& args, const TextCorpus& corpus, int64_t batch_size) {
  const mg::nn::GPTOptions options = model_options(args);
  json.key("model").value(kModelName)
      .key("preset").value(args.preset)
      .key("n_layer").value(options.n_layer)
      .key("n_head").value(options.n_head)
      .key("n_embd").value(options.n_embd)
      .key("block_size").value(options.block_size)
      .key("vocab_size").value(options.vocab_size)
      .key("dropout").value(options.dropout)
      .key("dataset").value(corpus.source)
      .key("train_bytes").value(static_cast<int64_t>(corpus.train.size()))
      .key("val_bytes").value(static_cast<int64_t>(corpus.validation.size()))
      .key("device").value(args.device.str())
      .key("optimizer").value("adamw")
      .key("amp").value(examples::amp_name(args.amp))
      .key("optimizer_state").value(examples::optimizer_state_name(args.optimizer_state))
      .key("batch_size").value(batch_size)
      .key("accum").value(args.accum)
      .key("checkpoint").value(mg::nn::block_checkpoint_name(args.checkpoint));
}

void write_summary(const Args& args, const TextCorpus& corpus, const RunState& state, const SessionFacts& facts,
                   const std::vector<mg::memory::Snapshot>& peaks) {
  mg::JsonWriter json;
  json.begin_object();
  write_setup(json, args, corpus, args.batch_size);
  json.key("ranks").value(facts.ranks)
      .key("zero").value(args.zero)
      .key("schedule").value("warmup_cosine")
      .key("lr").value(args.lr)
      .key("warmup_steps").value(warmup_steps(args))
      .key("total_steps").value(state.total_steps)
      .key("steps").value(state.step)
      .key("resumed_from_step").value(facts.resumed_from);
  write_last(json, "val_loss", state.val_losses);
  write_last(json, "train_loss", state.train_losses);
  json.key("best_val_loss");
  if (state.eval_steps.empty()) {
    json.null();
  } else {
    json.value(state.best_val_loss);
  }
  const double tokens_per_s = facts.train_seconds > 0 ? facts.train_tokens / facts.train_seconds : 0.0;
  json.key("best_step").value(state.best_step)
      .key("seconds_to_best").value(state.seconds_to_best)
      .key("seconds").value(state.seconds)
      .key("tokens_per_s").value(tokens_per_s)
      .key("model_tflop_per_s").value(facts.flops_per_token * tokens_per_s / 1e12);
  write_array(json, "eval_steps", state.eval_steps);
  write_array(json, "val_loss_per_eval", state.val_losses);
  write_array(json, "train_loss_per_eval", state.train_losses);
  json.key("parameters").value(facts.parameters).key("memory");
  mg::memory::write_json(json, mg::memory::snapshot(args.device));
  examples::write_peaks_by_rank(json, peaks);
  json.end_object();
  examples::write_file_atomically(args.summary_json, json.str());
}

}  // namespace gpt
