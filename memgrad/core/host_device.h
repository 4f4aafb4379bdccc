// core/host_device.h — core room: MG_HOST_DEVICE marks a function that the CPU kernels
// and the CUDA kernels both call (core/random.h's Philox, core/elementwise_ops.h's
// formulas), so that each is written once and both devices compute alike.
#pragma once

#if defined(__CUDACC__)
#define MG_HOST_DEVICE __host__ __device__
#else
#define MG_HOST_DEVICE
#endif
