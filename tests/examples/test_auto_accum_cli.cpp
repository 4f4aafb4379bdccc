// tests/examples/test_auto_accum_cli.cpp — out of memory in a gpt run, on the CPU under
// --memory-cap: with --auto-accum the run says where it ran out, splits its batches in
// two and goes on, ending with the very weights and optimizer state of a run started with
// that accumulation (--batch 8 --accum 2 for --batch 16); without it, or when a
// micro-batch of one sample does not fit, the run ends with an error that says why.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include <memgrad/core/error.h>
#include <memgrad/core/factory.h>
#include "examples/common/accumulation.h"
#include "examples/common/auto_accumulation.h"
#include "examples/output_checks.h"
#include "examples/program_runner.h"

using Catch::Matchers::Contains;
using mg_test::Outcome;
using mg_test::TempDir;

namespace {

// NOTE: the tiny model's step of 16 windows reserves 14 MiB on the CPU and one of 8 windows
// 8 MiB (measured 2026-12-07), so a cap of 10 MiB fits only the smaller.
const std::string kRun = "--data " MG_SOURCE_DIR "/tests/examples/data/harbour_town.txt --preset tiny --steps 6 "
                         "--eval-interval 3 --eval-iters 1 --threads 1 ";

}  // namespace

TEST_CASE("gpt --auto-accum under --memory-cap goes on in smaller micro-batches, as --accum would",
          "[examples][gpt][auto-accum]") {
  TempDir dir("gpt-auto-accum");
  // NOTE: 8 MiB, where batch 16 runs out in the first step and batch 8 fits: since the MLP
  // stopped keeping GELU's output (mg::mlp, 2026-12-07), batch 16's first step fits in 10 MiB
  // (AdamW's state is not made yet) and only the second ran out, after a step of 16 rows.
  const Outcome capped = mg_test::run_program(
      dir, "gpt", kRun + "--batch 16 --memory-cap 8MiB --auto-accum --save " + dir.file("capped.safetensors"));
  INFO(capped.out << capped.err);
  REQUIRE(capped.exit_code == 0);
  CHECK_THAT(capped.out, Contains("out of memory at micro-batch 1 of 1; going on with 2 micro-batches of 8\n"));
  CHECK_THAT(capped.out, Contains("step 6: train loss"));
  REQUIRE(mg_test::run_program(dir, "gpt", kRun + "--batch 8 --accum 2 --save " + dir.file("accum.safetensors"))
              .exit_code == 0);

  // Every step's gradients were those of the --accum run: the weights and AdamW's state
  // end the same to the byte.
  const auto capped_tensors = mg_test::tensor_bytes(dir.file("capped.safetensors"));
  const auto accum_tensors = mg_test::tensor_bytes(dir.file("accum.safetensors"));
  int compared = 0;
  for (const auto& [name, bytes] : accum_tensors) {
    if (name.rfind("model.", 0) != 0 && name.rfind("optimizer.", 0) != 0) continue;
    INFO(name);
    REQUIRE(capped_tensors.count(name) == 1);
    CHECK(capped_tensors.at(name) == bytes);
    ++compared;
  }
  CHECK(compared > 20);
}

TEST_CASE("gpt out of memory without --auto-accum, or at one sample a micro-batch, ends with a clear error",
          "[examples][gpt][auto-accum]") {
  TempDir dir("gpt-auto-accum");
  const Outcome plain = mg_test::run_program(dir, "gpt", kRun + "--batch 16 --memory-cap 10MiB");
  CHECK(plain.exit_code == 1);
  CHECK_THAT(plain.err, Contains("cpu out of memory: tried to allocate") &&
                            Contains("memgrad may reserve at most 10.00 MiB on this device"));

  const Outcome too_small = mg_test::run_program(dir, "gpt", kRun + "--batch 16 --memory-cap 2MiB --auto-accum");
  CHECK(too_small.exit_code == 1);
  CHECK_THAT(too_small.out, Contains("going on with 16 micro-batches of 1\n"));
  CHECK_THAT(too_small.err, Contains("out of memory at micro-batch 1 of 16 with micro-batches of one sample: "
                                     "--auto-accum cannot split them further."));
}

TEST_CASE("a retry under --auto-accum halves the micro-batch, every piece holding a sample, for any batch size",
          "[examples][auto-accum]") {
  for (const int64_t rows : {16, 10, 3}) {
    INFO(rows << " rows");
    const mg::Tensor inputs = mg::arange(0, static_cast<double>(rows), 1, {.dtype = mg::DType::Int64});
    const mg::data::Batch batch{.inputs = inputs, .targets = inputs};
    examples::AutoAccumulation auto_accum(/*enabled=*/true);
    std::vector<int64_t> largest_pieces;
    // A step runs out of memory until its micro-batches are of 1 sample; each attempt must
    // cover the batch's rows exactly once, in order, with no empty piece.
    auto_accum.run(mg::Device::cpu(), /*batches=*/1, rows, [&](int64_t micro_batch_rows) {
      int64_t next_row = 0, largest = 0;
      for (int64_t piece = 0; piece < examples::piece_count(rows, micro_batch_rows); ++piece) {
        const mg::Tensor rows_of_piece = examples::batch_piece(batch, piece, micro_batch_rows).inputs;
        REQUIRE(rows_of_piece.numel() > 0);
        CHECK(rows_of_piece.to_vector<int64_t>().front() == next_row);
        next_row += rows_of_piece.numel();
        largest = std::max(largest, rows_of_piece.numel());
      }
      CHECK(next_row == rows);
      largest_pieces.push_back(largest);
      if (largest > 1) throw mg::OutOfMemoryError("out of memory (a test)");
    }, [] {});
    // Each retry's micro-batches are half as large, rounded up.
    for (size_t attempt = 1; attempt < largest_pieces.size(); ++attempt) {
      CHECK(largest_pieces[attempt] == (largest_pieces[attempt - 1] + 1) / 2);
    }
    CHECK(largest_pieces.back() == 1);
  }
}
