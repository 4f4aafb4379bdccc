// examples/gpt/sampling.cpp — drawing text from the model, byte by byte.
#include "examples/gpt/sampling.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <tuple>
#include <vector>

#include <memgrad/autograd/elementwise.h>
#include <memgrad/autograd/grad_mode.h>
#include <memgrad/autograd/shape.h>
#include <memgrad/autograd/softmax.h>
#include <memgrad/autograd/topk.h>
#include <memgrad/core/error.h>
#include <memgrad/core/factory.h>
#include <memgrad/nn/gpt_decoder.h>

namespace gpt {

Sample generate(mg::nn::GPT& model, const examples::MixedPrecision& precision, const SamplingOptions& options,
                mg::Generator& generator, std::FILE* out) {
  MG_CHECK(!options.prompt.empty(), "generate: the prompt needs at least one byte");
  const int64_t vocabulary = model.options().vocab_size;
  const int64_t top_k = std::min(options.top_k.value_or(vocabulary), vocabulary);
  const int64_t block_size = model.options().block_size;
  mg::NoGradGuard no_grad;
  model.eval();
  std::vector<int64_t> context(options.prompt.begin(), options.prompt.end());
  for (int64_t& byte : context) byte = static_cast<uint8_t>(byte);  // chars may be signed
  std::fwrite(options.prompt.data(), 1, options.prompt.size(), out);
  std::optional<mg::nn::GPTDecoder> decoder;
  if (options.kv_cache) decoder.emplace(model, 1);
  Sample sample;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < options.bytes; ++i) {
    // The decoder reads only the bytes it has not seen; without it, the last block_size.
    const auto length = decoder ? static_cast<int64_t>(context.size())
                                : std::min<int64_t>(static_cast<int64_t>(context.size()), block_size);
    const std::vector<int64_t> window(context.end() - length, context.end());
    const mg::Tensor tokens = mg::from_vector(window, {1, length}).to(precision.device());  // (1, T)
    mg::Tensor logits;  // (256): the last position's
    {
      const examples::AutocastRegion autocast(precision);
      logits = decoder ? mg::select(decoder->next_logits(tokens), 0, 0)
                       : mg::select(mg::select(model(tokens), 0, 0), 0, length - 1);
    }
    const auto [values, indices] = mg::topk(logits.to(mg::DType::Float32) / options.temperature, top_k);  // (k)
    const int64_t choice = mg::multinomial(mg::softmax(values, 0), 1, false, &generator).item<int64_t>();
    const auto byte = static_cast<uint8_t>(mg::select(indices, 0, choice).item<int64_t>());
    context.push_back(byte);
    sample.text.push_back(static_cast<char>(byte));
    std::fputc(byte, out);
    std::fflush(out);
  }
  sample.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  model.train();
  return sample;
}

}  // namespace gpt
