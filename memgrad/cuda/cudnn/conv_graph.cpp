// cuda/cudnn/conv_graph.cpp — the convolution as a cuDNN operation graph, with the
// prologue or epilogue its fused directions add, and the variant pack that binds a call's
// pointers to it (see the header).
#include "memgrad/cuda/cudnn/conv_graph.h"

#include <array>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "memgrad/core/memory_format.h"
#include "memgrad/cuda/cudnn/backend_descriptor.h"
#include "memgrad/cuda/cudnn/check.h"
#include "memgrad/cuda/cudnn/descriptors.h"

namespace mg::cuda::cudnn {

namespace {

// The unique ids that bind a variant pack's pointers to the graph's tensors, in the order
// of ConvOperands' fields (then of BatchNormOperands'), and those of the virtual tensors
// between the prologue's or the epilogue's steps.
constexpr int64_t kInputId = 1, kWeightId = 2, kOutputId = 3, kSumId = 4, kSquareSumId = 5, kScaleId = 6,
                  kBiasId = 7;
constexpr int64_t kNormInputId = 8, kNormMeanId = 9, kNormInvstdId = 10, kNormWeightId = 11, kNormBiasId = 12,
                  kNormGradWeightId = 13, kNormGradBiasId = 14, kNormGradScaleId = 15, kNormInputScaleId = 16,
                  kNormOffsetId = 17;
constexpr int64_t kScaledId = 101, kShiftedId = 102, kActivatedId = 103;
constexpr int64_t kDataGradientId = 104, kCenteredId = 105, kStandardizedId = 106, kRescaledId = 107,
                  kRebuiltId = 108;

// Real tensors are in memory, bound to a pointer through their id; virtual ones are
// results one operation of the graph hands the next inside the kernel.
enum class Placement { Memory, Virtual };

BackendDescriptor tensor(int64_t id, DType dtype, const Shape& sizes, MemoryFormat layout, int64_t alignment,
                         Placement placement = Placement::Memory) {
  const Shape strides = strides_for(sizes, layout);
  const cudnnDataType_t type = data_type(dtype);
  BackendDescriptor result(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  result.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, sizes.begin())
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.begin())
      .set_int64s(CUDNN_ATTR_TENSOR_UNIQUE_ID, {id})
      .set_int64s(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, {alignment});
  if (placement == Placement::Virtual) {
    const bool is_virtual = true;
    result.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  }
  result.finalize();
  return result;
}

BackendDescriptor convolution(DType dtype, const Window2d& window) {
  const cudnnDataType_t compute = compute_type(dtype);
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;  // what deep learning calls convolution
  BackendDescriptor result(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  result.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
      .set_int64s(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, {2})
      .set_int64s(CUDNN_ATTR_CONVOLUTION_DILATIONS, {window.dilation_h, window.dilation_w})
      .set_int64s(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, {window.stride_h, window.stride_w})
      .set_int64s(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, {window.pad_h, window.pad_w})
      .set_int64s(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, {window.pad_h, window.pad_w});
  // NOTE: groups are implied by the weight's C/groups channels against the input's C.
  result.finalize();
  return result;
}

// The attribute names of x, w, y, the convolution, alpha and beta for each direction's
// operation (backward data writes x, backward filter writes w).
struct OperationAttributes {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t input, weight, output, convolution, alpha, beta;
};
OperationAttributes attributes_of(ConvDirection direction) {
  switch (direction) {
    case ConvDirection::Forward:
    case ConvDirection::ForwardStatistics:
    case ConvDirection::ForwardNormalizedStatistics:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
    case ConvDirection::BackwardData:
    case ConvDirection::BackwardDataAccumulate:
    case ConvDirection::BackwardDataReluBatchNorm:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
    case ConvDirection::BackwardFilter:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
  }
  MG_ASSERT(false, "unknown convolution direction");
}

// GEN_STATS over the convolution's output y: per output channel, the float32 sum and sum of
// squares, as (1, K, 1, 1) tensors laid out as cudnn-frontend lays them (strides of
// channels_last), accumulated in float32 (GENSTATS_MATH_PREC FLOAT: what cuDNN 9.14 took
// on the H200, tests/cuda/test_cuda_cudnn_fusion_support.cpp).
std::array<BackendDescriptor, 3> statistics_of(const BackendDescriptor& y, int64_t channels, int64_t alignment) {
  const Shape per_channel{1, channels, 1, 1};
  BackendDescriptor sum = tensor(kSumId, DType::Float32, per_channel, MemoryFormat::ChannelsLast, alignment);
  BackendDescriptor square_sum =
      tensor(kSquareSumId, DType::Float32, per_channel, MemoryFormat::ChannelsLast, alignment);
  const cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
  const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  BackendDescriptor operation(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
  operation.set(CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &mode)
      .set(CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision)
      .set_descriptor(CUDNN_ATTR_OPERATION_GENSTATS_XDESC, y)
      .set_descriptor(CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, sum)
      .set_descriptor(CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, square_sum);
  operation.finalize();
  return {std::move(sum), std::move(square_sum), std::move(operation)};
}

// One pointwise operation y = mode(x, b), or y = mode(x) without b, computed in float32.
// Its two descriptors go to `parts`; returns the operation.
// NOTE: ReLU's clips and slope are set to the plain ReLU's, as cudnn-frontend's graph API
// sets them, rather than left to defaults (NVIDIA's legacy ConvBNfprop sample asks for a
// leaky one).
cudnnBackendDescriptor_t pointwise(cudnnPointwiseMode_t mode, const BackendDescriptor& x, const BackendDescriptor* b,
                                   const BackendDescriptor& y, std::vector<BackendDescriptor>& parts) {
  const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  BackendDescriptor function(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  function.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
      .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision);
  if (mode == CUDNN_POINTWISE_RELU_FWD) {
    const double lower_clip = 0.0, upper_clip = std::numeric_limits<float>::max(), lower_slope = 0.0;
    function.set(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, CUDNN_TYPE_DOUBLE, 1, &lower_clip)
        .set(CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, CUDNN_TYPE_DOUBLE, 1, &upper_clip)
        .set(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE, CUDNN_TYPE_DOUBLE, 1, &lower_slope);
  }
  function.finalize();
  BackendDescriptor operation(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  operation.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, function)
      .set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x)
      .set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
  if (b != nullptr) operation.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
  operation.finalize();
  parts.push_back(std::move(function));
  parts.push_back(std::move(operation));
  return parts.back().get();
}

// ForwardNormalizedStatistics' prologue, relu(x * scale + bias) with scale and bias
// (1, C, 1, 1) in `coefficients`, as NVIDIA's ConvBNfprop builds it (cudnn-frontend's
// samples/legacy_samples/fusion_sample.cpp, run_bn_conv_gen_stat, and the "SBRCS" case of
// samples/cpp/convolution/fprop.cpp): three pointwise operations whose results are virtual
// float32 tensors shaped like x. Its descriptors go to `parts` and its operations to
// `operations`; returns the ReLU's result, which the convolution reads as its x.
// NOTE: float32 in the convolution's x keeps the normalised value unrounded, as both
// samples declare it (cudnn-frontend's Python test declares it in the data's type).
BackendDescriptor prologue_of(const BackendDescriptor& x, const ConvProblem& problem, DType coefficients,
                              std::vector<BackendDescriptor>& parts,
                              std::vector<cudnnBackendDescriptor_t>& operations) {
  const Shape per_channel{1, problem.input[1], 1, 1};
  const int64_t alignment = problem.alignment;
  BackendDescriptor scale = tensor(kScaleId, coefficients, per_channel, problem.layout, alignment);
  BackendDescriptor bias = tensor(kBiasId, coefficients, per_channel, problem.layout, alignment);
  auto intermediate = [&](int64_t id) {
    return tensor(id, DType::Float32, problem.input, problem.layout, alignment, Placement::Virtual);
  };
  BackendDescriptor scaled = intermediate(kScaledId), shifted = intermediate(kShiftedId);
  BackendDescriptor activated = intermediate(kActivatedId);
  operations.push_back(pointwise(CUDNN_POINTWISE_MUL, x, &scale, scaled, parts));
  operations.push_back(pointwise(CUDNN_POINTWISE_ADD, scaled, &bias, shifted, parts));
  operations.push_back(pointwise(CUDNN_POINTWISE_RELU_FWD, shifted, nullptr, activated, parts));
  for (BackendDescriptor* part : {&scale, &bias, &scaled, &shifted}) parts.push_back(std::move(*part));
  return activated;
}

// The ReLU's backward, dx = dy where x > 0 and 0 elsewhere, computed in float32. Its two
// descriptors go to `parts`; returns the operation.
cudnnBackendDescriptor_t relu_backward(const BackendDescriptor& dy, const BackendDescriptor& x,
                                       const BackendDescriptor& dx, std::vector<BackendDescriptor>& parts) {
  const cudnnPointwiseMode_t mode = CUDNN_POINTWISE_RELU_BWD;
  const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  const double lower_clip = 0.0, upper_clip = std::numeric_limits<float>::max(), lower_slope = 0.0;
  BackendDescriptor function(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  function.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
      .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision)
      .set(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, CUDNN_TYPE_DOUBLE, 1, &lower_clip)
      .set(CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, CUDNN_TYPE_DOUBLE, 1, &upper_clip)
      .set(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE, CUDNN_TYPE_DOUBLE, 1, &lower_slope);
  function.finalize();
  BackendDescriptor operation(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  operation.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, function)
      .set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, dy)
      .set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x)
      .set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, dx);
  operation.finalize();
  parts.push_back(std::move(function));
  parts.push_back(std::move(operation));
  return parts.back().get();
}

// BackwardDataReluBatchNorm's epilogue over the convolution's float32 result
// `data_gradient`, as NVIDIA's DgradDreluBNBwdWeight builds it (cudnn-frontend's
// samples/legacy_samples/fusion_sample.cpp): batch norm's output rebuilt from its input z
// as ((z - mean) * invstd) * weight + bias in virtual float32 tensors, the ReLU's backward
// against it written to x (real, the data's dtype), and BN_BWD_WEIGHTS over x and z, which
// writes the weight and bias gradients and the three coefficients of z's gradient. Its
// descriptors go to `parts` and its operations to `operations`.
void relu_batch_norm_epilogue(const BackendDescriptor& data_gradient, const BackendDescriptor& x,
                              const ConvProblem& problem, std::vector<BackendDescriptor>& parts,
                              std::vector<cudnnBackendDescriptor_t>& operations) {
  const Shape per_channel{1, problem.input[1], 1, 1};
  const int64_t alignment = problem.alignment;
  auto channel_values = [&](int64_t id) {
    return tensor(id, DType::Float32, per_channel, problem.layout, alignment);
  };
  auto intermediate = [&](int64_t id) {
    return tensor(id, DType::Float32, problem.input, problem.layout, alignment, Placement::Virtual);
  };
  BackendDescriptor z = tensor(kNormInputId, problem.dtype, problem.input, problem.layout, alignment);
  BackendDescriptor mean = channel_values(kNormMeanId), invstd = channel_values(kNormInvstdId);
  BackendDescriptor weight = channel_values(kNormWeightId), bias = channel_values(kNormBiasId);
  BackendDescriptor centered = intermediate(kCenteredId), standardized = intermediate(kStandardizedId);
  BackendDescriptor rescaled = intermediate(kRescaledId), rebuilt = intermediate(kRebuiltId);
  operations.push_back(pointwise(CUDNN_POINTWISE_SUB, z, &mean, centered, parts));
  operations.push_back(pointwise(CUDNN_POINTWISE_MUL, centered, &invstd, standardized, parts));
  operations.push_back(pointwise(CUDNN_POINTWISE_MUL, standardized, &weight, rescaled, parts));
  operations.push_back(pointwise(CUDNN_POINTWISE_ADD, rescaled, &bias, rebuilt, parts));
  operations.push_back(relu_backward(data_gradient, rebuilt, x, parts));

  BackendDescriptor grad_weight = channel_values(kNormGradWeightId), grad_bias = channel_values(kNormGradBiasId);
  BackendDescriptor grad_scale = channel_values(kNormGradScaleId), input_scale = channel_values(kNormInputScaleId);
  BackendDescriptor offset = channel_values(kNormOffsetId);
  const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  BackendDescriptor sums(CUDNN_BACKEND_OPERATION_BN_BWD_WEIGHTS_DESCRIPTOR);
  sums.set(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision)
      .set_descriptor(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_X_DESC, z)
      .set_descriptor(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MEAN_DESC, mean)
      .set_descriptor(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_INVSTD_DESC, invstd)
      .set_descriptor(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_BN_SCALE_DESC, weight)
      .set_descriptor(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DY_DESC, x)
      .set_descriptor(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_SCALE_DESC, grad_weight)
      .set_descriptor(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_BIAS_DESC, grad_bias)
      .set_descriptor(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_DY_SCALE_DESC, grad_scale)
      .set_descriptor(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_X_SCALE_DESC, input_scale)
      .set_descriptor(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_BIAS, offset);
  sums.finalize();
  operations.push_back(sums.get());
  for (BackendDescriptor* part : {&z, &mean, &invstd, &weight, &bias, &centered, &standardized, &rescaled, &rebuilt,
                                  &grad_weight, &grad_bias, &grad_scale, &input_scale, &offset, &sums}) {
    parts.push_back(std::move(*part));
  }
}

// The direction's tensors in memory, bound by id: x, w and y, then what its fusion adds.
struct Bindings {
  std::array<int64_t, 15> ids{};
  std::array<void*, 15> pointers{};
  int64_t count = 0;
  void add(int64_t id, void* pointer) {
    ids[static_cast<size_t>(count)] = id;
    pointers[static_cast<size_t>(count++)] = pointer;
  }
};
Bindings bindings(ConvDirection direction, const ConvOperands& data) {
  Bindings bound;
  bound.add(kInputId, data.input);
  bound.add(kWeightId, data.weight);
  bound.add(kOutputId, data.output);
  if (direction == ConvDirection::ForwardStatistics || direction == ConvDirection::ForwardNormalizedStatistics) {
    bound.add(kSumId, data.sum);
    bound.add(kSquareSumId, data.square_sum);
  }
  if (direction == ConvDirection::ForwardNormalizedStatistics) {
    bound.add(kScaleId, data.scale);
    bound.add(kBiasId, data.bias);
  }
  if (direction == ConvDirection::BackwardDataReluBatchNorm) {
    const BatchNormOperands& norm = data.batch_norm;
    for (auto [id, pointer] : {std::pair{kNormInputId, norm.input}, {kNormMeanId, norm.mean},
                               {kNormInvstdId, norm.invstd}, {kNormWeightId, norm.weight}, {kNormBiasId, norm.bias},
                               {kNormGradWeightId, norm.grad_weight}, {kNormGradBiasId, norm.grad_bias},
                               {kNormGradScaleId, norm.grad_scale}, {kNormInputScaleId, norm.input_scale},
                               {kNormOffsetId, norm.offset}}) {
      bound.add(id, pointer);
    }
  }
  return bound;
}

}  // namespace

bool is_fused(ConvDirection direction) {
  return direction == ConvDirection::ForwardStatistics || direction == ConvDirection::ForwardNormalizedStatistics ||
         direction == ConvDirection::BackwardDataReluBatchNorm;
}

// y = conv(x, w) (or its backward) as a graph, alpha = 1 and beta = 0 (overwrite), or
// beta = 1 for BackwardDataAccumulate (x += the gradient); cuDNN reads double scaling
// factors for float64 data, float ones otherwise.
// ForwardNormalizedStatistics convolves relu(x * scale + bias) instead of x (see
// prologue_of), with scale and bias in `coefficients`; the fused forward directions add
// GEN_STATS over y. BackwardDataReluBatchNorm's convolution writes a virtual float32
// result that its epilogue (relu_batch_norm_epilogue) takes on to x.
std::shared_ptr<std::vector<BackendDescriptor>> operation_graph(cudnnHandle_t handle, const ConvProblem& problem,
                                                                DType coefficients) {
  auto parts = std::make_shared<std::vector<BackendDescriptor>>();
  std::vector<cudnnBackendDescriptor_t> operations;
  const int64_t alignment = problem.alignment;
  BackendDescriptor x = tensor(kInputId, problem.dtype, problem.input, problem.layout, alignment);
  BackendDescriptor normalized;
  if (problem.direction == ConvDirection::ForwardNormalizedStatistics) {
    normalized = prologue_of(x, problem, coefficients, *parts, operations);
  }
  BackendDescriptor w = tensor(kWeightId, problem.dtype, problem.weight, problem.layout, alignment);
  BackendDescriptor y = tensor(kOutputId, problem.dtype, problem.output, problem.layout, alignment);
  BackendDescriptor conv = convolution(problem.dtype, problem.window);
  BackendDescriptor data_gradient;
  if (problem.direction == ConvDirection::BackwardDataReluBatchNorm) {
    data_gradient = tensor(kDataGradientId, DType::Float32, problem.input, problem.layout, alignment, Placement::Virtual);
  }
  const OperationAttributes names = attributes_of(problem.direction);
  BackendDescriptor operation(names.type);
  operation.set_descriptor(names.input, normalized.defined() ? normalized : data_gradient.defined() ? data_gradient : x)
      .set_descriptor(names.weight, w)
      .set_descriptor(names.output, y)
      .set_descriptor(names.convolution, conv);
  const bool accumulates = problem.direction == ConvDirection::BackwardDataAccumulate;
  if (problem.dtype == DType::Float64) {
    const double alpha = 1.0, beta = accumulates ? 1.0 : 0.0;
    operation.set(names.alpha, CUDNN_TYPE_DOUBLE, 1, &alpha).set(names.beta, CUDNN_TYPE_DOUBLE, 1, &beta);
  } else {
    const float alpha = 1.0f, beta = accumulates ? 1.0f : 0.0f;
    operation.set(names.alpha, CUDNN_TYPE_FLOAT, 1, &alpha).set(names.beta, CUDNN_TYPE_FLOAT, 1, &beta);
  }
  operation.finalize();
  operations.push_back(operation.get());
  if (data_gradient.defined()) {
    relu_batch_norm_epilogue(data_gradient, x, problem, *parts, operations);
  } else if (is_fused(problem.direction)) {
    for (BackendDescriptor& part : statistics_of(y, problem.output[1], alignment)) parts->push_back(std::move(part));
    operations.push_back(parts->back().get());
  }
  BackendDescriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(operations.size()),
            operations.data())
      .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  // NOTE: a fused graph cuDNN cannot describe is "no engine" for its caller, not an error.
  if (graph.try_finalize() != CUDNN_STATUS_SUCCESS) {
    MG_CHECK(is_fused(problem.direction), "cuDNN refused the ",
             direction_name(problem.direction), " convolution graph for ", problem.dtype, " input ", problem.input,
             ", weight ", problem.weight);
    detail::forget_cudnn_error();
    return nullptr;
  }
  for (BackendDescriptor* part : {&normalized, &data_gradient}) {
    if (part->defined()) parts->push_back(std::move(*part));
  }
  for (BackendDescriptor* part : {&x, &w, &y, &conv, &operation, &graph}) parts->push_back(std::move(*part));
  return parts;
}

BackendDescriptor variant_pack(ConvDirection direction, const ConvOperands& data, void* workspace) {
  const Bindings bound = bindings(direction, data);
  BackendDescriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, bound.count, bound.ids.data())
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, bound.count, bound.pointers.data())
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack.finalize();
  return pack;
}

}  // namespace mg::cuda::cudnn
