// tests/examples/test_memory_prediction_cli.cpp — --predict-memory and --fit-batch as a user
// runs them: on the CPU the predicted peak allocated bytes are within 1% of a measured
// run's (in fact equal: same allocator, same tensors, the CPU kernels' scratch replayed)
// for the MNIST MLP and ResNet-18 steps in float32, checkpointed (whole blocks and
// selectively), under bf16 autocast and accumulating, and the tiny GPT's with each kind of
// block checkpointing; the JSON has a measured run's memory section and says it is a prediction
// and for which target; a GPU target is predicted on any machine; --fit-batch's batch fits
// and the next does not; bad sizes are refused.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "examples/output_checks.h"
#include "examples/program_runner.h"

using mg_test::json_integer;
using mg_test::Outcome;
using mg_test::run_ok;
using mg_test::read_file;
using mg_test::TempDir;
using mg_test::write_two_class_split;

namespace {

struct Peaks {
  int64_t allocated, reserved, workspace;
};

// A JSON's peaks: memory.* for a training summary or a prediction, top-level for a
// measured --bench line.
Peaks peaks_of(const std::string& json) {
  const bool has_memory = json.find("\"memory\":{") != std::string::npos;
  const std::string within = has_memory ? "memory" : "";
  return {json_integer(json, "peak_allocated_bytes", within), json_integer(json, "peak_reserved_bytes", within),
          json_integer(json, "WORKSPACE", "peak_bytes_by_category")};
}

// One --bench step of `program` measured on the CPU and predicted for it, with the same
// flags; returns the prediction's JSON line.
std::string check_step_prediction(const std::string& program, const std::string& common) {
  TempDir dir("predict-" + program);
  const Peaks measured = peaks_of(run_ok(dir, program, common + " --steps 1").out);
  const std::string prediction = run_ok(dir, program, common + " --predict-memory").out;
  const Peaks predicted = peaks_of(prediction);
  INFO(program << " " << common << ": measured " << measured.allocated << ", predicted " << predicted.allocated);
  CHECK(std::abs(predicted.allocated - measured.allocated) <= measured.allocated / 100);
  // Same allocator, same tensors, the CPU kernels' scratch replayed: in fact equal.
  CHECK(predicted.allocated == measured.allocated);
  CHECK(predicted.workspace == measured.workspace);
  // NOTE: reserved bytes may differ by a small-pool segment (2 MiB): the simulated device
  // places segments one below the other as mmap mostly does, but mmap also reuses holes
  // other freed mappings leave (Eigen's buffers), and where the allocator's tie-breaks by
  // address then go differently, a block splits differently (seen with --checkpoint).
  CHECK(std::abs(predicted.reserved - measured.reserved) <= int64_t{2} << 20);
  return prediction;
}

// One resnet --bench step measured on the CPU and predicted for it, with the same flags.
void check_bench_prediction(const std::string& flags) {
  check_step_prediction("resnet", "--bench --model resnet18 --batch 4 --warmup 1 --threads 2 " + flags);
}

}  // namespace

TEST_CASE("mnist --predict-memory predicts a CPU training run's peak", "[examples][predict]") {
  TempDir dir("predict-mnist");
  write_two_class_split(dir, "train", 256, 1);
  write_two_class_split(dir, "t10k", 64, 2);
  const std::string common = "--data " + dir.path.string() + " --batch 32 --threads 1 --summary-json ";
  run_ok(dir, "mnist", common + dir.file("measured.json") + " --epochs 1");
  const Outcome predicted = run_ok(dir, "mnist", common + dir.file("predicted.json") + " --predict-memory");
  CHECK_THAT(predicted.out, Catch::Contains("predicted peak memory on cpu at batch 32"));
  const Peaks measured_peaks = peaks_of(read_file(dir.file("measured.json")));
  const std::string prediction = read_file(dir.file("predicted.json"));
  const Peaks predicted_peaks = peaks_of(prediction);
  CHECK(std::abs(predicted_peaks.allocated - measured_peaks.allocated) <= measured_peaks.allocated / 100);
  CHECK(predicted_peaks.allocated == measured_peaks.allocated);
  CHECK(predicted_peaks.reserved == measured_peaks.reserved);
  CHECK_THAT(prediction, Catch::Contains("\"prediction\":{\"target\":\"cpu\",\"batch_size\":32"));
}

TEST_CASE("resnet --bench --predict-memory predicts a CPU step's peak in float32", "[examples][predict]") {
  check_bench_prediction("");
}

TEST_CASE("resnet --bench --predict-memory predicts a checkpointed CPU step's peak", "[examples][predict]") {
  check_bench_prediction("--checkpoint");
}

TEST_CASE("resnet --bench --predict-memory predicts a selectively checkpointed CPU step's peak",
          "[examples][predict]") {
  check_bench_prediction("--checkpoint selective");
}

TEST_CASE("gpt --bench --predict-memory predicts a CPU step's peak without, with selective and with whole-block "
          "checkpointing, whose ACTIVATION peaks fall in that order",
          "[examples][predict]") {
  const std::string common = "--bench --preset tiny --batch 4 --warmup 1 --threads 2 ";
  std::vector<int64_t> activation_peaks;
  for (const std::string mode : {"none", "selective", "whole"}) {
    INFO("--checkpoint " << mode);
    const std::string json = check_step_prediction("gpt", common + "--checkpoint " + mode);
    CHECK_THAT(json, Catch::Contains("\"checkpoint\":\"" + mode + "\""));
    activation_peaks.push_back(json_integer(json, "ACTIVATION", "peak_bytes_by_category"));
  }
  INFO("ACTIVATION peaks: " << activation_peaks[0] << " none, " << activation_peaks[1] << " selective, "
                            << activation_peaks[2] << " whole");
  CHECK(activation_peaks[0] > activation_peaks[1]);
  CHECK(activation_peaks[1] > activation_peaks[2]);
}

TEST_CASE("resnet --bench --predict-memory predicts a CPU step's peak under bf16 autocast", "[examples][predict]") {
  check_bench_prediction("--amp bf16");
}

TEST_CASE("resnet --bench --predict-memory predicts an accumulating CPU step's peak", "[examples][predict]") {
  check_bench_prediction("--accum 2");
}

TEST_CASE("resnet --bench --predict-memory writes a measured run's memory section, marked as a prediction",
          "[examples][predict]") {
  TempDir dir("predict-json");
  const std::string summary = dir.file("prediction.json");
  const Outcome outcome = run_ok(dir, "resnet", "--bench --batch 2 --warmup 1 --predict-memory --summary-json " + summary);
  const std::string json = read_file(summary);
  CHECK(json == outcome.out);  // one JSON line on stdout, as a measured --bench run writes
  CHECK_THAT(json, Catch::StartsWith("{\"framework\":\"memgrad\",\"model\":\"resnet18\",\"batch\":2,"));
  CHECK_THAT(json, Catch::Contains("\"prediction\":{\"target\":\"cpu\",\"batch_size\":2,\"scratch_model\":"));
  const Peaks peaks = peaks_of(json);
  CHECK(peaks.allocated > 3 * 44'000'000);  // parameters, gradients, momentum: 11.2M floats each
  CHECK(peaks.reserved >= peaks.allocated);
  CHECK(peaks.workspace > 0);
  CHECK(json_integer(json, "PARAMETER", "peak_bytes_by_category") == 44'734'408);
  CHECK_THAT(outcome.err, Catch::Contains("predicted peak memory on cpu at batch 2"));
}

TEST_CASE("resnet --predict-memory predicts for a GPU on any machine, fp16 and its GradScaler included",
          "[examples][predict]") {
  TempDir dir("predict-cuda");
  const std::string summary = dir.file("prediction.json");
  run_ok(dir, "resnet", "--bench --batch 8 --warmup 1 --device cuda --amp fp16 --predict-memory --summary-json " +
                            summary);
  const std::string json = read_file(summary);
  CHECK_THAT(json, Catch::Contains("\"device\":\"cuda\""));
  CHECK_THAT(json, Catch::Contains("\"prediction\":{\"target\":\"cuda\""));
  // cuBLAS's workspace (32 MiB) stays from the first matmul on; cuDNN's comes on top.
  CHECK(peaks_of(json).workspace > int64_t{32} << 20);
  CHECK(json_integer(json, "AUTOCAST_CACHE", "peak_bytes_by_category") > 0);  // float16 weight casts
}

TEST_CASE("resnet --fit-batch finds the largest batch whose predicted peak reserved bytes fit", "[examples][predict]") {
  TempDir dir("predict-fit");
  const std::string common = "--bench --warmup 1 --threads 2 ";
  const Outcome fit = run_ok(dir, "resnet", common + "--fit-batch 300MiB");
  const int64_t batch = json_integer(fit.out, "batch");
  CHECK(json_integer(fit.out, "fit_batch_bytes") == int64_t{300} << 20);
  CHECK(batch > 1);
  const Peaks at_batch = peaks_of(run_ok(dir, "resnet", common + "--predict-memory --batch " + std::to_string(batch)).out);
  const Peaks above = peaks_of(run_ok(dir, "resnet", common + "--predict-memory --batch " + std::to_string(batch + 1)).out);
  CHECK(at_batch.reserved <= int64_t{300} << 20);
  CHECK(above.reserved > int64_t{300} << 20);
  CHECK(json_integer(fit.out, "peak_reserved_bytes", "memory") == at_batch.reserved);
}

TEST_CASE("the examples refuse --fit-batch sizes that are not sizes, and say when nothing fits", "[examples][predict]") {
  TempDir dir("predict-bad");
  for (const std::string value : {"0", "-5", "12XB", "MiB", "1.5B", "2.GiB", "99999999999TiB"}) {
    const Outcome outcome = mg_test::run_program(dir, "mnist", "--fit-batch " + value);
    INFO(value << ": " << outcome.err);
    CHECK(outcome.exit_code == 2);
    CHECK_THAT(outcome.err, Catch::Contains("--fit-batch"));
  }
  const Outcome tiny = mg_test::run_program(dir, "resnet", "--bench --warmup 1 --fit-batch 1MiB");
  CHECK(tiny.exit_code == 1);
  CHECK_THAT(tiny.err, Catch::Contains("not even a batch of 1 fits on cpu"));
  const Outcome with_save = mg_test::run_program(dir, "resnet", "--predict-memory --save " + dir.file("model"));
  CHECK(with_save.exit_code == 2);
  CHECK_THAT(with_save.err, Catch::Contains("train nothing"));
}

TEST_CASE("mnist --fit-batch takes plain and decimal sizes and never passes the dataset's size", "[examples][predict]") {
  TempDir dir("predict-fit-mnist");
  write_two_class_split(dir, "train", 256, 1);
  write_two_class_split(dir, "t10k", 64, 2);
  for (const std::string size : {"2GB", "1000000000"}) {
    const std::string summary = dir.file("fit.json");
    const Outcome outcome =
        run_ok(dir, "mnist", "--data " + dir.path.string() + " --threads 1 --fit-batch " + size + " --summary-json " + summary);
    const std::string json = read_file(summary);
    INFO(size << ": " << json);
    // Everything fits; a batch cannot hold more than the 256 training images.
    CHECK(json_integer(json, "batch_size", "prediction") == 256);
    CHECK(json_integer(json, "fit_batch_bytes") == (size == "2GB" ? 2'000'000'000 : 1'000'000'000));
    CHECK_THAT(outcome.out, Catch::Contains("largest batch that fits"));
  }
}
