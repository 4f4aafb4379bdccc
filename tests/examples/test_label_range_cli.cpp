// tests/examples/test_label_range_cli.cpp — mnist and resnet refuse a dataset whose labels
// file holds a label outside the 10 classes: exit code 1 and one "error: ..." naming the
// file, the sample and the label, before any training step (a label of 200 used to build
// a 201-class model without a word).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "examples/program_runner.h"

using Catch::Matchers::Contains;
using mg_test::Outcome;
using mg_test::TempDir;

namespace {

// A two-class folder whose `split` labels file ("train" or "t10k") gives sample `index`
// the label `label`.
void write_with_bad_label(const TempDir& dir, const std::string& split, int index, uint8_t label) {
  mg_test::write_two_class_split(dir, "train", 16, 1);
  mg_test::write_two_class_split(dir, "t10k", 8, 2);
  std::vector<uint8_t> labels;
  const int count = split == "train" ? 16 : 8;
  for (int i = 0; i < count; ++i) labels.push_back(static_cast<uint8_t>(i == index ? label : i % 2));
  mg_test::write_ubyte_idx(dir.file(split + "-labels-idx1-ubyte"), {static_cast<uint32_t>(count)}, labels);
}

}  // namespace

TEST_CASE("mnist and resnet refuse a label outside the 10 classes before training", "[examples]") {
  struct Case {
    std::string program, split;
    int index;
    uint8_t label;
  };
  for (const Case& bad : {Case{"mnist", "train", 5, 200}, Case{"mnist", "t10k", 3, 10}, Case{"resnet", "train", 7, 200},
                          Case{"resnet", "t10k", 0, 11}}) {
    INFO(bad.program << ", " << bad.split << " sample " << bad.index << " labelled " << int(bad.label));
    TempDir dir("label-range-cli");
    write_with_bad_label(dir, bad.split, bad.index, bad.label);
    const Outcome outcome =
        mg_test::run_program(dir, bad.program, "--data " + dir.path.string() + " --epochs 1 --batch 4 --threads 1");
    INFO(outcome.err);
    CHECK(outcome.exit_code == 1);
    CHECK_THAT(outcome.err, Catch::StartsWith("error: "));
    CHECK_THAT(outcome.err, Contains("'" + dir.file(bad.split + "-labels-idx1-ubyte") + "' gives sample " +
                                     std::to_string(bad.index) + " the label " + std::to_string(bad.label) +
                                     ", outside the 10 classes [0, 10)"));
    CHECK_THAT(outcome.out, !Contains("epoch 1"));
  }
}
