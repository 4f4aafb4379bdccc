// tests/fuzz/make_fuzz_corpus.cpp — writes the fuzz targets' seed corpus: small valid files
// of each format, made by memgrad itself where it writes the format (safetensors, JSON, the
// gpt example's checkpoint) and byte by byte where it only reads it (IDX). The files are
// committed under tests/fuzz/corpus/<target>/; run this again when a format changes:
//
//   build-asan/tests/fuzz/make_fuzz_corpus tests/fuzz/corpus
//
// The regression cases libFuzzer found (crash-*, leak-*, timeout-*) live next to the seeds
// and are left alone.
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "memgrad/core/factory.h"
#include "memgrad/io/json.h"
#include "memgrad/io/safetensors.h"
#include "examples/common/mixed_precision.h"
#include "examples/gpt/checkpoint.h"
#include "examples/gpt/training.h"
#include "examples/gpt/windows.h"
#include "tiny_gpt.h"

namespace {

namespace fs = std::filesystem;

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!file.good()) throw std::runtime_error("cannot write " + path.string());
}

void write_gzipped(const fs::path& path, const std::vector<uint8_t>& bytes) {
  gzFile file = gzopen(path.c_str(), "wb9");
  const bool written = file != nullptr && gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())) > 0;
  if (file == nullptr || gzclose(file) != Z_OK || !written) throw std::runtime_error("cannot write " + path.string());
}

void write_text(const fs::path& path, const std::string& text) {
  write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

// An IDX file: magic (0, 0, type code, rank), big-endian dims, then `elements` (each
// already `element_size` big-endian bytes).
std::vector<uint8_t> idx_file(uint8_t type_code, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& elements) {
  std::vector<uint8_t> bytes = {0, 0, type_code, static_cast<uint8_t>(dims.size())};
  for (uint32_t dim : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<uint8_t>(dim >> shift));
  }
  bytes.insert(bytes.end(), elements.begin(), elements.end());
  return bytes;
}

void write_idx_seeds(const fs::path& folder) {
  std::vector<uint8_t> pixels(3 * 4 * 4);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 37);
  const std::vector<uint8_t> images = idx_file(0x08, {3, 4, 4}, pixels);
  write_bytes(folder / "images-idx3-ubyte", images);
  write_gzipped(folder / "images-idx3-ubyte.gz", images);
  write_bytes(folder / "labels-idx1-ubyte", idx_file(0x08, {3}, {7, 0, 9}));
  // 2x2 float32 (1.0, -2.5, 0.0, 3.0) and 3 int16 (1, -1, 256), big-endian.
  write_bytes(folder / "floats-idx2-float",
              idx_file(0x0D, {2, 2}, {0x3F, 0x80, 0, 0, 0xC0, 0x20, 0, 0, 0, 0, 0, 0, 0x40, 0x40, 0, 0}));
  write_gzipped(folder / "shorts-idx1-short.gz", idx_file(0x0B, {3}, {0, 1, 0xFF, 0xFF, 1, 0}));
}

void write_safetensors_seeds(const fs::path& folder) {
  using mg::DType;
  mg::save_safetensors((folder / "dtypes.safetensors").string(),
                       {{"f32", mg::from_vector(std::vector<float>{1, -2, 3.5f, 0, 5, 6}, {2, 3})},
                        {"f64", mg::from_vector(std::vector<double>{0.25}, {1})},
                        {"f16", mg::ones({2}, {.dtype = DType::Float16})},
                        {"bf16", mg::ones({2}, {.dtype = DType::BFloat16})},
                        {"i64", mg::from_vector(std::vector<int64_t>{-1}, {1}).view({})},
                        {"i32", mg::zeros({1, 2}, {.dtype = DType::Int32})},
                        {"u8", mg::ones({3}, {.dtype = DType::UInt8})},
                        {"bool", mg::ones({2}, {.dtype = DType::Bool})},
                        {"empty", mg::zeros({0, 4})}},
                       {{"format", "pt"}, {"note", "caf\u00e9 \"quoted\""}});
  mg::save_safetensors((folder / "one.safetensors").string(), {{"w", mg::ones({2, 2})}});
  mg::save_safetensors((folder / "metadata_only.safetensors").string(), {}, {{"format", "pt"}});
}

void write_json_seeds(const fs::path& folder) {
  mg::JsonWriter header;
  header.begin_object().key("__metadata__").begin_object().key("format").value("pt").end_object();
  header.key("w").begin_object().key("dtype").value("F32").key("shape").begin_array().value(2).value(3).end_array();
  header.key("data_offsets").begin_array().value(0).value(24).end_array().end_object().end_object();
  write_text(folder / "header.json", header.str());
  mg::JsonWriter values;
  values.begin_array().value(int64_t{-9223372036854775807} - 1).value(int64_t{9223372036854775807}).value(0);
  values.value("tab\t quote\" backslash\\ \u00e9 \xF0\x9F\x98\x80").begin_object().end_object();
  values.begin_array().begin_array().end_array().end_array().end_array();
  write_text(folder / "values.json", values.str());
  // Escapes JsonWriter never writes (it writes UTF-8 as is), with a surrogate pair.
  write_text(folder / "escapes.json", "{\"a\\u00e9\\ud83d\\ude00\\/\\b\\f\\n\\r\" : [ -1 , 2 ] }\n");
}

void write_checkpoint_seeds(const fs::path& folder) {
  // float32 after one AdamW step (the optimizer has state); fp16 before any (the scaler's).
  for (const auto& [name, amp] : {std::pair<std::string, std::optional<mg::DType>>{"fp32", std::nullopt},
                                  {"fp16", mg::DType::Float16}}) {
    mg::Generator init(/*seed=*/1), windows(/*seed=*/2);
    mg::nn::GPT model(fuzz::tiny_gpt_options(), &init);
    mg::optim::AdamW optimizer = gpt::make_optimizer(model, 1e-3);
    examples::MixedPrecision precision(amp, mg::Device::cpu());
    mg::optim::WarmupCosineLR scheduler(optimizer, fuzz::kTinyWarmupSteps, fuzz::kTinyRunSteps, 0.1);
    gpt::RunState state{.total_steps = fuzz::kTinyRunSteps};
    if (!amp) {
      std::vector<uint8_t> tokens(64);
      for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint8_t>((i * 7) % 16);
      const gpt::WindowsDataset dataset(tokens, model.options().block_size);
      mg::data::DataLoader loader(dataset, gpt::random_window_batches(dataset, windows, 2, 1, mg::Device::cpu()));
      gpt::train_step(model, optimizer, precision, &scheduler, loader, /*step=*/0, {.batch_size = 2});
      state = {.step = 1, .total_steps = fuzz::kTinyRunSteps, .best_val_loss = 2.5, .best_step = 1, .seconds = 0.5,
               .seconds_to_best = 0.5, .eval_steps = {1}, .val_losses = {2.5}, .train_losses = {2.7}};
    }
    gpt::save_checkpoint((folder / ("gpt-" + name + ".safetensors")).string(), model, optimizer,
                         {.precision = precision, .scheduler = scheduler, .windows = windows}, state);
  }
}

void write_text_seeds(const fs::path& folder) {
  write_text(folder / "fortune.txt",
             "A fool and his money are soon parted.\n%\nNothing is certain but death and taxes.\n%\n"
             "Caf\u00e9, na\u00efve, \u65e5\u672c\u8a9e, \xF0\x9F\x98\x80 \xE2\x82\xAC 12.\n");
  write_text(folder / "short.txt", "ab\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  const fs::path corpus = argv[1];
  const std::vector<std::pair<std::string, void (*)(const fs::path&)>> writers = {
      {"fuzz_idx", write_idx_seeds},
      {"fuzz_safetensors", write_safetensors_seeds},
      {"fuzz_json", write_json_seeds},
      {"fuzz_checkpoint", write_checkpoint_seeds},
      {"fuzz_gpt_text", write_text_seeds}};
  for (const auto& [target, write] : writers) {
    fs::create_directories(corpus / target);
    write(corpus / target);
    std::printf("make_fuzz_corpus: wrote the seeds of %s\n", (corpus / target).c_str());
  }
  return 0;
}
