// tests/fuzz/fuzz_gpt_text.cpp — libFuzzer target for the gpt example's text loader
// (examples/gpt/data.h): a file of any bytes, and a folder holding it twice (as a file and
// a symlink to it), are read or refused with an error naming them. What is read must be
// the file's bytes split 90/10, and the windows drawn from it (examples/gpt/windows.h)
// must be its bytes, each target the byte after its input.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "examples/gpt/data.h"
#include "examples/gpt/windows.h"
#include "fuzz_support.h"

namespace {

constexpr int64_t kBlockSize = 4;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz: %s\n", what);
  std::abort();
}

// A folder that holds "text" and "text.link", a symlink to it, made once per process.
const std::filesystem::path& folder() {
  static const std::filesystem::path path = [] {
    std::filesystem::path made = fuzz::scratch_folder() / "texts";
    std::filesystem::create_directories(made);
    std::filesystem::create_symlink("text", made / "text.link");
    return made;
  }();
  return path;
}

void check_read(const gpt::TextCorpus& corpus, const std::vector<uint8_t>& bytes) {
  std::vector<uint8_t> joined = corpus.train;
  joined.insert(joined.end(), corpus.validation.begin(), corpus.validation.end());
  if (joined != bytes || corpus.validation.size() != bytes.size() / 10) fail("the text read is not the file's, split 90/10");
  if (!gpt::is_utf8_text(bytes)) fail("a file that is not UTF-8 text was read as text");
  try {
    gpt::check_fits_windows(corpus, kBlockSize);
  } catch (const mg::Error& error) {
    fuzz::refuse_unless_named(error, corpus.source);
    return;
  }
  mg::Generator generator(/*seed=*/1);
  const gpt::WindowsDataset windows(corpus.train, kBlockSize);
  mg::data::DataLoader loader(windows, gpt::random_window_batches(windows, generator, 2, 1, mg::Device::cpu()));
  mg::data::Batch batch;
  if (!loader.next(batch)) fail("no batch of windows");
  const std::vector<int64_t> inputs = batch.inputs.to_vector<int64_t>();
  const std::vector<int64_t> targets = batch.targets.to_vector<int64_t>();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] < 0 || inputs[i] > 255) fail("a window holds a value that is not a byte");
    if (i % kBlockSize != 0 && inputs[i] != targets[i - 1]) fail("a window's target is not the byte after its input");
  }
}

void read(const std::string& path, const std::vector<uint8_t>& bytes) {
  gpt::TextCorpus corpus;
  try {
    corpus = gpt::load_corpus(path);
  } catch (const mg::Error& error) {
    fuzz::refuse_unless_named(error, path);
    return;
  }
  check_read(corpus, bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> bytes(data, data + size);
  read(fuzz::write_file("input.txt", data, size), bytes);
  const std::string texts = folder().string();
  fuzz::write_file("texts/text", data, size);
  read(texts, bytes);  // the link is the same file: read once
  return 0;
}
