// examples/memory_lab/experiment.h — what every memory-lab experiment is: a claim as
// tutorials state it, a function that measures it on a device, and the result it reports
// (named measurements and a verdict with one sentence of why).
//
// The verdict is decided from the measured bytes, not written in advance: an experiment
// states the rule (e.g. "FALSE when the activation peaks are equal"), so a change in
// memgrad that changes the facts changes the verdict.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <memgrad/core/device.h>

namespace memory_lab {

enum class Verdict { True, False, Partly };
const char* verdict_name(Verdict verdict);  // "TRUE", "FALSE", "PARTLY"

enum class Unit { Bytes, Ratio, Milliseconds };

struct Measurement {
  std::string name;      // snake_case key in the JSON output, e.g. "activation_peak_bytes"
  std::string label;     // what was measured, for people
  double value = 0;      // bytes are whole numbers, exact in a double below 2^53
  Unit unit = Unit::Bytes;
  std::string expected;  // the arithmetic beside it, for people; empty when none applies
};

// Shorthands for the three kinds of measurement.
Measurement bytes(std::string name, std::string label, int64_t value, std::string expected = "");
Measurement ratio(std::string name, std::string label, double value, std::string expected = "");
Measurement milliseconds(std::string name, std::string label, double value);

// 1234567 -> "1,234,567": byte counts people can read at a glance.
std::string with_commas(int64_t value);
// 0.51234 -> "0.512".
std::string format_ratio(double value);

struct Result {
  std::vector<Measurement> measurements;
  Verdict verdict = Verdict::Partly;
  std::string why;  // one sentence
};

struct Experiment {
  std::string name;   // what --experiment selects
  std::string claim;  // the advice, as tutorials state it
  Result (*run)(mg::Device device);
};

// Every experiment, in the order they run and print.
const std::vector<Experiment>& all_experiments();
// The experiment called `name`, or null.
const Experiment* find_experiment(const std::string& name);

// Each experiment's entry point, defined in its own file.
Result run_no_grad(mg::Device device);            // no_grad.cpp
Result run_detach_clone(mg::Device device);       // detach_clone.cpp
Result run_empty_cache(mg::Device device);        // empty_cache.cpp
Result run_retain_graph(mg::Device device);       // kept_graphs.cpp
Result run_kept_losses(mg::Device device);        // kept_graphs.cpp
Result run_accumulation(mg::Device device);       // accumulation.cpp
Result run_zero_grad(mg::Device device);          // zero_grad.cpp
Result run_optimizer_state(mg::Device device);    // optimizer_state.cpp
Result run_autocast(mg::Device device);           // autocast.cpp
Result run_checkpointing(mg::Device device);      // checkpointing.cpp
Result run_attention_memory(mg::Device device);   // attention_memory.cpp
Result run_adamw_state(mg::Device device);        // adamw_state.cpp
Result run_bert_case(mg::Device device);          // bert_case.cpp

}  // namespace memory_lab
