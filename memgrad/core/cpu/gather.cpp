// core/cpu/gather.cpp — CPU gather (and so index_select) and its gradient, scatter_add.
//
// Both walk the index's positions with strided_loop.h's runs over three operands: the
// gathered (or scattered) tensor, the index, and the other tensor seen with stride 0
// along `dim`, so that the run's pointer into it is the start of the fibre the index
// picks from; the index value times the other tensor's stride along dim finishes the
// address. gather writes each output element once, so its runs are spread over threads;
// scatter_add's runs may add into the same element, so they run in order on one thread,
// which also makes the sums deterministic (in order of position).
#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/cpu/strided_loop.h"

namespace mg::cpu {

namespace {

// Strides in bytes of `tensor`, but 0 along `dim`: the address of a position's fibre.
Shape fibre_byte_strides(const Tensor& tensor, int dim) {
  Shape strides = Shape::filled(tensor.dim(), 0);
  for (int d = 0; d < tensor.dim(); ++d) {
    if (d != dim) strides[d] = tensor.strides()[d] * static_cast<int64_t>(tensor.element_size());
  }
  return strides;
}

Shape byte_strides(const Tensor& tensor) {
  Shape strides = tensor.strides();
  for (int d = 0; d < tensor.dim(); ++d) strides[d] *= static_cast<int64_t>(tensor.element_size());
  return strides;
}

// Operands {walked, index, fibre start of `other`} over the index's positions.
Operands<3> index_operands(const Tensor& walked, const Tensor& index, const Tensor& other, int dim) {
  Operands<3> operands;
  operands.data = {static_cast<char*>(walked.raw_data()), static_cast<char*>(index.raw_data()),
                   static_cast<char*>(other.raw_data())};
  operands.byte_strides = {byte_strides(walked), byte_strides(index), fibre_byte_strides(other, dim)};
  return operands;
}

}  // namespace

void gather(const Tensor& input, int dim, const Tensor& index, const Tensor& output) {
  const int64_t input_dim_stride = input.strides()[dim];
  Operands<3> operands = index_operands(output, index, input, dim);
  dispatch_dtype(input.dtype(), [&]<class T>() {
    for_each_run<3>(index.sizes(), operands, /*parallel=*/true,
                    [&](const std::array<char*, 3>& at, const std::array<int64_t, 3>& strides, int64_t count) {
                      for (int64_t i = 0; i < count; ++i) {
                        const int64_t picked = *reinterpret_cast<const int64_t*>(at[1] + i * strides[1]);
                        const T* fibre = reinterpret_cast<const T*>(at[2] + i * strides[2]);
                        *reinterpret_cast<T*>(at[0] + i * strides[0]) = fibre[picked * input_dim_stride];
                      }
                    });
  });
}

void scatter_add(const Tensor& source, int dim, const Tensor& index, const Tensor& destination) {
  const int64_t destination_dim_stride = destination.strides()[dim];
  Operands<3> operands = index_operands(source, index, destination, dim);
  dispatch_floating(source.dtype(), "scatter_add", [&]<class T>() {
    auto add_into = [&]<class Sum>() {
      for_each_run<3>(index.sizes(), operands, /*parallel=*/false,
                      [&](const std::array<char*, 3>& at, const std::array<int64_t, 3>& strides, int64_t count) {
                        for (int64_t i = 0; i < count; ++i) {
                          const int64_t picked = *reinterpret_cast<const int64_t*>(at[1] + i * strides[1]);
                          Sum* fibre = reinterpret_cast<Sum*>(at[2] + i * strides[2]);
                          const T value = *reinterpret_cast<const T*>(at[0] + i * strides[0]);
                          fibre[picked * destination_dim_stride] += static_cast<Sum>(static_cast<compute_t<T>>(value));
                        }
                      });
    };
    if (destination.dtype() == DType::Float64) {
      add_into.template operator()<double>();
    } else {
      add_into.template operator()<float>();
    }
  });
}

}  // namespace mg::cpu
