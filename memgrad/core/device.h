// core/device.h — where a tensor's bytes live: the CPU, a CUDA device, or a simulated
// device whose allocator hands out addresses without memory (for testing the allocator
// and predicting peak memory without a GPU).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace mg {

enum class DeviceType : uint8_t { CPU, CUDA, Simulated };

inline constexpr int kNumDeviceTypes = 3;

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static constexpr Device cpu() { return {DeviceType::CPU, 0}; }
  static constexpr Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  static constexpr Device simulated(int index = 0) { return {DeviceType::Simulated, index}; }
  // Parses "cpu", "cuda", "cuda:1", "simulated:0"; throws mg::Error on anything else.
  static Device parse(std::string_view text);

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool is_simulated() const { return type == DeviceType::Simulated; }
  std::string str() const;  // "cpu", "cuda:0", "simulated:0"

  friend bool operator==(const Device&, const Device&) = default;
};

inline std::ostream& operator<<(std::ostream& out, const Device& device) { return out << device.str(); }

}  // namespace mg
