// core/cpu/masked_fill.cpp — core/cpu room: output = mask ? value : input, with input and
// mask any strided (or broadcast, stride-0) views of output's sizes; one pass on the
// elementwise loop (core/cpu/strided_loop.h).
#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/cpu/strided_loop.h"

namespace mg::cpu {

void masked_fill(const Tensor& input, const Tensor& mask, double value, const Tensor& output) {
  dispatch_dtype(input.dtype(), [&]<class T>() {
    // NOTE: converted once, through the compute type, so -inf stays -inf in 16-bit types.
    T fill_value = convert_value<T>(value);
    map2<T, bool, T>(input, mask, output, [fill_value](T x, bool masked) { return masked ? fill_value : x; });
  });
}

}  // namespace mg::cpu
