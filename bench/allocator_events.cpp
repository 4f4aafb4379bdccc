// bench/allocator_events.cpp — what listening to the allocator costs on the host: the time
// of one allocate + free of a small CPU tensor with nobody listening, and with a memory
// Recorder running (two events per pair: Allocate, Free).
//
//   bench_allocator_events [--pairs N] [--rounds R] [--bytes B]
//
// Each round times N pairs back to back; the best round is reported (the machine's noise
// only ever adds time). Output: one JSON line on stdout.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <limits>
#include <string>

#include <memgrad/core/factory.h>
#include <memgrad/io/json.h>
#include <memgrad/memory/recorder.h>
#include "examples/common/cli.h"

namespace {

struct Args {
  int64_t pairs = 200000;
  int64_t rounds = 5;
  int64_t bytes = 1024;
};

// The best round's nanoseconds per allocate + free.
double best_ns_per_pair(const Args& args) {
  double best = std::numeric_limits<double>::infinity();
  for (int64_t round = 0; round < args.rounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < args.pairs; ++i) {
      mg::Tensor tensor = mg::empty({args.bytes}, {.dtype = mg::DType::UInt8});
    }
    const std::chrono::duration<double, std::nano> elapsed = std::chrono::steady_clock::now() - start;
    best = std::min(best, elapsed.count() / static_cast<double>(args.pairs));
  }
  return best;
}

}  // namespace

std::string usage(const std::string& name) {
  return "usage: " + name + " [--pairs N] [--rounds R] [--bytes B]\n";
}

int main(int argc, char** argv) {
  Args args;
  bool help = false;
  const auto parse = [&](int count, char** values) {
    examples::parse_flags(
        count, values,
        {{"--pairs", [&](const std::string& v) { args.pairs = examples::parse_count("--pairs", v); }},
         {"--rounds", [&](const std::string& v) { args.rounds = examples::parse_count("--rounds", v); }},
         {"--bytes", [&](const std::string& v) { args.bytes = examples::parse_count("--bytes", v); }}},
        {{"--help", [&] { help = true; }}, {"-h", [&] { help = true; }}});
    return !help;
  };
  return examples::run_main(argc, argv, "bench_allocator_events", parse, usage, [&] {
    const double idle = best_ns_per_pair(args);
    // Enough room that the ring never drops an event (dropping costs more than storing).
    mg::memory::Recorder recorder({.capacity = static_cast<size_t>(2 * args.pairs * args.rounds)});
    recorder.start();
    const double recording = best_ns_per_pair(args);
    recorder.stop();

    mg::JsonWriter json;
    json.begin_object()
        .key("pairs").value(args.pairs)
        .key("rounds").value(args.rounds)
        .key("bytes").value(args.bytes)
        .key("ns_per_pair_idle").value(idle)
        .key("ns_per_pair_recording").value(recording)
        .key("ns_per_event_recording").value((recording - idle) / 2)
        .end_object();
    std::cout << json.str() << "\n";
    return 0;
  });
}
