// tests/nn/test_checkpoint.cpp — nn::save / nn::load: a model's state through a safetensors
// file, and the errors for a file that does not fit the model.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "memgrad/core/factory.h"
#include "memgrad/io/safetensors.h"
#include "memgrad/nn/nn.h"

namespace {

namespace fs = std::filesystem;
using mg::Tensor;
using mg::nn::Linear;
using mg::nn::ReLU;
using mg::nn::Sequential;

std::shared_ptr<Sequential> make_mlp(int64_t hidden, uint64_t seed) {
  mg::Generator generator(seed);
  return std::make_shared<Sequential>(std::make_shared<Linear>(4, hidden, true, &generator),
                                      std::make_shared<ReLU>(),
                                      std::make_shared<Linear>(hidden, 3, true, &generator));
}

std::string temporary_path(const std::string& name) {
  return (fs::temp_directory_path() / ("mg_checkpoint_" + std::to_string(::getpid()) + "_" + name)).string();
}

}  // namespace

TEST_CASE("nn::save and nn::load restore parameters and outputs exactly", "[nn]") {
  std::string path = temporary_path("mlp.safetensors");
  auto saved = make_mlp(8, 1);
  auto restored = make_mlp(8, 2);
  Tensor input = mg::randn({5, 4});
  REQUIRE(saved->forward(input).to_vector<float>() != restored->forward(input).to_vector<float>());

  mg::nn::save(*saved, path);
  CHECK(mg::read_safetensors_metadata(path) ==
        std::vector<std::pair<std::string, std::string>>{{"format", "pt"}});
  Tensor weight_handle = restored->named_parameters().front().second;
  mg::nn::load(*restored, path);

  auto saved_parameters = saved->named_parameters();
  auto restored_parameters = restored->named_parameters();
  REQUIRE(saved_parameters.size() == restored_parameters.size());
  for (size_t i = 0; i < saved_parameters.size(); ++i) {
    CHECK(saved_parameters[i].first == restored_parameters[i].first);
    CHECK(saved_parameters[i].second.to_vector<float>() == restored_parameters[i].second.to_vector<float>());
  }
  CHECK(weight_handle.is_same(restored->named_parameters().front().second));  // loaded in place
  CHECK(saved->forward(input).to_vector<float>() == restored->forward(input).to_vector<float>());
  fs::remove(path);
}

TEST_CASE("nn::load into a model of another shape names the parameter and changes nothing", "[nn]") {
  std::string path = temporary_path("mlp_shape.safetensors");
  mg::nn::save(*make_mlp(8, 1), path);
  auto other = make_mlp(5, 3);
  auto before = other->named_parameters().front().second.to_vector<float>();
  try {
    mg::nn::load(*other, path);
    FAIL("a file of another shape was loaded");
  } catch (const mg::Error& error) {
    std::string message = error.what();
    INFO(message);
    CHECK(message.find("load_state_dict") != std::string::npos);
    CHECK(message.find("0.weight") != std::string::npos);
    CHECK(message.find(path) != std::string::npos);
  }
  CHECK(other->named_parameters().front().second.to_vector<float>() == before);
  CHECK_THROWS_WITH(mg::nn::load(*other, path + ".missing"), Catch::Contains(path + ".missing"));
  fs::remove(path);
}
