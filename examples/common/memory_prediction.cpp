// examples/common/memory_prediction.cpp — predictions on the simulated device, the batch
// search, and their output.
#include "examples/common/memory_prediction.h"

#include <cstdio>

#include <memgrad/core/error.h>
#include <memgrad/core/factory.h>
#include <memgrad/core/memory_category.h>
#include <memgrad/distributed/simulated_process_group.h>
#include <memgrad/memory/simulated_target.h>
#include <memgrad/nn/init.h>
#include "examples/common/cli.h"
#include "examples/common/summary.h"

namespace examples {

namespace {

const mg::Device kSimulated = mg::Device::simulated(0);
// Room to spare: a prediction never runs out.
constexpr size_t kRoomToSpare = size_t{1} << 50;

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace

std::vector<mg::Tensor> placeholders_on(mg::Device device, std::initializer_list<mg::Tensor> tensors) {
  std::vector<mg::Tensor> placeholders;
  for (const mg::Tensor& tensor : tensors) {
    placeholders.push_back(
        mg::empty(tensor.sizes(), {.dtype = tensor.dtype(), .device = device, .category = tensor.memory_category()}));
  }
  return placeholders;
}

namespace {

// A prediction at a given batch size (the rest of the set-up fixed).
using PredictAt = std::function<MemoryPrediction(int64_t batch_size)>;

// The batch search of fit_batch (memory_prediction.h), for plain and data-parallel steps.
MemoryPrediction fit_batch_with(mg::Device target, int64_t capacity_bytes, int64_t max_batch,
                                const PredictAt& predict_at) {
  auto try_batch = [&](int64_t batch) -> std::optional<MemoryPrediction> {
    MemoryPrediction prediction = predict_at(batch);
    if (prediction.memory.peak_reserved_bytes > capacity_bytes) return std::nullopt;
    return prediction;
  };
  std::optional<MemoryPrediction> fits = predict_at(1);
  MG_CHECK(fits->memory.peak_reserved_bytes <= capacity_bytes, "--fit-batch ", capacity_bytes, " (",
           mib(capacity_bytes), " MiB): not even a batch of 1 fits on ", target, "; it needs ",
           fits->memory.peak_reserved_bytes, " bytes reserved (", mib(fits->memory.peak_reserved_bytes),
           " MiB, of which ", fits->memory.peak_allocated_bytes, " allocated). Hint: give more memory, or save "
           "some: --checkpoint, --amp, a smaller model.");
  // Doubling until a batch does not fit, then bisection: `fits` holds the largest batch
  // known to fit, `too_large` the smallest known not to.
  int64_t too_large = 0;
  while (too_large == 0 && fits->batch_size < max_batch) {
    const int64_t next = std::min(fits->batch_size * 2, max_batch);
    if (std::optional<MemoryPrediction> larger = try_batch(next)) {
      fits = std::move(larger);
    } else {
      too_large = next;
    }
  }
  while (too_large != 0 && too_large - fits->batch_size > 1) {
    const int64_t middle = fits->batch_size + (too_large - fits->batch_size) / 2;
    if (std::optional<MemoryPrediction> larger = try_batch(middle)) {
      fits = std::move(larger);
    } else {
      too_large = middle;
    }
  }
  return *fits;
}

}  // namespace

std::string describe(const DistributedPrediction& distributed) {
  return "rank " + std::to_string(distributed.rank) + " of " + std::to_string(distributed.world_size) + ", DDP" +
         (distributed.zero ? ", ZeRO-1" : "");
}

MemoryPrediction predict_memory(mg::Device target, int64_t batch_size, const StepsOnDevice& steps) {
  // A fresh allocator with room to spare: the prediction starts from an empty device, as
  // a new process does, and never runs out.
  mg::SimulatedTarget standing_in(target, kSimulated, kRoomToSpare);
  // NOTE: nobody reads the simulated model's values, and drawing them on the CPU would take
  // most of a large model's prediction.
  const mg::nn::init::SkipInitGuard no_initial_values;
  const mg::memory::Snapshot memory = steps(kSimulated, batch_size);
  const mg::Device host = mg::simulated_host_of(kSimulated);
  return {.target = target, .batch_size = batch_size, .memory = memory,
          .host = host == kSimulated ? mg::memory::Snapshot{} : mg::memory::snapshot(host),
          .scratch_model = standing_in.describe(), .distributed = std::nullopt};
}

MemoryPrediction predict_memory(mg::Device target, int64_t batch_size, const DistributedPrediction& distributed,
                                const DistributedStepsOnDevice& steps) {
  MG_CHECK(distributed.world_size >= 1 && distributed.rank >= 0 && distributed.rank < distributed.world_size,
           "a per-rank memory prediction needs a world size of at least 1 and a rank in 0 .. world size - 1, got "
           "rank ", distributed.rank, " of ", distributed.world_size, ". Hint: --world-size N with N >= 1.");
  // The backend a real run on `target` would use: its memory is what the group mirrors.
  const auto backend = target.is_cuda() ? mg::distributed::Backend::Nccl : mg::distributed::Backend::Mpi;
  MemoryPrediction prediction = predict_memory(target, batch_size, [&](mg::Device device, int64_t batch) {
    const auto group = std::make_shared<mg::distributed::SimulatedProcessGroup>(
        distributed.rank, distributed.world_size, device, backend);
    return steps(device, batch, group);
  });
  prediction.distributed = distributed;
  return prediction;
}

MemoryPrediction fit_batch(mg::Device target, int64_t capacity_bytes, const StepsOnDevice& steps, int64_t max_batch) {
  return fit_batch_with(target, capacity_bytes, max_batch,
                        [&](int64_t batch) { return predict_memory(target, batch, steps); });
}

MemoryPrediction fit_batch(mg::Device target, int64_t capacity_bytes, const DistributedPrediction& distributed,
                           const DistributedStepsOnDevice& steps, int64_t max_batch) {
  return fit_batch_with(target, capacity_bytes, max_batch,
                        [&](int64_t batch) { return predict_memory(target, batch, distributed, steps); });
}

MemoryPrediction predict_or_fit(mg::Device target, int64_t batch_size, std::optional<int64_t> fit_capacity,
                                const std::optional<DistributedPrediction>& distributed,
                                const DistributedStepsOnDevice& steps, int64_t max_batch) {
  if (distributed) {
    return fit_capacity ? fit_batch(target, *fit_capacity, *distributed, steps, max_batch)
                        : predict_memory(target, batch_size, *distributed, steps);
  }
  const StepsOnDevice alone = [&](mg::Device device, int64_t batch) { return steps(device, batch, nullptr); };
  return fit_capacity ? fit_batch(target, *fit_capacity, alone, max_batch) : predict_memory(target, batch_size, alone);
}

std::optional<DistributedPrediction> distributed_prediction(bool distributed, std::optional<int> world_size,
                                                            bool zero) {
  if (!distributed) return std::nullopt;
  return DistributedPrediction{.world_size = world_size.value_or(1), .rank = 0, .zero = zero};
}

std::string per_rank_phrase(const std::optional<DistributedPrediction>& distributed) {
  if (!distributed) return "";
  return " per rank on " + std::to_string(distributed->world_size) + (distributed->world_size == 1 ? " rank" : " ranks");
}

int64_t largest_batch_per_rank(int64_t dataset_size, const std::optional<DistributedPrediction>& distributed) {
  const int64_t ranks = distributed ? distributed->world_size : 1;
  return (dataset_size + ranks - 1) / ranks;
}

int64_t parse_bytes(const std::string& flag, const std::string& text) {
  struct Unit {
    const char* suffix;
    int64_t bytes;
  };
  static constexpr Unit kUnits[] = {
      {"KiB", int64_t{1} << 10}, {"MiB", int64_t{1} << 20}, {"GiB", int64_t{1} << 30}, {"TiB", int64_t{1} << 40},
      {"KB", 1'000}, {"MB", 1'000'000}, {"GB", 1'000'000'000}, {"TB", 1'000'000'000'000}, {"B", 1},
  };
  const std::string hint = " (a byte count such as 40GiB, 2.5GiB, 512MiB, 2GB or 1073741824)";
  int64_t unit = 1;
  std::string number = text;
  for (const Unit& candidate : kUnits) {
    const std::string suffix = candidate.suffix;
    if (text.size() > suffix.size() && text.ends_with(suffix)) {
      unit = candidate.bytes;
      number = text.substr(0, text.size() - suffix.size());
      break;
    }
  }
  constexpr int64_t kLargest = int64_t{1} << 62;
  const size_t point = number.find('.');
  if (point != std::string::npos && unit > 1) {
    // A fraction of a unit ("2.5GiB"): digits on both sides of the point, rounded down to a
    // whole byte (a budget or capacity is a most).
    const std::string whole = number.substr(0, point), fraction = number.substr(point + 1);
    const auto digits = [](const std::string& part) {
      return !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!digits(whole) || !digits(fraction) || whole.size() > 18 || fraction.size() > 18) {
      throw UsageError(flag + " expects a size" + hint + ", got '" + text + "'");
    }
    const long double bytes = std::stold(number) * static_cast<long double>(unit);
    if (bytes > static_cast<long double>(kLargest)) {
      throw UsageError(flag + " is too large (at most 2^62 bytes), got '" + text + "'");
    }
    const auto count = static_cast<int64_t>(bytes);
    if (count <= 0) throw UsageError(flag + " must be a positive size" + hint + ", got '" + text + "'");
    return count;
  }
  int64_t count = 0;
  try {
    count = parse_number<int64_t>(flag, number);
  } catch (const UsageError&) {
    throw UsageError(flag + " expects a size" + hint + ", got '" + text + "'");
  }
  if (count <= 0) throw UsageError(flag + " must be a positive size" + hint + ", got '" + text + "'");
  if (count > kLargest / unit) throw UsageError(flag + " is too large (at most 2^62 bytes), got '" + text + "'");
  return count * unit;
}

void print_prediction(std::FILE* out, const MemoryPrediction& prediction, std::optional<int64_t> fit_capacity) {
  const mg::memory::Snapshot& memory = prediction.memory;
  if (fit_capacity) {
    std::fprintf(out, "largest batch%s that fits %lld bytes (%.1f MiB) on %s: %lld\n",
                 prediction.distributed ? " per rank" : "", static_cast<long long>(*fit_capacity), mib(*fit_capacity),
                 prediction.target.str().c_str(), static_cast<long long>(prediction.batch_size));
  }
  const std::string per_rank =
      prediction.distributed ? " per rank (" + describe(*prediction.distributed) + ")" : std::string();
  std::fprintf(out, "predicted peak memory%s on %s at batch %lld%s (run on the simulated device, nothing computed):\n"
               "  peak allocated %lld bytes (%.1f MiB)\n  peak reserved  %lld bytes (%.1f MiB)\n"
               "  peak by category (each category's own peak):\n",
               per_rank.c_str(), prediction.target.str().c_str(), static_cast<long long>(prediction.batch_size),
               prediction.distributed ? " per rank" : "",
               static_cast<long long>(memory.peak_allocated_bytes), mib(memory.peak_allocated_bytes),
               static_cast<long long>(memory.peak_reserved_bytes), mib(memory.peak_reserved_bytes));
  for (int c = 0; c < mg::kNumMemoryCategories; ++c) {
    const int64_t peak = memory.by_category[c].peak;
    if (peak == 0) continue;
    std::fprintf(out, "    %-16s %12lld bytes (%.1f MiB)\n", mg::category_name(static_cast<mg::MemoryCategory>(c)),
                 static_cast<long long>(peak), mib(peak));
  }
  if (prediction.host.peak_allocated_bytes > 0) {
    std::fprintf(out, "  in host memory (pinned where the target is a GPU): peak allocated %lld bytes (%.1f MiB)\n",
                 static_cast<long long>(prediction.host.peak_allocated_bytes), mib(prediction.host.peak_allocated_bytes));
    for (int c = 0; c < mg::kNumMemoryCategories; ++c) {
      const int64_t peak = prediction.host.by_category[c].peak;
      if (peak == 0) continue;
      std::fprintf(out, "    %-16s %12lld bytes (%.1f MiB)\n", mg::category_name(static_cast<mg::MemoryCategory>(c)),
                   static_cast<long long>(peak), mib(peak));
    }
  }
  std::fprintf(out, "  kernel scratch: %s\n", prediction.scratch_model.c_str());
  std::fflush(out);
}

void write_prediction_json(mg::JsonWriter& json, const MemoryPrediction& prediction,
                           std::optional<int64_t> fit_capacity) {
  json.key("prediction").begin_object()
      .key("target").value(prediction.target.is_cuda() ? "cuda" : "cpu")
      .key("batch_size").value(prediction.batch_size)
      .key("scratch_model").value(prediction.scratch_model);
  if (fit_capacity) json.key("fit_batch_bytes").value(*fit_capacity);
  if (const std::optional<DistributedPrediction>& distributed = prediction.distributed) {
    json.key("distributed").begin_object()
        .key("world_size").value(distributed->world_size)
        .key("rank").value(distributed->rank)
        .key("ddp").value(true)
        .key("zero").value(distributed->zero)
        .end_object();
  }
  json.end_object().key("memory");
  mg::memory::write_json(json, prediction.memory);
  if (prediction.host.peak_allocated_bytes > 0) {
    json.key("host_memory");
    mg::memory::write_json(json, prediction.host);
  }
}

void write_prediction_summary(const std::string& path, const MemoryPrediction& prediction,
                              std::optional<int64_t> fit_capacity,
                              const std::function<void(mg::JsonWriter&)>& write_setup) {
  mg::JsonWriter json;
  json.begin_object();
  write_setup(json);
  write_prediction_json(json, prediction, fit_capacity);
  json.end_object();
  write_file_atomically(path, json.str());
  std::printf("summary written to %s\n", path.c_str());
}

void print_bench_prediction(mg::Device target, int64_t batch_size, std::optional<int64_t> fit_capacity,
                            const std::optional<DistributedPrediction>& distributed,
                            const DistributedStepsOnDevice& steps, const std::string& summary_json,
                            const std::function<void(mg::JsonWriter&, int64_t batch_size)>& write_config) {
  const MemoryPrediction prediction = predict_or_fit(target, batch_size, fit_capacity, distributed, steps);
  print_prediction(stderr, prediction, fit_capacity);
  mg::JsonWriter json;
  json.begin_object();
  write_config(json, prediction.batch_size);
  write_prediction_json(json, prediction, fit_capacity);
  json.end_object();
  const std::string line = json.str();
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  if (!summary_json.empty()) write_file_atomically(summary_json, line);
}

std::string prediction_usage() {
  return R"(  --predict-memory         do not train: run the same steps (model, optimizer, batch and
                           every other setting given) on the simulated device, which runs
                           the same caching allocator and borrows the scratch --device's
                           kernels would (the CPU's exactly; for cuda cuBLAS's, batch
                           norm's and cuDNN's workspaces, cuDNN's asked of the GPU when
                           there is one, else estimated), and print the predicted peak
                           allocated and reserved bytes, by category, for --device; needs
                           no GPU. With --summary-json, writes them in a measured run's
                           "memory" shape, with a "prediction" section
  --fit-batch BYTES        like --predict-memory, but find the largest --batch whose
                           predicted peak RESERVED bytes fit in BYTES (e.g. 40GiB, 512MiB,
                           2GB, 1073741824): reserved, because that is what the caching
                           allocator takes from the device, blocks cached for reuse
                           included; allocated bytes alone would promise batches that run
                           out of memory
)";
}

}  // namespace examples
