// tests/examples/test_auto_accum_epochs_cli.cpp — out of memory in the shared epoch loop
// (examples/common/training.cpp), on the CPU under --memory-cap: mnist and resnet with
// --auto-accum say where they ran out, cut the step's batch in two and go on, ending with
// the very weights, optimizer state, schedule and generator of a run started with that
// accumulation (--batch B/2 --accum 2 for --batch B); without it the run ends with the
// allocator's message; and the flags that cannot go with it are refused before any work.
//
// NOTE: a split only pays where half a batch's activations outweigh what accumulating
// adds (the gradients live through the second micro-batch's backward) and the optimizer
// state a later step holds, so the batches are large for the CPU. The caps sit in the
// middle of the windows measured on 2026-12-07 (one split inside them, two below, none
// above): mnist's MLP at --batch 8192, 70..94 MiB; resnet's one step of 32, 215..230 MiB
// (the allocator's 20 MiB segments make these windows lumpy).
#include <catch2/catch.hpp>
#include <string>

#include "examples/output_checks.h"
#include "examples/program_runner.h"

using Catch::Matchers::Contains;
using mg_test::Outcome;
using mg_test::TempDir;

namespace {

int occurrences(const std::string& text, const std::string& part) {
  int found = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++found;
  return found;
}

std::string mnist_run(const TempDir& dir) {
  return "--data " + dir.path.string() + " --model mlp --epochs 2 --threads 1 ";
}

std::string resnet_run(const TempDir& dir) {
  return "--data " + dir.path.string() + " --epochs 1 --limit 32 --threads 1 ";
}

}  // namespace

TEST_CASE("mnist --auto-accum under --memory-cap goes on in halved batches, as --accum would",
          "[examples][mnist][auto-accum]") {
  TempDir dir("mnist-auto-accum");
  write_two_class_split(dir, "train", 8192, 1);
  write_two_class_split(dir, "t10k", 64, 2);
  // One step an epoch; the split of the first carries over to the second epoch.
  const Outcome capped = mg_test::run_ok(dir, "mnist", mnist_run(dir) + "--batch 8192 --memory-cap 80MiB --auto-accum "
                                                       "--save " + dir.file("capped.safetensors"));
  CHECK_THAT(capped.out, Contains("out of memory at micro-batch 1 of 1; going on with 2 micro-batches of 4096\n"));
  CHECK(occurrences(capped.out, "out of memory at") == 1);
  CHECK_THAT(capped.out, Contains("epoch 2: train loss"));
  mg_test::run_ok(dir, "mnist", mnist_run(dir) + "--batch 4096 --accum 2 --save " + dir.file("accum.safetensors"));
  mg_test::check_same_checkpoint(dir.file("accum.safetensors"), dir.file("capped.safetensors"));
}

TEST_CASE("resnet --auto-accum under --memory-cap splits a step, batch norm statistics put back, as --accum would",
          "[examples][resnet][auto-accum]") {
  TempDir dir("resnet-auto-accum");
  write_two_class_split(dir, "train", 32, 1);
  write_two_class_split(dir, "t10k", 8, 2);
  // The failed attempt's forward updated every batch norm's running statistics: the retry
  // must start from the values before it, or they end other than --accum's.
  const Outcome capped = mg_test::run_ok(dir, "resnet", resnet_run(dir) + "--batch 32 --memory-cap 224MiB --auto-accum "
                                                        "--save " + dir.file("capped.safetensors"));
  CHECK_THAT(capped.out, Contains("out of memory at micro-batch 1 of 1; going on with 2 micro-batches of 16\n"));
  CHECK(occurrences(capped.out, "out of memory at") == 1);
  CHECK_THAT(capped.out, Contains("epoch 1: train loss"));
  mg_test::run_ok(dir, "resnet", resnet_run(dir) + "--batch 16 --accum 2 --save " + dir.file("accum.safetensors"));
  mg_test::check_same_checkpoint(dir.file("accum.safetensors"), dir.file("capped.safetensors"));
}

TEST_CASE("mnist and resnet out of memory without --auto-accum end with the allocator's message",
          "[examples][mnist][resnet][auto-accum]") {
  TempDir dir("auto-accum-off");
  write_two_class_split(dir, "train", 8192, 1);
  write_two_class_split(dir, "t10k", 64, 2);
  const Outcome mnist = mg_test::run_program(dir, "mnist", mnist_run(dir) + "--batch 8192 --memory-cap 80MiB");
  CHECK(mnist.exit_code == 1);
  CHECK_THAT(mnist.err, Contains("cpu out of memory: tried to allocate") &&
                            Contains("memgrad may reserve at most 80.00 MiB on this device"));
  CHECK_THAT(mnist.out, !Contains("epoch 1:"));

  const Outcome resnet = mg_test::run_program(dir, "resnet", resnet_run(dir) + "--batch 32 --memory-cap 224MiB");
  CHECK(resnet.exit_code == 1);
  CHECK_THAT(resnet.err, Contains("cpu out of memory: tried to allocate") &&
                             Contains("memgrad may reserve at most 224.00 MiB on this device"));
}

TEST_CASE("the flags --auto-accum and --memory-cap are refused where they cannot work, before any work",
          "[examples][auto-accum]") {
  TempDir dir("auto-accum-flags");
  for (const std::string program : {"mnist", "resnet", "gpt"}) {
    mg_test::check_usage_error(dir, program, "--auto-accum --distributed",
                               "--auto-accum is for one process: every rank would have to split its batches alike");
    mg_test::check_usage_error(dir, program, "--predict-memory --auto-accum",
                               "--auto-accum does nothing with --predict-memory or --fit-batch");
    mg_test::check_usage_error(dir, program, "--predict-memory --memory-cap 1GiB",
                               "--memory-cap does nothing with --predict-memory or --fit-batch");
  }
  for (const std::string program : {"resnet", "gpt"}) {
    mg_test::check_usage_error(dir, program, "--bench --memory-cap 1GiB --auto-accum",
                               "--memory-cap and --auto-accum do nothing with --bench");
  }
}
