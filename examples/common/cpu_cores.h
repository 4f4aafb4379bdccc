// examples/common/cpu_cores.h — the examples' default --threads: the physical cores this
// process may run on, as PyTorch's default intra-op thread count (a core's second
// hyper-thread shares its arithmetic units, so a thread on it mostly waits; on the
// examples' CPU kernels, one thread per core is as fast and leaves the siblings free).
//
// A core is told by the CPUs that share it: Linux lists them in
// /sys/devices/system/cpu/cpuN/topology/core_cpus_list (thread_siblings_list before 5.x),
// the same list for every CPU of one core. The CPUs counted are those of the process's
// affinity mask (taskset, mpirun's binding, a container's cpuset).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace examples {

// The CPUs a Linux cpu list names: "0-3,8,10-11" -> 0 1 2 3 8 10 11. Throws
// std::invalid_argument for text that is not such a list.
std::vector<int> parse_cpu_list(const std::string& text);

// The distinct cores of `cpus`, read from `cpu_folder` (/sys/devices/system/cpu: cpuN/
// topology/core_cpus_list, else thread_siblings_list); nullopt when a CPU's list cannot be
// read (no sysfs: a caller falls back).
std::optional<int> count_physical_cores(const std::filesystem::path& cpu_folder, const std::vector<int>& cpus);

// The physical cores of this process's CPUs (sched_getaffinity); falls back to the number
// of those CPUs, then to std::thread::hardware_concurrency(), when the topology is unknown.
int physical_cores();

// The examples' --threads when it is not given: physical_cores(), unless OMP_NUM_THREADS
// is set (nullopt: OpenMP follows it, as PyTorch does).
std::optional<int> default_cpu_threads();

// The usage lines of --threads, saying its default.
std::string threads_usage();

}  // namespace examples
