// core/host_device.h — core room: MG_HOST_DEVICE marks a function that the CPU kernels
// and the CUDA kernels both call (core/random.h's Philox, core/elementwise_ops.h's and
// core/optimizer_formulas.h's formulas), so that each is written once and both devices
// compute alike; math:: holds the functions they call whose float and double forms differ.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define MG_HOST_DEVICE __host__ __device__
#else
#define MG_HOST_DEVICE
#endif

namespace mg::math {

// The float overloads call the single-precision functions (std::exp(float) is expf on the
// host too), the double ones the double-precision functions, on both devices.
MG_HOST_DEVICE inline float exp(float x) { return ::expf(x); }
MG_HOST_DEVICE inline double exp(double x) { return ::exp(x); }
MG_HOST_DEVICE inline float log(float x) { return ::logf(x); }
MG_HOST_DEVICE inline double log(double x) { return ::log(x); }
MG_HOST_DEVICE inline float sqrt(float x) { return ::sqrtf(x); }
MG_HOST_DEVICE inline double sqrt(double x) { return ::sqrt(x); }
MG_HOST_DEVICE inline float tanh(float x) { return ::tanhf(x); }
MG_HOST_DEVICE inline double tanh(double x) { return ::tanh(x); }
MG_HOST_DEVICE inline float erf(float x) { return ::erff(x); }
MG_HOST_DEVICE inline double erf(double x) { return ::erf(x); }
MG_HOST_DEVICE inline float pow(float x, float y) { return ::powf(x, y); }
MG_HOST_DEVICE inline double pow(double x, double y) { return ::pow(x, y); }

}  // namespace mg::math
