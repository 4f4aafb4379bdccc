// bench/host_adam.cpp — the host AdamW of core/cpu/host_adam.h against the memory's own
// speed: ns per element and GB/s of each path, at 1e7 elements by default, beside a plain
// streaming copy (memcpy) of the same number of bytes, with all of this machine's OpenMP
// threads. The update is memory-bound, so the copy is its ceiling.
//
// Bytes per element of one update: read param, exp_avg, exp_avg_sq (12) and the gradient
// (4, or 2 in 16 bits); write param, exp_avg, exp_avg_sq (12) and the 16-bit copy (2) where
// asked. memcpy of N bytes moves 2N (reads N, writes N).
//
//   build-cpu/bench/bench_host_adam [elements] [repeats]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "memgrad/core/cpu/host_adam.h"

using namespace mg;

namespace {

// The best of `repeats` timings of `work`, in seconds (the first run warms the pages).
template <class Work>
double best_seconds(int repeats, Work&& work) {
  work();
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    work();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

void print_row(const char* name, double seconds, int64_t count, double bytes_per_element) {
  std::printf("%-34s %8.3f ms %8.3f ns/element %6.1f GB/s  (%4.1f bytes/element)\n", name, seconds * 1e3,
              seconds * 1e9 / count, bytes_per_element * count / seconds / 1e9, bytes_per_element);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t count = argc > 1 ? std::atoll(argv[1]) : 10'000'000;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 10;
  std::printf("host AdamW, %lld elements, %d OpenMP threads, best of %d; widest path: %s\n",
              static_cast<long long>(count), omp_get_max_threads(), repeats,
              cpu::host_adam_path_name(cpu::best_host_adam_path()));
  std::vector<float> param(count, 0.5f), exp_avg(count, 0.01f), exp_avg_sq(count, 1e-4f), grad(count, 1e-3f);
  std::vector<uint16_t> grad16(count, 0x3a83), copy16(count);  // about 1e-3 in float16
  AdamHyper hyper{.lr = 1e-4, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01,
                  .decoupled_weight_decay = true, .amsgrad = false};
  const auto k = cpu::adam_coefficients<float>(hyper, 10.0);

  // A copy of 14 bytes per element (reads 14, writes 14): the bytes an fp16-grad update moves, about.
  {
    std::vector<char> source(count * 14, 1), destination(count * 14);
    const double seconds = best_seconds(repeats, [&] {
      const int64_t bytes = count * 14;
#pragma omp parallel
      {
        const int threads = omp_get_num_threads(), thread = omp_get_thread_num();
        const int64_t begin = bytes * thread / threads, end = bytes * (thread + 1) / threads;
        std::memcpy(destination.data() + begin, source.data() + begin, end - begin);
      }
    });
    print_row("memcpy 14 B/element (parallel)", seconds, count, 28.0);
  }
  for (cpu::HostAdamPath path : {cpu::HostAdamPath::Scalar, cpu::HostAdamPath::Avx2, cpu::HostAdamPath::Avx512}) {
    if (path == cpu::HostAdamPath::Avx512 && !__builtin_cpu_supports("avx512f")) continue;
    if (path == cpu::HostAdamPath::Avx2 && !__builtin_cpu_supports("avx2")) continue;
    char name[64];
    std::snprintf(name, sizeof name, "%s fp32 grad", cpu::host_adam_path_name(path));
    cpu::HostAdamArrays fp32{.master_param = param.data(), .exp_avg = exp_avg.data(), .exp_avg_sq = exp_avg_sq.data(),
                             .grad = grad.data(), .grad_dtype = DType::Float32, .count = count};
    print_row(name, best_seconds(repeats, [&] { cpu::host_adam_update(fp32, k, path); }), count, 28.0);
    std::snprintf(name, sizeof name, "%s fp16 grad + fp16 copy", cpu::host_adam_path_name(path));
    cpu::HostAdamArrays fp16 = fp32;
    fp16.grad = grad16.data();
    fp16.grad_dtype = DType::Float16;
    fp16.param_out = copy16.data();
    fp16.param_out_dtype = DType::Float16;
    print_row(name, best_seconds(repeats, [&] { cpu::host_adam_update(fp16, k, path); }), count, 28.0);
  }
  return 0;
}
