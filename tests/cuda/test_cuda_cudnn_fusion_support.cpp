// tests/cuda/test_cuda_cudnn_fusion_support.cpp — does cuDNN, on this GPU, run a
// convolution whose epilogue generates batch norm's per-channel statistics? Stage 0 of
// docs/design/fused_conv_bn.md: before memgrad builds fused convolution + batch norm on
// the graph API, this probe builds the smallest such graph through memgrad's own backend
// descriptors (cuda/cudnn/backend_descriptor.h) — a float16 channels_last 3x3 convolution
// followed by GEN_STATS (sum and sum of squares per output channel, float32) — asks the
// heuristics (mode A, then the fallback list) for engine configurations, requires one to
// finalize into an execution plan, runs it on random data, and compares the output with
// memgrad's unfused conv2d and the statistics with memgrad's reductions of that output.
//
// NOTE: attributes not settled by NVIDIA's documentation, for the GPU run to decide:
// - CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC: cudnn-frontend's legacy sample sets FLOAT, its
//   v1 graph node sets the input's data type (HALF). The probe tries FLOAT, then HALF, and
//   WARNs which one cuDNN took.
// - Whether GEN_STATS sums the convolution's float32 accumulators or its float16-rounded
//   output is not documented; the tolerances below hold for either (see check_statistics).
#include <catch2/catch.hpp>

#if MG_WITH_CUDNN

#include <cudnn.h>

#include <array>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "memgrad/autograd/conv.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/cuda/cudnn/backend_descriptor.h"
#include "memgrad/cuda/cudnn/check.h"
#include "memgrad/cuda/cudnn/conv_engines.h"
#include "memgrad/cuda/cudnn/handle.h"
#include "memgrad/cuda/runtime.h"

using namespace mg;
using cuda::cudnn::BackendDescriptor;

namespace {

// The variant pack's names for the graph's five real tensors.
constexpr int64_t kInputId = 1, kWeightId = 2, kOutputId = 3, kSumId = 4, kSquareSumId = 5;

// A real (non-virtual) tensor dense in `layout`, 16-byte aligned (tensor-core engines need it).
BackendDescriptor real_tensor(int64_t id, cudnnDataType_t type, const Shape& sizes, MemoryFormat layout) {
  const Shape strides = strides_for(sizes, layout);
  BackendDescriptor result(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  result.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, sizes.begin())
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.begin())
      .set_int64s(CUDNN_ATTR_TENSOR_UNIQUE_ID, {id})
      .set_int64s(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, {16});
  result.finalize();
  return result;
}

// The graph's descriptors, kept alive together: the backend API does not say whether a
// descriptor set as an attribute may be destroyed before the plan built from it (as
// ConvPlan::graph_parts notes).
struct ProbeGraph {
  std::vector<BackendDescriptor> parts;
  BackendDescriptor graph;
};

// y = conv(x, w) (3x3, pad 1, stride 1, float accumulation, alpha 1, beta 0), then
// (sum, sqsum) = GEN_STATS(y) per output channel; nullopt when cuDNN refuses the GEN_STATS
// operation with `math_precision`.
std::optional<ProbeGraph> conv_genstats_graph(cudnnHandle_t handle, const Shape& input_sizes,
                                              const Shape& weight_sizes, const Shape& output_sizes,
                                              cudnnDataType_t math_precision) {
  const Shape per_channel{1, output_sizes[1], 1, 1};
  ProbeGraph probe;
  BackendDescriptor x = real_tensor(kInputId, CUDNN_DATA_HALF, input_sizes, MemoryFormat::ChannelsLast);
  BackendDescriptor w = real_tensor(kWeightId, CUDNN_DATA_HALF, weight_sizes, MemoryFormat::ChannelsLast);
  BackendDescriptor y = real_tensor(kOutputId, CUDNN_DATA_HALF, output_sizes, MemoryFormat::ChannelsLast);
  // NOTE: per-channel statistics as cudnn-frontend lays them out: (1, K, 1, 1), NHWC strides.
  BackendDescriptor sum = real_tensor(kSumId, CUDNN_DATA_FLOAT, per_channel, MemoryFormat::ChannelsLast);
  BackendDescriptor square_sum = real_tensor(kSquareSumId, CUDNN_DATA_FLOAT, per_channel, MemoryFormat::ChannelsLast);

  const cudnnDataType_t accumulate = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  BackendDescriptor convolution(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  convolution.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &accumulate)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
      .set_int64s(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, {2})
      .set_int64s(CUDNN_ATTR_CONVOLUTION_DILATIONS, {1, 1})
      .set_int64s(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, {1, 1})
      .set_int64s(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, {1, 1})
      .set_int64s(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, {1, 1});
  convolution.finalize();

  const float one = 1.0f, zero = 0.0f;
  BackendDescriptor convolve(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  convolve.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x)
      .set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w)
      .set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y)
      .set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, convolution)
      .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &one)
      .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &zero);
  convolve.finalize();

  const cudnnGenStatsMode_t statistics_mode = CUDNN_GENSTATS_SUM_SQSUM;
  BackendDescriptor statistics(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
  statistics.set(CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &statistics_mode)
      .set(CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math_precision)
      .set_descriptor(CUDNN_ATTR_OPERATION_GENSTATS_XDESC, y)
      .set_descriptor(CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, sum)
      .set_descriptor(CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, square_sum);
  if (statistics.try_finalize() != CUDNN_STATUS_SUCCESS) return std::nullopt;

  BackendDescriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  std::array<cudnnBackendDescriptor_t, 2> operations = {convolve.get(), statistics.get()};
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                static_cast<int64_t>(operations.size()), operations.data())
      .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  if (graph.try_finalize() != CUDNN_STATUS_SUCCESS) return std::nullopt;
  for (BackendDescriptor* part : {&x, &w, &y, &sum, &square_sum, &convolution, &convolve, &statistics}) {
    probe.parts.push_back(std::move(*part));
  }
  probe.graph = std::move(graph);
  return probe;
}

struct ProbePlan {
  BackendDescriptor engine_config;
  BackendDescriptor execution_plan;
  int64_t engine = -1;  // cuDNN's global engine index
  size_t workspace_bytes = 0;
};

// The first engine configuration of mode A, then of the fallback list, that finalizes into
// an execution plan for `graph`; `offered` counts the configurations each mode listed.
std::optional<ProbePlan> first_plan(cudnnHandle_t handle, const BackendDescriptor& graph, std::string& offered) {
  std::ostringstream report;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    BackendDescriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heuristics.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
        .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    const char* name = mode == CUDNN_HEUR_MODE_A ? "mode A" : "fallback";
    if (heuristics.try_finalize() != CUDNN_STATUS_SUCCESS) {
      report << name << ": heuristics refused the graph; ";
      continue;
    }
    std::vector<BackendDescriptor> configs =
        cuda::cudnn::get_descriptors(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    report << name << ": " << configs.size() << " configuration(s); ";
    for (BackendDescriptor& config : configs) {
      BackendDescriptor execution_plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      execution_plan.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config)
          .set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
      if (execution_plan.try_finalize() != CUDNN_STATUS_SUCCESS) continue;
      BackendDescriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
      cudnnBackendDescriptor_t raw_engine = engine.get();
      int64_t engines = 0;
      MG_CUDNN_CHECK(cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &engines, &raw_engine));
      ProbePlan plan;
      plan.engine = engine.get_int64(CUDNN_ATTR_ENGINE_GLOBAL_INDEX);
      plan.workspace_bytes =
          static_cast<size_t>(execution_plan.get_int64(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE));
      plan.engine_config = std::move(config);
      plan.execution_plan = std::move(execution_plan);
      offered = report.str();
      return plan;
    }
  }
  offered = report.str();
  return std::nullopt;
}

// Standard normal values times `scale`, rounded to float16, on the GPU in `layout`.
Tensor random_half(const Shape& sizes, double scale, uint64_t seed, MemoryFormat layout) {
  Generator generator(seed);
  Tensor values = mul(randn(sizes, {}, &generator), scale);
  return contiguous_copy(converted_copy(values, DType::Float16, Device::cuda()), layout);
}

std::vector<double> host_doubles(const Tensor& tensor) {
  return converted_copy(tensor, DType::Float64, Device::cpu()).to_vector<double>();
}

// Per channel: the fused sum within 1e-3 of sum(|y|) (each float16 output is rounded by at
// most 2^-11 of its size, so the two sums differ by less than 4.9e-4 sum(|y|) even when
// one side sums unrounded accumulators), and the fused sum of squares within 2e-3 of the
// reference (a square's rounding is at most ~2^-10 relative).
void check_statistics(const Tensor& sum, const Tensor& square_sum, const Tensor& expected_sum,
                      const Tensor& expected_square_sum, const Tensor& absolute_sum) {
  const std::vector<double> got_sum = host_doubles(sum), got_squares = host_doubles(square_sum);
  const std::vector<double> want_sum = host_doubles(expected_sum), want_squares = host_doubles(expected_square_sum);
  const std::vector<double> scale = host_doubles(absolute_sum);
  REQUIRE(got_sum.size() == want_sum.size());
  for (size_t c = 0; c < got_sum.size(); ++c) {
    INFO("channel " << c << ": sum " << got_sum[c] << " vs " << want_sum[c] << " (sum |y| " << scale[c]
                    << "), sum of squares " << got_squares[c] << " vs " << want_squares[c]);
    REQUIRE(want_squares[c] > 0.0);
    CHECK(std::abs(got_sum[c] - want_sum[c]) <= 1e-3 * scale[c]);
    CHECK(std::abs(got_squares[c] - want_squares[c]) <= 2e-3 * want_squares[c]);
  }
}

}  // namespace

TEST_CASE("cuDNN fuses per-channel statistics into a float16 channels_last convolution",
          "[cuda][cudnn][fusion]") {
  NoGradGuard no_grad;
  const Device device = Device::cuda();
  const Shape input_sizes{32, 64, 56, 56}, weight_sizes{64, 64, 3, 3}, output_sizes{32, 64, 56, 56};
  // Weights ~ N(0, 1/fan_in): outputs of the order of 1, far from float16's range limits.
  Tensor x = random_half(input_sizes, 1.0, 1701, MemoryFormat::ChannelsLast);
  Tensor w = random_half(weight_sizes, 1.0 / std::sqrt(64.0 * 9.0), 1702, MemoryFormat::ChannelsLast);
  Tensor y = empty(output_sizes, {.dtype = DType::Float16, .device = device}, MemoryFormat::ChannelsLast);
  Tensor sum = empty({64}, {.dtype = DType::Float32, .device = device});
  Tensor square_sum = empty({64}, {.dtype = DType::Float32, .device = device});

  cuda::DeviceGuard guard(device);
  cudnnHandle_t handle = cuda::cudnn_handle(device, cuda::current_stream(device));
  std::optional<ProbeGraph> graph;
  std::optional<ProbePlan> plan;
  std::string report;
  for (cudnnDataType_t precision : {CUDNN_DATA_FLOAT, CUDNN_DATA_HALF}) {
    const char* precision_name = precision == CUDNN_DATA_FLOAT ? "FLOAT" : "HALF";
    graph = conv_genstats_graph(handle, input_sizes, weight_sizes, output_sizes, precision);
    if (!graph) {
      report += std::string("GENSTATS_MATH_PREC ") + precision_name + ": operation or graph refused; ";
      continue;
    }
    std::string offered;
    plan = first_plan(handle, graph->graph, offered);
    report += std::string("GENSTATS_MATH_PREC ") + precision_name + ": " + offered;
    if (plan) break;
  }
  INFO("cuDNN " << cudnnGetVersion() << ": " << report);
  REQUIRE(plan.has_value());
  WARN("conv + genstats runs on cuDNN " << cudnnGetVersion() << ": engine " << plan->engine << ", workspace "
                                        << plan->workspace_bytes << " bytes; " << report);

  {
    Tensor workspace = cuda::cudnn::borrow_workspace(plan->workspace_bytes, device);
    void* scratch = workspace.defined() ? workspace.raw_data() : nullptr;
    const std::array<int64_t, 5> ids = {kInputId, kWeightId, kOutputId, kSumId, kSquareSumId};
    const std::array<void*, 5> pointers = {x.raw_data(), w.raw_data(), y.raw_data(), sum.raw_data(),
                                           square_sum.raw_data()};
    BackendDescriptor variant_pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    variant_pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(ids.size()), ids.data())
        .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(pointers.size()),
             pointers.data())
        .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &scratch);
    variant_pack.finalize();
    MG_CUDNN_CHECK(cudnnBackendExecute(handle, plan->execution_plan.get(), variant_pack.get()));
  }
  cuda::synchronize(device);

  // The unfused reference: memgrad's convolution, then its float32 reductions.
  Tensor expected = conv2d(x, w, {}, {.padding = {1, 1}});
  REQUIRE(expected.sizes() == output_sizes);
  const std::vector<double> got = host_doubles(y), want = host_doubles(expected);
  double largest = 0.0, worst = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    largest = std::max(largest, std::abs(want[i]));
    worst = std::max(worst, std::abs(got[i] - want[i]));
  }
  INFO("largest |y| " << largest << ", largest difference " << worst);
  REQUIRE(largest > 0.5);  // random data, not zeros
  CHECK(worst <= 2e-3 * largest);  // two float16 roundings of float32 sums: about one ulp

  Tensor expected_float = converted_copy(expected, DType::Float32, device);
  check_statistics(sum, square_sum, mg::sum(expected_float, {0, 2, 3}),
                   mg::sum(mul(expected_float, expected_float), {0, 2, 3}), mg::sum(abs(expected_float), {0, 2, 3}));
}

#endif  // MG_WITH_CUDNN
