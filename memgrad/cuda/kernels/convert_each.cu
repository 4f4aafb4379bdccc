// cuda/kernels/convert_each.cu — many tensors converted between float32 and float16 or
// bfloat16 in a few launches: autocast's casts of a region's parameters (autograd/copy.h's
// to_each) and, back, the parameters' 16-bit gradients into their float32 .grad at
// backward's end (autograd/accumulate_grad.cpp). One launch each would cost a ResNet-50
// step 55 launches each way that each move only a few megabytes, so the launch, not the
// copy, would set their time.
//
// The packing is multi_tensor_apply.cuh's (902 pairs of pointers a launch); each block
// converts one chunk of kChunk elements, four at a time (16-byte float32 and 8-byte 16-bit
// accesses) where both tensors are aligned for them. The conversion is copy's (convert<Out>:
// round to nearest even), so the values are bit for bit those of one copy per tensor. The
// launch reads nothing back on the host, so a captured step (cuda/captured_step.h) records it.
#include <cstdint>
#include <span>
#include <type_traits>

#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/multi_tensor_apply.cuh"
#include "memgrad/cuda/kernels/strided_indexer.cuh"

namespace mg::cuda {

namespace {

// lists.data[0]: sources of In; lists.data[1]: destinations of Out (one of the two float,
// the other __half or __nv_bfloat16).
template <class In, class Out>
__global__ void __launch_bounds__(kThreadsPerBlock) convert_each_kernel(TensorLists<2> lists) {
  constexpr int kVec = vector_width_v<float>;  // 4
  const BlockWork work = block_work(lists);
  const In* in = static_cast<const In*>(lists.data[0][work.tensor]) + work.begin;
  Out* out = static_cast<Out*>(lists.data[1][work.tensor]) + work.begin;
  const int64_t count = work.end - work.begin;
  // NOTE: a chunk starts a multiple of kChunk (itself of kVec) elements into its tensor, so
  // it is aligned exactly when the tensor is; a view at an odd offset takes the scalar loop.
  const bool aligned = reinterpret_cast<uintptr_t>(in) % (sizeof(In) * kVec) == 0 &&
                       reinterpret_cast<uintptr_t>(out) % (sizeof(Out) * kVec) == 0;
  const int64_t vectors = aligned ? count / kVec : 0;
  for (int64_t v = threadIdx.x; v < vectors; v += kThreadsPerBlock) {
    const AlignedVector<In, kVec> x = reinterpret_cast<const AlignedVector<In, kVec>*>(in)[v];
    AlignedVector<Out, kVec> y;
#pragma unroll
    for (int j = 0; j < kVec; ++j) y.value[j] = convert<Out>(x.value[j]);
    reinterpret_cast<AlignedVector<Out, kVec>*>(out)[v] = y;
  }
  for (int64_t i = vectors * kVec + threadIdx.x; i < count; i += kThreadsPerBlock) out[i] = convert<Out>(in[i]);
}

template <class Out>
void launch_convert(std::span<const Tensor> sources, std::span<const Tensor> destinations, cudaStream_t stream) {
  launch_multi_tensor<2>("convert_each", {sources, destinations}, /*steps=*/{}, stream,
                         [&]<class In>(const TensorLists<2>& lists, unsigned blocks, cudaStream_t on) {
                           constexpr bool kInIs16Bit = std::is_same_v<In, __half> || std::is_same_v<In, __nv_bfloat16>;
                           if constexpr (std::is_same_v<In, float> ? !std::is_same_v<Out, float> : kInIs16Bit) {
                             convert_each_kernel<In, Out><<<blocks, kThreadsPerBlock, 0, on>>>(lists);
                           }
                         });
}

}  // namespace

void convert_each(std::span<const Tensor> sources, std::span<const Tensor> destinations) {
  constexpr const char* kOp = "convert_each";
  MG_CHECK(sources.size() == destinations.size(), kOp, ": got ", sources.size(), " sources but ",
           destinations.size(), " destinations");
  if (sources.empty()) return;
  const Device device = sources[0].device();
  const DType from = sources[0].dtype();
  const DType to = destinations[0].dtype();
  MG_CHECK((from == DType::Float32 && is_16_bit_float(to)) || (is_16_bit_float(from) && to == DType::Float32), kOp,
           ": converts float32 to float16 or bfloat16 or back, got ", from, " to ", to,
           ". Hint: copy converts between any dtypes, one tensor at a time.");
  for (size_t i = 0; i < sources.size(); ++i) {
    const Tensor& source = sources[i];
    const Tensor& destination = destinations[i];
    // The kernel walks each pair as two flat arrays: both dense, in one layout.
    const MemoryFormat layout = suggest_memory_format(source);
    MG_CHECK(source.dtype() == from && source.device() == device && destination.dtype() == to &&
                 destination.device() == device && destination.sizes() == source.sizes() &&
                 is_contiguous_in(source, layout) && is_contiguous_in(destination, layout),
             kOp, ": pair ", i, " must be a ", from, " source on ", device, " and a ", to,
             " destination of its sizes there, both dense in the source's layout (", layout, "); got a ",
             source.dtype(), " source of shape ", source.sizes(), " with strides ", source.strides(), " on ",
             source.device(), " and a ", destination.dtype(), " destination of shape ", destination.sizes(),
             " with strides ", destination.strides(), " on ", destination.device(),
             ". Hint: copy converts any other tensor, one at a time.");
  }
  DeviceGuard guard(device);  // kernels launch on the current device
  const cudaStream_t stream = current_stream(device);
  if (to == DType::Float16) {
    launch_convert<__half>(sources, destinations, stream);
  } else if (to == DType::BFloat16) {
    launch_convert<__nv_bfloat16>(sources, destinations, stream);
  } else {
    launch_convert<float>(sources, destinations, stream);
  }
}

}  // namespace mg::cuda
