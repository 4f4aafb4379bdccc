// cuda/device_error.h — errors that kernels find in their data (an embedding index out of
// range), reported to the user as an mg::Error at the next host synchronisation.
//
// A host-side check would need the data on the host, that is a synchronisation per op,
// and a device-side assert (__trap) leaves the CUDA context unusable for the rest of the
// process. Instead each device has one small error record in pinned, mapped host memory
// (cudaHostAlloc with cudaHostAllocMapped) that any kernel can write: the first error wins
// (atomicCAS on the code), the kernel carries on with a safe value (an out-of-range row
// reads as zeros), and nothing waits. Every place memgrad waits for the device
// (cuda::synchronize, Stream::synchronize, Event::synchronize, a copy to or from pageable
// host memory) then calls check_device_errors, which turns a recorded error into an
// mg::Error and clears the record, so the device stays usable afterwards.
//
// NOTE: the record is per device, not per stream: a synchronisation on one stream reports
// an error that a finished kernel of another stream of the device recorded. Errors found
// while one is pending (not yet reported) are dropped: the first is the one to fix.
#pragma once

#include <cstdint>

#include "memgrad/core/device.h"

namespace mg::cuda {

// What went wrong; each code has its message in device_error.cpp.
enum class DeviceErrorCode : int32_t {
  None = 0,
  // value: the index, bound: the table's rows, position: flat position in the indices,
  // detail: the table's row width.
  EmbeddingIndexOutOfRange = 1,
  // gather / index_select (cuda/kernels/gather.cu). value: the index, bound: the input's
  // size along dim, position: flat position in the index, detail: dim.
  GatherIndexOutOfRange = 2,
};

// The code while a kernel is still writing the fields of its error.
inline constexpr int32_t kDeviceErrorBeingWritten = -1;

// One device's record, written by kernels, read and cleared by the host.
struct DeviceErrorRecord {
  int32_t code;      // a DeviceErrorCode (None: no error pending), or kDeviceErrorBeingWritten
  int32_t reserved;  // keeps the int64 fields 8-byte aligned
  int64_t value;     // the offending value
  int64_t bound;     // the exclusive upper bound it broke
  int64_t position;  // where in its tensor (flattened)
  int64_t detail;    // code-specific (see DeviceErrorCode)
};

// The device-side address of `device`'s record, for a kernel argument; the record is
// allocated at the first call for the device and lives as long as the process.
DeviceErrorRecord* device_error_record(Device device);

// Throws mg::Error (and clears the record) when a kernel on `device` has recorded an
// error since the last check. Call it only once the device's work is known to have
// finished (after a synchronisation). Costs one read of host memory; nothing when no
// kernel of the device has ever asked for the record.
void check_device_errors(Device device);

#ifdef __CUDACC__
// Records an error unless one is pending already. Any thread of any kernel may call it.
// The code is claimed first as kDeviceErrorBeingWritten, and set once the fields are out,
// so a host that looks while a kernel of another stream is writing sees no half record.
__device__ __forceinline__ void report_device_error(DeviceErrorRecord* record, DeviceErrorCode code, int64_t value,
                                                    int64_t bound, int64_t position, int64_t detail) {
  int* claimed = reinterpret_cast<int*>(&record->code);
  if (atomicCAS(claimed, 0, kDeviceErrorBeingWritten) != 0) return;
  record->value = value;
  record->bound = bound;
  record->position = position;
  record->detail = detail;
  __threadfence_system();  // the fields reach host memory before the code does
  atomicExch(claimed, static_cast<int>(code));
}
#endif

}  // namespace mg::cuda
