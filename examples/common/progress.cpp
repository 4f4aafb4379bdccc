// examples/common/progress.cpp — formatting and pacing of the progress line.
#include "examples/common/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

namespace examples {
namespace {

constexpr auto kTerminalInterval = std::chrono::milliseconds(100);
constexpr int kBarWidth = 10;

// The unit the line's memory figures are written in.
struct ByteUnit {
  const char* name;
  double bytes;
};

ByteUnit unit_for(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30)) return {"GiB", static_cast<double>(int64_t{1} << 30)};
  if (bytes >= (int64_t{1} << 20)) return {"MiB", static_cast<double>(int64_t{1} << 20)};
  return {"KiB", 1024.0};
}

std::string minutes_seconds(double seconds) {
  const auto total = static_cast<int64_t>(seconds + 0.5);
  char text[32];
  std::snprintf(text, sizeof text, "%lld:%02lld", static_cast<long long>(total / 60),
                static_cast<long long>(total % 60));
  return text;
}

}  // namespace

std::string memory_figures(const mg::memory::Snapshot& snapshot) {
  int largest = 0;
  for (int category = 1; category < mg::kNumMemoryCategories; ++category) {
    if (snapshot.by_category[category].current > snapshot.by_category[largest].current) largest = category;
  }
  const ByteUnit unit = unit_for(snapshot.reserved_bytes);
  // Two decimals for GiB, where a tenth is a hundred MiB.
  const int decimals = unit.bytes >= (int64_t{1} << 30) ? 2 : 1;
  char text[128];
  std::snprintf(text, sizeof text, "mem %.*f/%.*f %s %s %.*f", decimals, snapshot.allocated_bytes / unit.bytes, decimals,
                snapshot.reserved_bytes / unit.bytes, unit.name,
                mg::category_name(static_cast<mg::MemoryCategory>(largest)), decimals,
                snapshot.by_category[largest].current / unit.bytes);
  return text;
}

Progress::Progress(int64_t epoch, int64_t epochs, int64_t num_batches, mg::Device device)
    : Progress("epoch " + std::to_string(epoch) + "/" + std::to_string(epochs), num_batches, "samples", device) {}

Progress::Progress(std::string title, int64_t num_batches, std::string unit, mg::Device device, int64_t first_batch)
    : title_(std::move(title)),
      unit_(std::move(unit)),
      device_(device),
      num_batches_(num_batches),
      first_batch_(first_batch),
      interactive_(isatty(STDERR_FILENO) != 0),
      batches_per_line_(std::max<int64_t>(1, (num_batches + 9) / 10)),
      last_update_(start_) {}

bool Progress::wants_update(int64_t batches_done) const {
  if (batches_done == num_batches_) return true;
  if (interactive_) return Clock::now() - last_update_ >= kTerminalInterval;
  return batches_done % batches_per_line_ == 0;
}

void Progress::update(int64_t batches_done, int64_t units_done, double average_loss) {
  last_update_ = Clock::now();
  const double elapsed = std::chrono::duration<double>(last_update_ - start_).count();
  const double units_per_s = elapsed > 0 ? units_done / elapsed : 0.0;
  const int64_t batches_run = batches_done - first_batch_;
  const double eta = batches_run > 0 ? elapsed * (num_batches_ - batches_done) / batches_run : 0.0;
  const std::string counts = std::to_string(batches_done) + "/" + std::to_string(num_batches_);

  std::string bar;  // "[#####.....] " on a terminal
  if (interactive_) {
    const auto filled = static_cast<size_t>(kBarWidth * batches_done / std::max<int64_t>(1, num_batches_));
    bar.append("[").append(filled, '#').append(kBarWidth - filled, '.').append("] ");
  }
  // "\r...\033[K" rewrites the line in place and erases what a longer line left behind.
  const std::string memory = memory_figures(mg::memory::snapshot(device_));
  std::fprintf(stderr, "%s%s %s%s  loss %.4f  %.0f %s/s  %s  ETA %s%s", interactive_ ? "\r" : "", title_.c_str(),
               bar.c_str(), counts.c_str(), average_loss, units_per_s, unit_.c_str(), memory.c_str(),
               minutes_seconds(eta).c_str(), interactive_ ? "\033[K" : "\n");
  std::fflush(stderr);
}

void Progress::finish() {
  if (interactive_) std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

}  // namespace examples
