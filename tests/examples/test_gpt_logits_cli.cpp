// tests/examples/test_gpt_logits_cli.cpp — interop/gpt_logits, PyTorch's partner in
// interop/check_gpt_interop.py, checked without PyTorch on a tiny GPT: a saved model loads
// back strictly with the same logits, bit for bit; the file holds GPT-2's keys without the
// tied lm_head; --amp bf16 gives bfloat16 logits near the float32 ones; a checkpoint that
// does not fit and a bad command line are refused with their exit codes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"
#include "memgrad/io/safetensors.h"
#include "examples/program_runner.h"

using Catch::Matchers::Contains;
using mg_test::Outcome;
using mg_test::TempDir;

namespace {

const std::string kModel = " --layers 2 --heads 4 --embd 32 --vocab 50 --block 16";

// (2, 8) random token ids below the vocabulary size, under "tokens".
std::string write_tokens(const TempDir& dir) {
  mg::Generator generator(5);
  const mg::Tensor draws = mg::rand({2, 8}, {.dtype = mg::DType::Float64}, &generator);
  std::vector<int64_t> ids;
  for (double draw : draws.to_vector<double>()) ids.push_back(static_cast<int64_t>(draw * 50));
  const std::string path = dir.file("tokens.safetensors");
  mg::save_safetensors(path, {{"tokens", mg::from_vector(ids, {2, 8})}}, {{"format", "pt"}});
  return path;
}

Outcome run_gpt(const TempDir& dir, const std::string& arguments) {
  return mg_test::run_program(dir, "gpt_logits", arguments);
}

mg::Tensor logits_of(const std::string& path) {
  auto tensors = mg::load_safetensors(path);
  REQUIRE(tensors.size() == 1);
  REQUIRE(tensors[0].first == "logits");
  return tensors[0].second;
}

}  // namespace

TEST_CASE("gpt_logits: a saved GPT loads back strictly and gives the same logits", "[examples][gpt_logits]") {
  TempDir dir("gpt-logits");
  const std::string tokens = write_tokens(dir), weights = dir.file("w.safetensors");
  Outcome saved = run_gpt(dir, "--init-seed 7 --save " + weights + " --tokens " + tokens + " --out " +
                                   dir.file("saved.safetensors") + kModel);
  INFO(saved.err);
  REQUIRE(saved.exit_code == 0);
  CHECK_THAT(saved.out, Contains("initialised from seed 7"));
  Outcome loaded = run_gpt(dir, "--load " + weights + " --tokens " + tokens + " --out " +
                                    dir.file("loaded.safetensors") + kModel);
  INFO(loaded.err);
  REQUIRE(loaded.exit_code == 0);

  const mg::Tensor first = logits_of(dir.file("saved.safetensors"));
  const mg::Tensor second = logits_of(dir.file("loaded.safetensors"));
  CHECK(first.sizes() == mg::Shape{2, 8, 50});
  CHECK(first.dtype() == mg::DType::Float32);
  CHECK(first.to_vector<float>() == second.to_vector<float>());

  // GPT-2's keys: 2 tables, 12 tensors a block, ln_f's 2; the tied head is not stored.
  const auto state = mg::load_safetensors(weights);
  CHECK(state.size() == 2 + 2 * 12 + 2);
  for (const auto& [name, tensor] : state) {
    INFO(name);
    CHECK(name.starts_with("transformer."));
    CHECK(tensor.dtype() == mg::DType::Float32);
  }

  // Another seed, another model.
  REQUIRE(run_gpt(dir, "--init-seed 8 --save " + dir.file("other.safetensors") + " --tokens " + tokens + " --out " +
                           dir.file("other_logits.safetensors") + kModel)
              .exit_code == 0);
  CHECK(logits_of(dir.file("other_logits.safetensors")).to_vector<float>() != first.to_vector<float>());
}

TEST_CASE("gpt_logits --amp bf16 writes bfloat16 logits near the float32 ones", "[examples][gpt_logits]") {
  TempDir dir("gpt-logits-bf16");
  const std::string tokens = write_tokens(dir);
  const std::string common = " --init-seed 3 --tokens " + tokens + kModel;
  REQUIRE(run_gpt(dir, "--out " + dir.file("fp32.safetensors") + common).exit_code == 0);
  Outcome bf16 = run_gpt(dir, "--amp bf16 --out " + dir.file("bf16.safetensors") + common);
  INFO(bf16.err);
  REQUIRE(bf16.exit_code == 0);
  const mg::Tensor reference = logits_of(dir.file("fp32.safetensors"));
  const mg::Tensor low = logits_of(dir.file("bf16.safetensors"));
  CHECK(low.dtype() == mg::DType::BFloat16);
  const std::vector<double> expected = reference.to(mg::DType::Float64).to_vector<double>();
  const std::vector<double> actual = low.to(mg::DType::Float64).to_vector<double>();
  double largest = 0, difference = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    largest = std::max(largest, std::abs(expected[i]));
    difference = std::max(difference, std::abs(actual[i] - expected[i]));
  }
  CHECK(difference > 0);                   // it did compute in bfloat16
  CHECK(difference <= 3e-2 * largest);     // check_gpt_interop.py's bound between frameworks
}

TEST_CASE("gpt_logits refuses a checkpoint that does not fit and a bad command line", "[examples][gpt_logits]") {
  TempDir dir("gpt-logits-errors");
  const std::string tokens = write_tokens(dir), weights = dir.file("w.safetensors");
  REQUIRE(run_gpt(dir, "--save " + weights + kModel).exit_code == 0);
  Outcome deeper = run_gpt(dir, "--load " + weights + " --tokens " + tokens + " --out " + dir.file("l.safetensors") +
                                    kModel + " --layers 3");
  CHECK(deeper.exit_code == 1);
  CHECK_THAT(deeper.err, Contains("missing key(s) transformer.h.2.ln_1.weight"));

  Outcome both = run_gpt(dir, "--load " + weights + " --init-seed 1 --save " + dir.file("x.safetensors") + kModel);
  CHECK(both.exit_code == 2);
  CHECK_THAT(both.err, Contains("give --load or --init-seed, not both"));
  Outcome half = run_gpt(dir, "--load " + weights + " --tokens " + tokens + kModel);
  CHECK(half.exit_code == 2);
  CHECK_THAT(half.err, Contains("--tokens and --out go together"));
  Outcome fp16 = run_gpt(dir, "--save " + dir.file("y.safetensors") + " --amp fp16" + kModel);
  CHECK(fp16.exit_code == 2);
  CHECK_THAT(fp16.err, Contains("--amp fp16 needs --device cuda"));
}
