// tests/training/test_checkpoint.cpp — mg::save_checkpoint / mg::load_checkpoint in one
// process: the file's layout (what safetensors.torch.load_file will see), step, epoch,
// metadata and the caller's tensors coming back; a load of only the model; a file that
// does not fit (another model's size, another optimizer, another scaler, a missing part)
// refused with the file and the entry named, changing nothing; a save that fails leaving
// the previous file as it was.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "data/mnist_test_files.h"
#include "memgrad/core/error.h"
#include "memgrad/optim/sgd.h"
#include "training/small_run.h"

namespace {

using Catch::Matchers::Contains;
using mg_test::file_bytes;
using mg_test::SmallRun;
using mg_test::TempDir;

std::string raw_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// Everything `run` holds, as a checkpoint's bytes (so that "nothing changed" compares exactly).
std::map<std::string, std::vector<uint8_t>> state_of(const SmallRun& run, const TempDir& dir) {
  const std::string path = dir.file("state-of.safetensors");
  mg::save_checkpoint(path, run.parts());
  return file_bytes(path);
}

}  // namespace

TEST_CASE("checkpoint: the file holds each part under its prefix, with PyTorch's format tag", "[training][checkpoint]") {
  TempDir dir("checkpoint");
  SmallRun run;
  run.train(2);
  const std::string path = dir.file("run.safetensors");
  mg::save_checkpoint(path, run.parts());

  const auto metadata = mg::read_safetensors_metadata(path);
  auto value_of = [&](const std::string& key) {
    for (const auto& [saved, value] : metadata) {
      if (saved == key) return value;
    }
    return std::string("(none)");
  };
  CHECK(value_of("format") == "pt");
  CHECK(value_of("optimizer") == "Adam");
  CHECK(value_of("note") == "small run");
  const auto bytes = file_bytes(path);
  for (const char* name : {"model.0.weight", "model.3.bias", "optimizer.state.0.exp_avg_sq", "optimizer.state.3.step",
                           "optimizer.param_groups.0.lr", "optimizer.param_groups.0.params", "scaler.scale",
                           "scaler.growth_tracker", "scheduler.last_epoch", "scheduler.base_lrs", "scheduler.last_lrs",
                           "rng.default", "rng.data", "run.step", "run.epoch", "run.losses"}) {
    INFO(name);
    CHECK(bytes.count(name) == 1);
  }
  // The optimizer's part is what optim::state_dict holds, to the byte.
  for (const auto& [key, tensor] : mg::optim::state_dict(run.optimizer).tensors) {
    INFO(key);
    const auto* data = static_cast<const uint8_t*>(tensor.contiguous().raw_data());
    CHECK(bytes.at("optimizer." + key) == std::vector<uint8_t>(data, data + tensor.nbytes()));
  }

  SmallRun fresh;
  const mg::Checkpoint loaded = mg::load_checkpoint(path, fresh.targets());
  CHECK(loaded.step == 2);
  CHECK(loaded.epoch == 0);
  CHECK(loaded.metadata_value("note") == "small run");
  CHECK(loaded.tensor("losses").to_vector<double>() == std::vector<double>{1.5, 0.25});
  CHECK(fresh.scheduler.last_epoch() == 2);
  CHECK(fresh.scheduler.last_lrs() == run.scheduler.last_lrs());
  CHECK(fresh.optimizer.lr() == run.optimizer.lr());
  CHECK(fresh.scaler.get_scale() == run.scaler.get_scale());
  CHECK(fresh.data.state().offset == run.data.state().offset);
  CHECK_THROWS_WITH(loaded.metadata_value("epochs"), Contains(path) && Contains("no metadata \"epochs\""));
  CHECK_THROWS_WITH(loaded.tensor("best"), Contains(path) && Contains("no \"run.best\" entry"));
}

TEST_CASE("checkpoint: loading only the model takes its weights and leaves every other part alone",
          "[training][checkpoint]") {
  TempDir dir("checkpoint");
  SmallRun trained;
  trained.train(3);
  const std::string path = dir.file("run.safetensors");
  mg::save_checkpoint(path, trained.parts());

  SmallRun fresh;
  fresh.train(1);
  const mg::PhiloxState generator_before = mg::default_generator().state();
  const mg::Checkpoint loaded = mg::load_checkpoint(path, {.model = fresh.model.get(), .default_generator = false});
  CHECK(loaded.step == 3);
  const auto weights = fresh.model->state_dict(), saved = trained.model->state_dict();
  for (size_t i = 0; i < weights.size(); ++i) {
    CHECK(weights[i].second.to_vector<float>() == saved[i].second.to_vector<float>());
  }
  CHECK(fresh.scheduler.last_epoch() == 1);
  CHECK(fresh.scaler.get_scale() == 1024.0);
  CHECK(mg::default_generator().state().offset == generator_before.offset);
}

TEST_CASE("checkpoint: a file that does not fit is refused, naming it, and changes nothing", "[training][checkpoint]") {
  TempDir dir("checkpoint");
  SmallRun saved;
  saved.train(3);
  const std::string path = dir.file("run.safetensors");
  mg::save_checkpoint(path, saved.parts());

  SmallRun target;
  target.train(1);
  const auto before = state_of(target, dir);

  SECTION("a model of another size") {
    SmallRun wider(32);
    const auto wider_before = state_of(wider, dir);
    CHECK_THROWS_WITH(mg::load_checkpoint(path, wider.targets()),
                      Contains(path) && Contains("0.weight has shape [32, 8] in the model but [16, 8]") &&
                          Contains("model.*") && Contains("Hint"));
    CHECK(state_of(wider, dir) == wider_before);
    return;
  }
  SECTION("another optimizer, with a model that fits") {
    mg::optim::SGD sgd(target.model->parameters(), {.lr = 0.1});
    CHECK_THROWS_WITH(mg::load_checkpoint(path, {.model = target.model.get(), .optimizer = &sgd}),
                      Contains(path) && Contains("(its \"optimizer.*\" entries) was written by Adam but this is SGD"));
  }
  SECTION("a GradScaler of other options") {
    mg::amp::GradScaler other({.growth_interval = 5});
    mg::CheckpointTargets targets = target.targets();
    targets.scaler = &other;
    CHECK_THROWS_WITH(mg::load_checkpoint(path, targets), Contains(path) && Contains("growth_interval = 2"));
  }
  SECTION("a generator the file does not hold") {
    mg::Generator augment(5);
    mg::CheckpointTargets targets = target.targets();
    targets.generators.emplace_back("augment", &augment);
    CHECK_THROWS_WITH(mg::load_checkpoint(path, targets), Contains(path) && Contains("no \"rng.augment\" entry"));
  }
  SECTION("a part the file does not hold") {
    const std::string weights_only = dir.file("weights.safetensors");
    mg::save_checkpoint(weights_only, {.model = saved.model.get()});
    CHECK_THROWS_WITH(mg::load_checkpoint(weights_only, target.targets()),
                      Contains(weights_only) && Contains("holds no optimizer state"));
  }
  SECTION("an optimizer loader of the caller's own that refuses, after the scheduler was loaded") {
    mg::CheckpointTargets targets = target.targets();
    targets.optimizer = nullptr;
    targets.load_optimizer = [](const mg::optim::OptimizerStateDict& state, const std::string& source) {
      CHECK(state.kind == "Adam");
      throw mg::Error(source + ": refused by the caller");
    };
    CHECK_THROWS_WITH(mg::load_checkpoint(path, targets), Contains("refused by the caller"));
  }
  SECTION("a file that is not a checkpoint") {
    const std::string weights = dir.file("model.safetensors");
    mg::nn::save(*saved.model, weights);
    CHECK_THROWS_WITH(mg::load_checkpoint(weights, target.targets()),
                      Contains(weights) && Contains("not a checkpoint written by mg::save_checkpoint") &&
                          Contains("mg::nn::load"));
  }
  SECTION("a file that does not exist") {
    CHECK_THROWS_WITH(mg::load_checkpoint(dir.file("missing.safetensors"), target.targets()),
                      Contains(dir.file("missing.safetensors")));
  }
  CHECK(state_of(target, dir) == before);
}

TEST_CASE("checkpoint: a save that fails leaves the previous file as it was", "[training][checkpoint]") {
  TempDir dir("checkpoint");
  SmallRun run;
  run.train(1);
  const std::string path = dir.file("run.safetensors");
  mg::save_checkpoint(path, run.parts());
  const std::string first = raw_file(path);
  run.train(1);

  SECTION("the temporary file cannot be written") {
    std::filesystem::create_directory(path + ".tmp");  // where the save writes before renaming
    CHECK_THROWS_AS(mg::save_checkpoint(path, run.parts()), mg::Error);
  }
  SECTION("metadata under a key of memgrad's own") {
    mg::CheckpointParts parts = run.parts();
    parts.metadata.emplace_back("format", "np");
    CHECK_THROWS_WITH(mg::save_checkpoint(path, parts), Contains("the metadata key \"format\" is memgrad's own"));
  }
  SECTION("a tensor of the caller's own named like the checkpoint's") {
    mg::CheckpointParts parts = run.parts();
    parts.tensors.emplace_back("step", mg::zeros({}));
    CHECK_THROWS_WITH(mg::save_checkpoint(path, parts), Contains("\"step\" and \"epoch\" are the checkpoint's own"));
  }
  SECTION("no model") {
    CHECK_THROWS_WITH(mg::save_checkpoint(path, {.optimizer = &run.optimizer}), Contains("no model"));
  }
  CHECK(raw_file(path) == first);
}
