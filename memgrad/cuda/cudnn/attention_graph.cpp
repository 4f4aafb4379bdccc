// cuda/cudnn/attention_graph.cpp — fused attention's forward and backward graphs for
// cuDNN's backend API, and their variant packs (see the header).
#include "memgrad/cuda/cudnn/attention_graph.h"

#include <array>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "memgrad/core/error.h"
#include "memgrad/cuda/cudnn/descriptors.h"

namespace mg::cuda::cudnn {

namespace {

// Unique ids of the tensors a variant pack binds: the operands, the scratch tensors in
// the workspace, and the by-value scalars; the virtual ones from 100 on.
constexpr int64_t kQId = 1, kKId = 2, kVId = 3, kOutputId = 4, kStatsId = 5, kGradOutputId = 6, kGradQId = 7,
                  kGradKId = 8, kGradVId = 9, kRowDotId = 10, kGradQAccumulatorId = 11, kScaleId = 12,
                  kMinusInfinityId = 13, kOneId = 14;

// The scalars every run passes by value, read by cuDNN from these host addresses.
// NOTE: -infinity, as cudnn-frontend masks from cuDNN 9.10 on (older ones took the lowest
// float); a masked score then adds exactly 0 to the row's sum.
const float kMinusInfinity = -std::numeric_limits<float>::infinity();
const float kOne = 1.0f;

constexpr int64_t kAlignment = 16;  // what AttentionProblem::aligned_16 promises
constexpr size_t kScratchAlignment = 256;
constexpr size_t kMostDescriptors = 128;

size_t aligned_up(size_t bytes) { return (bytes + kScratchAlignment - 1) / kScratchAlignment * kScratchAlignment; }

using Dims = std::array<int64_t, 4>;

// The graph under construction: each descriptor made goes to `parts` (which must outlive
// the graph), each operation also to `operations`, in the order they are added.
class Builder {
 public:
  // NOTE: parts_ is reserved up front so that references to kept descriptors stay valid
  // while the graph is built; the causal backward graph makes about 70.
  explicit Builder(const AttentionProblem& problem) : problem_(problem) { parts_.reserve(kMostDescriptors); }

  // A tensor in memory, bound by `id` in the variant pack.
  const BackendDescriptor& real(int64_t id, cudnnDataType_t type, const Dims& dims, const Dims& strides) {
    return keep(make_tensor(id, type, dims, strides, /*is_virtual=*/false, /*by_value=*/false));
  }
  // A result one operation hands the next inside the kernel.
  const BackendDescriptor& intermediate(cudnnDataType_t type, const Dims& dims, const Dims& strides) {
    return keep(make_tensor(next_virtual_id_++, type, dims, strides, /*is_virtual=*/true, /*by_value=*/false));
  }
  // A float32 scalar passed by value at each run; one descriptor per id however often
  // the graph reads it (the scale: twice in the backward).
  const BackendDescriptor& scalar(int64_t id) {
    for (const auto& [known_id, descriptor] : scalars_) {
      if (known_id == id) return *descriptor;
    }
    const BackendDescriptor& made =
        keep(make_tensor(id, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, /*is_virtual=*/false, /*by_value=*/true));
    scalars_.emplace_back(id, &made);
    return made;
  }

  // y = mode(x, b, t) computed in `precision` (b and t where the mode takes them); GEN_INDEX
  // reads `axis`.
  void pointwise(cudnnPointwiseMode_t mode, const BackendDescriptor& x, const BackendDescriptor* b,
                 const BackendDescriptor* t, const BackendDescriptor& y,
                 cudnnDataType_t precision = CUDNN_DATA_FLOAT, int64_t axis = -1) {
    BackendDescriptor function(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    function.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision);
    if (axis >= 0) function.set_int64s(CUDNN_ATTR_POINTWISE_AXIS, {axis});
    function.finalize();
    BackendDescriptor operation(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    operation.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, function)
        .set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x)
        .set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    if (b != nullptr) operation.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t != nullptr) operation.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    operation.finalize();
    keep(std::move(function));
    add_operation(std::move(operation));
  }

  // c = a b over the last two dims, batched over the first two, accumulated in float32.
  void matmul(const BackendDescriptor& a, const BackendDescriptor& b, const BackendDescriptor& c) {
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    BackendDescriptor description(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    description.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    description.finalize();
    BackendDescriptor operation(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    operation.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
        .set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
        .set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
        .set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_DESC, description);
    operation.finalize();
    keep(std::move(description));
    add_operation(std::move(operation));
  }

  // y = x reduced by `reduction` over the dims where y has size 1, in float32.
  void reduce(cudnnReduceTensorOp_t reduction, const BackendDescriptor& x, const BackendDescriptor& y) {
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    BackendDescriptor description(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    description.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute)
        .set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduction);
    description.finalize();
    BackendDescriptor operation(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    operation.set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_DESC, description)
        .set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
        .set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
    operation.finalize();
    keep(std::move(description));
    add_operation(std::move(operation));
  }

  // y = x seen with y's dims and strides (a transpose, here).
  void reshape(const BackendDescriptor& x, const BackendDescriptor& y) {
    BackendDescriptor operation(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    operation.set_descriptor(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x).set_descriptor(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
    operation.finalize();
    add_operation(std::move(operation));
  }

  // S, scaled and (causal) masked: what the softmax of both directions reads.
  const BackendDescriptor& masked_scores(const BackendDescriptor& q, const BackendDescriptor& k_transposed) {
    const BackendDescriptor& scores = intermediate(CUDNN_DATA_FLOAT, scores_dims(), scores_strides());
    matmul(q, k_transposed, scores);
    const BackendDescriptor& scaled = intermediate(CUDNN_DATA_FLOAT, scores_dims(), scores_strides());
    pointwise(CUDNN_POINTWISE_MUL, scores, &scalar(kScaleId), nullptr, scaled);
    if (!problem_.causal) return scaled;
    // Top-left aligned, as memgrad's kernels: query i keeps keys j <= i.
    const BackendDescriptor& row = intermediate(CUDNN_DATA_INT32, scores_dims(), scores_strides());
    pointwise(CUDNN_POINTWISE_GEN_INDEX, scaled, nullptr, nullptr, row, CUDNN_DATA_FLOAT, /*axis=*/2);
    const BackendDescriptor& column = intermediate(CUDNN_DATA_INT32, scores_dims(), scores_strides());
    pointwise(CUDNN_POINTWISE_GEN_INDEX, scaled, nullptr, nullptr, column, CUDNN_DATA_FLOAT, /*axis=*/3);
    const BackendDescriptor& kept = intermediate(CUDNN_DATA_BOOLEAN, scores_dims(), scores_strides());
    pointwise(CUDNN_POINTWISE_CMP_GE, row, &column, nullptr, kept, CUDNN_DATA_BOOLEAN);
    const BackendDescriptor& masked = intermediate(CUDNN_DATA_FLOAT, scores_dims(), scores_strides());
    pointwise(CUDNN_POINTWISE_BINARY_SELECT, scaled, &scalar(kMinusInfinityId), &kept, masked);
    return masked;
  }

  Dims scores_dims() const { return {problem_.batch, problem_.heads, problem_.query_len, problem_.key_len}; }
  Dims scores_strides() const {
    const int64_t tq = problem_.query_len, tk = problem_.key_len;
    return {problem_.heads * tq * tk, tq * tk, tk, 1};
  }
  // The same matrix transposed in place: (B, H, Tk, Tq).
  Dims transposed_scores_dims() const { return {problem_.batch, problem_.heads, problem_.key_len, problem_.query_len}; }
  Dims transposed_scores_strides() const {
    const int64_t tq = problem_.query_len, tk = problem_.key_len;
    return {problem_.heads * tq * tk, tq * tk, 1, tk};
  }
  Dims row_dims() const { return {problem_.batch, problem_.heads, problem_.query_len, 1}; }
  Dims row_strides() const { return {problem_.heads * problem_.query_len, problem_.query_len, 1, 1}; }

  // An operand (B, H, T, D) with its strides, or transposed to (B, H, D, T).
  const BackendDescriptor& operand(int64_t id, AttentionProblem::Operand which, int64_t length, bool transposed) {
    const auto& s = problem_.strides[which];
    const cudnnDataType_t type = data_type(problem_.dtype);
    if (transposed) return real(id, type, {problem_.batch, problem_.heads, problem_.head_dim, length}, {s[0], s[1], 1, s[2]});
    return real(id, type, {problem_.batch, problem_.heads, length, problem_.head_dim}, {s[0], s[1], s[2], 1});
  }

  // The operation graph over everything added, finalized; false when cuDNN refuses it.
  bool finish(cudnnHandle_t handle) {
    BackendDescriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(operations_.size()),
              operations_.data())
        .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    if (graph.try_finalize() != CUDNN_STATUS_SUCCESS) return false;
    keep(std::move(graph));
    return true;
  }

  std::vector<BackendDescriptor> take_parts() { return std::move(parts_); }

 private:
  BackendDescriptor make_tensor(int64_t id, cudnnDataType_t type, const Dims& dims, const Dims& strides,
                                bool is_virtual, bool by_value) {
    BackendDescriptor tensor(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    tensor.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type)
        .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data())
        .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data())
        .set_int64s(CUDNN_ATTR_TENSOR_UNIQUE_ID, {id})
        .set_int64s(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, {kAlignment});
    if (is_virtual) tensor.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    if (by_value) tensor.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
    tensor.finalize();
    return tensor;
  }
  const BackendDescriptor& keep(BackendDescriptor descriptor) {
    MG_ASSERT(parts_.size() < parts_.capacity(), "attention graph: more descriptors than reserved");
    parts_.push_back(std::move(descriptor));
    return parts_.back();
  }
  void add_operation(BackendDescriptor operation) { operations_.push_back(keep(std::move(operation)).get()); }

  const AttentionProblem& problem_;
  std::vector<BackendDescriptor> parts_;
  std::vector<cudnnBackendDescriptor_t> operations_;
  std::vector<std::pair<int64_t, const BackendDescriptor*>> scalars_;
  int64_t next_virtual_id_ = 100;
};

void forward_graph(Builder& graph, const AttentionProblem& problem) {
  using P = AttentionProblem;
  const BackendDescriptor& q = graph.operand(kQId, P::Q, problem.query_len, false);
  const BackendDescriptor& k_transposed = graph.operand(kKId, P::K, problem.key_len, true);
  const BackendDescriptor& v = graph.operand(kVId, P::V, problem.key_len, false);
  const BackendDescriptor& output = graph.operand(kOutputId, P::Output, problem.query_len, false);
  const BackendDescriptor& scores = graph.masked_scores(q, k_transposed);
  // The softmax, with its statistics, as cudnn-frontend's CompositeSoftmaxNode.
  const BackendDescriptor& row_max = graph.intermediate(CUDNN_DATA_FLOAT, graph.row_dims(), graph.row_strides());
  graph.reduce(CUDNN_REDUCE_TENSOR_MAX, scores, row_max);
  const BackendDescriptor& centered =
      graph.intermediate(CUDNN_DATA_FLOAT, graph.scores_dims(), graph.scores_strides());
  graph.pointwise(CUDNN_POINTWISE_SUB, scores, &row_max, nullptr, centered);
  const BackendDescriptor& exponentials =
      graph.intermediate(CUDNN_DATA_FLOAT, graph.scores_dims(), graph.scores_strides());
  graph.pointwise(CUDNN_POINTWISE_EXP, centered, nullptr, nullptr, exponentials);
  const BackendDescriptor& row_sum = graph.intermediate(CUDNN_DATA_FLOAT, graph.row_dims(), graph.row_strides());
  graph.reduce(CUDNN_REDUCE_TENSOR_ADD, exponentials, row_sum);
  const BackendDescriptor& log_sum = graph.intermediate(CUDNN_DATA_FLOAT, graph.row_dims(), graph.row_strides());
  graph.pointwise(CUDNN_POINTWISE_LOG, row_sum, nullptr, nullptr, log_sum);
  const BackendDescriptor& stats = graph.real(kStatsId, CUDNN_DATA_FLOAT, graph.row_dims(), graph.row_strides());
  graph.pointwise(CUDNN_POINTWISE_ADD, row_max, &log_sum, nullptr, stats);
  // The probabilities enter the second product rounded to the data's type.
  const BackendDescriptor& probabilities =
      graph.intermediate(data_type(problem.dtype), graph.scores_dims(), graph.scores_strides());
  graph.pointwise(CUDNN_POINTWISE_DIV, exponentials, &row_sum, nullptr, probabilities);
  graph.matmul(probabilities, v, output);
}

void backward_graph(Builder& graph, const AttentionProblem& problem) {
  using P = AttentionProblem;
  const cudnnDataType_t type = data_type(problem.dtype);
  const BackendDescriptor& q = graph.operand(kQId, P::Q, problem.query_len, false);
  const BackendDescriptor& k_transposed = graph.operand(kKId, P::K, problem.key_len, true);
  const BackendDescriptor& v_transposed = graph.operand(kVId, P::V, problem.key_len, true);
  const BackendDescriptor& output = graph.operand(kOutputId, P::Output, problem.query_len, false);
  const BackendDescriptor& grad_output = graph.operand(kGradOutputId, P::GradOutput, problem.query_len, false);
  const BackendDescriptor& stats = graph.real(kStatsId, CUDNN_DATA_FLOAT, graph.row_dims(), graph.row_strides());
  const BackendDescriptor& grad_q = graph.operand(kGradQId, P::GradQ, problem.query_len, false);
  const BackendDescriptor& grad_k = graph.operand(kGradKId, P::GradK, problem.key_len, false);
  const BackendDescriptor& grad_v = graph.operand(kGradVId, P::GradV, problem.key_len, false);
  const int64_t b = problem.batch, h = problem.heads, tq = problem.query_len, tk = problem.key_len,
                d = problem.head_dim;

  // D = rowsum(dO o O), into the workspace (cudnn-frontend's softmax_sum, times 1 as it does).
  const BackendDescriptor& products = graph.intermediate(CUDNN_DATA_FLOAT, {b, h, tq, d}, {h * tq * d, tq * d, d, 1});
  graph.pointwise(CUDNN_POINTWISE_MUL, grad_output, &output, nullptr, products);
  const BackendDescriptor& row_dot = graph.intermediate(CUDNN_DATA_FLOAT, graph.row_dims(), graph.row_strides());
  graph.reduce(CUDNN_REDUCE_TENSOR_ADD, products, row_dot);
  const BackendDescriptor& delta = graph.real(kRowDotId, CUDNN_DATA_FLOAT, graph.row_dims(), graph.row_strides());
  graph.pointwise(CUDNN_POINTWISE_MUL, row_dot, &graph.scalar(kOneId), nullptr, delta);

  // P = exp(S - Stats), and dV = P^T dO.
  const BackendDescriptor& scores = graph.masked_scores(q, k_transposed);
  const BackendDescriptor& shifted = graph.intermediate(CUDNN_DATA_FLOAT, graph.scores_dims(), graph.scores_strides());
  graph.pointwise(CUDNN_POINTWISE_SUB, scores, &stats, nullptr, shifted);
  const BackendDescriptor& probabilities =
      graph.intermediate(CUDNN_DATA_FLOAT, graph.scores_dims(), graph.scores_strides());
  graph.pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, nullptr, probabilities);
  const BackendDescriptor& probabilities_transposed =
      graph.intermediate(type, graph.transposed_scores_dims(), graph.transposed_scores_strides());
  graph.reshape(probabilities, probabilities_transposed);
  graph.matmul(probabilities_transposed, grad_output, grad_v);

  // dS = (dO V^T - D) o P * scale, and dK = dS^T Q.
  const BackendDescriptor& grad_probabilities =
      graph.intermediate(CUDNN_DATA_FLOAT, graph.scores_dims(), graph.scores_strides());
  graph.matmul(grad_output, v_transposed, grad_probabilities);
  const BackendDescriptor& centered = graph.intermediate(CUDNN_DATA_FLOAT, graph.scores_dims(), graph.scores_strides());
  graph.pointwise(CUDNN_POINTWISE_SUB, grad_probabilities, &delta, nullptr, centered);
  const BackendDescriptor& weighted = graph.intermediate(CUDNN_DATA_FLOAT, graph.scores_dims(), graph.scores_strides());
  graph.pointwise(CUDNN_POINTWISE_MUL, centered, &probabilities, nullptr, weighted);
  const BackendDescriptor& grad_scores =
      graph.intermediate(CUDNN_DATA_FLOAT, graph.scores_dims(), graph.scores_strides());
  graph.pointwise(CUDNN_POINTWISE_MUL, weighted, &graph.scalar(kScaleId), nullptr, grad_scores);
  const BackendDescriptor& grad_scores_transposed =
      graph.intermediate(type, graph.transposed_scores_dims(), graph.transposed_scores_strides());
  graph.reshape(grad_scores, grad_scores_transposed);
  graph.matmul(grad_scores_transposed, q, grad_k);

  // dQ = dS K: K is K^T seen back as (B, H, Tk, D).
  const auto& k_strides = problem.strides[P::K];
  const BackendDescriptor& k = graph.intermediate(type, {b, h, tk, d}, {k_strides[0], k_strides[1], k_strides[2], 1});
  graph.reshape(k_transposed, k);
  if (problem.deterministic) {
    graph.matmul(grad_scores, k, grad_q);
    return;
  }
  const BackendDescriptor& accumulator =
      graph.real(kGradQAccumulatorId, CUDNN_DATA_FLOAT, {b, h, tq, d}, {h * tq * d, tq * d, d, 1});
  graph.matmul(grad_scores, k, accumulator);
  graph.pointwise(CUDNN_POINTWISE_IDENTITY, accumulator, nullptr, nullptr, grad_q);
}

// The workspace slices after the plan's own: D, then the dQ accumulator.
struct ScratchLayout {
  size_t row_dot_offset = 0, accumulator_offset = 0, bytes = 0;
};
ScratchLayout scratch_layout(const AttentionProblem& problem) {
  ScratchLayout layout;
  if (problem.direction == AttentionDirection::Forward) return layout;
  const auto rows = static_cast<size_t>(problem.batch * problem.heads * problem.query_len);
  layout.row_dot_offset = 0;
  layout.bytes = aligned_up(rows * sizeof(float));
  if (!problem.deterministic) {
    layout.accumulator_offset = layout.bytes;
    layout.bytes += aligned_up(rows * static_cast<size_t>(problem.head_dim) * sizeof(float));
  }
  return layout;
}

}  // namespace

std::unique_ptr<AttentionGraph> attention_graph(cudnnHandle_t handle, const AttentionProblem& problem) {
  Builder builder(problem);
  if (problem.direction == AttentionDirection::Forward) {
    forward_graph(builder, problem);
  } else {
    backward_graph(builder, problem);
  }
  if (!builder.finish(handle)) return nullptr;
  auto result = std::make_unique<AttentionGraph>();
  result->parts = builder.take_parts();
  return result;
}

size_t attention_graph_scratch_bytes(const AttentionProblem& problem) { return scratch_layout(problem).bytes; }

size_t attention_graph_scratch_offset(size_t plan_workspace_bytes) { return aligned_up(plan_workspace_bytes); }

BackendDescriptor attention_variant_pack(const AttentionProblem& problem, const AttentionOperands& data,
                                         const float& scale, void* workspace, size_t plan_workspace_bytes) {
  std::vector<int64_t> ids;
  std::vector<void*> pointers;
  auto bind = [&](int64_t id, const void* pointer) {
    ids.push_back(id);
    pointers.push_back(const_cast<void*>(pointer));
  };
  bind(kQId, data.q);
  bind(kKId, data.k);
  bind(kVId, data.v);
  bind(kOutputId, data.output);
  bind(kStatsId, data.log_sum_exp);
  bind(kScaleId, &scale);
  if (problem.causal) bind(kMinusInfinityId, &kMinusInfinity);
  if (problem.direction == AttentionDirection::Backward) {
    bind(kGradOutputId, data.grad_output);
    bind(kGradQId, data.grad_q);
    bind(kGradKId, data.grad_k);
    bind(kGradVId, data.grad_v);
    bind(kOneId, &kOne);
    const ScratchLayout layout = scratch_layout(problem);
    auto* scratch = static_cast<char*>(workspace) + attention_graph_scratch_offset(plan_workspace_bytes);
    bind(kRowDotId, scratch + layout.row_dot_offset);
    if (!problem.deterministic) bind(kGradQAccumulatorId, scratch + layout.accumulator_offset);
  }
  BackendDescriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(ids.size()), ids.data())
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(pointers.size()),
           pointers.data())
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack.finalize();
  return pack;
}

}  // namespace mg::cuda::cudnn
