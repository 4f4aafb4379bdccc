// core/cpu/attention.cpp — fused scaled dot-product attention on the CPU (core room): the
// FlashAttention-2 algorithm in plain C++, forward and backward.
//
// Forward, for each (batch, head) and tile of query rows: walk the keys tile by tile,
// keeping per row a running maximum m, a running sum l of exp(s - m) and an accumulator of
// the weighted values, rescaled by exp(m_old - m_new) whenever the maximum grows. At the
// end output = accumulator / l and log_sum_exp = m + log(l). The (Tq, Tk) matrix exists
// only one tile at a time, in thread-local buffers.
//
// Backward recomputes each weight from the saved log_sum_exp, p = exp(s - lse), and with
// z the dropout mask and keep = 1 - dropout_p:
//   dV_j += (p z / keep) dO_i                     (the weight the forward applied)
//   dS_ij = p (z / keep * dO_i . v_j - D_i),      D_i = dO_i . O_i
//   dQ_i += scale dS_ij k_j,   dK_j += scale dS_ij q_i
// D_i is sum_j p_ij (z / keep) dO_i . v_j, the softmax's correction term, read off the
// forward's output instead of a second sweep over the keys.
//
// Every dtype computes in float (double for float64). It is also the reference the CUDA
// kernels are tested against.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/cpu/strided_loop.h"
#include "memgrad/core/random.h"

namespace mg::cpu {

namespace {

constexpr int64_t kQueryTile = 32;  // query rows per forward task
constexpr int64_t kKeyTile = 64;    // keys converted to the compute type at a time

template <class T>
using attention_compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Rows of a (B, H, T, D) tensor with unit stride in the last dim, any other strides.
template <class T>
struct HeadRows {
  T* data;
  int64_t batch_stride, head_stride, row_stride;

  explicit HeadRows(const Tensor& tensor)
      : data(tensor.data_ptr<std::remove_const_t<T>>()),
        batch_stride(tensor.strides()[0]),
        head_stride(tensor.strides()[1]),
        row_stride(tensor.strides()[2]) {
    MG_ASSERT(tensor.dim() == 4 && (tensor.sizes()[3] <= 1 || tensor.strides()[3] == 1),
              "attention: expected a (B, H, T, D) tensor with unit stride in the last dim, got sizes ",
              tensor.sizes(), " strides ", tensor.strides());
  }
  T* row(int64_t b, int64_t h, int64_t t) const { return data + b * batch_stride + h * head_stride + t * row_stride; }
};

// AttentionParams' dropout rule: weight (b, h, i, j) is kept when its Philox block's first
// word, as a uniform float, is >= p. `first_index` is the block of (b, h, i, 0).
struct DropoutRule {
  PhiloxState rng;
  float drop_probability;
  bool active;

  explicit DropoutRule(const AttentionParams& params)
      : rng(params.rng), drop_probability(static_cast<float>(params.dropout_p)), active(params.dropout_p > 0.0) {}
  bool keeps(uint64_t index) const { return uniform_from_bits(philox_block(rng, index)[0]) >= drop_probability; }
};

struct Extents {
  int64_t batch, heads, queries, keys, head_dim, value_dim;
};

Extents extents_of(const Tensor& q, const Tensor& k, const Tensor& v) {
  return {q.sizes()[0], q.sizes()[1], q.sizes()[2], k.sizes()[2], q.sizes()[3], v.sizes()[3]};
}

// rows x width values starting at `first` (one row every `row_stride`), into `buffer`
// (contiguous) in the compute type, each multiplied by `factor`.
template <class C, class T>
void load_rows(const T* first, int64_t row_stride, int64_t rows, int64_t width, C factor, C* buffer) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* source = first + r * row_stride;
    for (int64_t d = 0; d < width; ++d) buffer[r * width + d] = static_cast<C>(source[d]) * factor;
  }
}

// NOTE: `omp simd` lets the compiler split the sum into vector lanes (reassociating it,
// which plain -O3 must not do); the dot products are most of the kernels' arithmetic.
template <class C>
C dot(const C* a, const C* b, int64_t width) {
  C total = 0;
#pragma omp simd reduction(+ : total)
  for (int64_t d = 0; d < width; ++d) total += a[d] * b[d];
  return total;
}

// target += factor * source over `width` values.
template <class C>
void add_scaled(C* target, const C* source, C factor, int64_t width) {
#pragma omp simd
  for (int64_t d = 0; d < width; ++d) target[d] += factor * source[d];
}

template <class T, class C>
void forward_typed(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& params,
                   const Tensor& output, const Tensor& log_sum_exp) {
  const Extents n = extents_of(q, k, v);
  const HeadRows<const T> queries(q), keys(k), values(v);
  const HeadRows<T> outputs(output);
  C* lse = log_sum_exp.data_ptr<C>();  // (B, H, Tq) contiguous
  const DropoutRule dropout(params);
  const C keep_scale = static_cast<C>(1.0 / (1.0 - params.dropout_p));
  const int64_t query_tiles = (n.queries + kQueryTile - 1) / kQueryTile;
  const bool parallel = n.batch * n.heads * n.queries * n.keys * n.head_dim >= kParallelGrain;

#pragma omp parallel if (parallel)
  {
    std::vector<C> query_tile(kQueryTile * n.head_dim);  // q rows, already times scale
    std::vector<C> key_tile(kKeyTile * n.head_dim), value_tile(kKeyTile * n.value_dim);
    std::vector<C> accumulators(kQueryTile * n.value_dim), row_max(kQueryTile), row_sum(kQueryTile);
    std::vector<C> scores(kKeyTile);
#pragma omp for collapse(3) schedule(dynamic)  // causal tiles differ in work
    for (int64_t b = 0; b < n.batch; ++b) {
      for (int64_t h = 0; h < n.heads; ++h) {
        for (int64_t tile = 0; tile < query_tiles; ++tile) {
          const int64_t first_query = tile * kQueryTile;
          const int64_t rows = std::min(kQueryTile, n.queries - first_query);
          load_rows(queries.row(b, h, first_query), queries.row_stride, rows, n.head_dim,
                    static_cast<C>(params.scale), query_tile.data());
          std::fill(accumulators.begin(), accumulators.end(), C(0));
          std::fill(row_max.begin(), row_max.end(), -std::numeric_limits<C>::infinity());
          std::fill(row_sum.begin(), row_sum.end(), C(0));
          // Causal: the tile's last query attends to no key beyond itself.
          const int64_t key_end = params.is_causal ? std::min(n.keys, first_query + rows) : n.keys;
          for (int64_t first_key = 0; first_key < key_end; first_key += kKeyTile) {
            const int64_t tile_keys = std::min(kKeyTile, key_end - first_key);
            load_rows(keys.row(b, h, first_key), keys.row_stride, tile_keys, n.head_dim, C(1), key_tile.data());
            load_rows(values.row(b, h, first_key), values.row_stride, tile_keys, n.value_dim, C(1),
                      value_tile.data());
            for (int64_t r = 0; r < rows; ++r) {
              const int64_t i = first_query + r;
              const int64_t attended = params.is_causal ? std::min(tile_keys, i + 1 - first_key) : tile_keys;
              if (attended <= 0) continue;
              C tile_max = -std::numeric_limits<C>::infinity();
              for (int64_t c = 0; c < attended; ++c) {
                scores[c] = dot(&query_tile[r * n.head_dim], &key_tile[c * n.head_dim], n.head_dim);
                tile_max = std::max(tile_max, scores[c]);
              }
              const C new_max = std::max(row_max[r], tile_max);
              const C correction = std::exp(row_max[r] - new_max);  // 0 on the first tile
              C* accumulator = &accumulators[r * n.value_dim];
              for (int64_t d = 0; d < n.value_dim; ++d) accumulator[d] *= correction;
              C sum = row_sum[r] * correction;
              const uint64_t first_block = static_cast<uint64_t>(((b * n.heads + h) * n.queries + i) * n.keys + first_key);
              for (int64_t c = 0; c < attended; ++c) {
                const C weight = std::exp(scores[c] - new_max);
                sum += weight;  // the normaliser counts dropped weights too
                if (dropout.active && !dropout.keeps(first_block + c)) continue;
                add_scaled(accumulator, &value_tile[c * n.value_dim], dropout.active ? weight * keep_scale : weight,
                           n.value_dim);
              }
              row_max[r] = new_max;
              row_sum[r] = sum;
            }
          }
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t i = first_query + r;
            T* out = outputs.row(b, h, i);
            // A row with no key (Tk == 0) gives zeros and a log_sum_exp of -inf.
            const C inverse_sum = row_sum[r] > C(0) ? C(1) / row_sum[r] : C(0);
            for (int64_t d = 0; d < n.value_dim; ++d) out[d] = static_cast<T>(accumulators[r * n.value_dim + d] * inverse_sum);
            lse[(b * n.heads + h) * n.queries + i] = row_max[r] + std::log(row_sum[r]);
          }
        }
      }
    }
  }
}

// NOTE: the backward runs one task per (batch, head): each task owns its rows of dQ, dK and
// dV, so nothing is shared between threads and the sums come out the same on any number of
// threads. B * H is at least the core count for the batches a CPU trains.
template <class T, class C>
void backward_typed(const Tensor& grad_output, const Tensor& q, const Tensor& k, const Tensor& v,
                    const Tensor& output, const Tensor& log_sum_exp, const AttentionParams& params,
                    const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v) {
  const Extents n = extents_of(q, k, v);
  const HeadRows<const T> queries(q), keys(k), values(v), outputs(output), grad_outputs(grad_output);
  const HeadRows<T> grad_queries(grad_q), grad_keys(grad_k), grad_values(grad_v);
  const C* lse = log_sum_exp.data_ptr<C>();
  const DropoutRule dropout(params);
  const C keep_scale = static_cast<C>(1.0 / (1.0 - params.dropout_p));
  const C scale = static_cast<C>(params.scale);
  const bool parallel = n.batch * n.heads * n.queries * n.keys * n.head_dim >= kParallelGrain;

#pragma omp parallel if (parallel)
  {
    std::vector<C> key_tile(kKeyTile * n.head_dim), value_tile(kKeyTile * n.value_dim);
    std::vector<C> grad_key_tile(kKeyTile * n.head_dim), grad_value_tile(kKeyTile * n.value_dim);
    std::vector<C> grad_query_rows(n.queries * n.head_dim), corrections(n.queries);
    std::vector<C> query_row(n.head_dim), grad_output_row(n.value_dim), output_row(n.value_dim);
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < n.batch; ++b) {
      for (int64_t h = 0; h < n.heads; ++h) {
        const C* row_lse = lse + (b * n.heads + h) * n.queries;
        for (int64_t i = 0; i < n.queries; ++i) {  // D_i = dO_i . O_i
          load_rows(grad_outputs.row(b, h, i), 0, 1, n.value_dim, C(1), grad_output_row.data());
          load_rows(outputs.row(b, h, i), 0, 1, n.value_dim, C(1), output_row.data());
          corrections[i] = dot(grad_output_row.data(), output_row.data(), n.value_dim);
        }
        std::fill(grad_query_rows.begin(), grad_query_rows.end(), C(0));
        for (int64_t first_key = 0; first_key < n.keys; first_key += kKeyTile) {
          const int64_t tile_keys = std::min(kKeyTile, n.keys - first_key);
          load_rows(keys.row(b, h, first_key), keys.row_stride, tile_keys, n.head_dim, C(1), key_tile.data());
          load_rows(values.row(b, h, first_key), values.row_stride, tile_keys, n.value_dim, C(1), value_tile.data());
          std::fill(grad_key_tile.begin(), grad_key_tile.end(), C(0));
          std::fill(grad_value_tile.begin(), grad_value_tile.end(), C(0));
          // Causal: queries before the tile's first key see none of it.
          for (int64_t i = params.is_causal ? first_key : 0; i < n.queries; ++i) {
            const int64_t attended = params.is_causal ? std::min(tile_keys, i + 1 - first_key) : tile_keys;
            load_rows(queries.row(b, h, i), 0, 1, n.head_dim, C(1), query_row.data());
            load_rows(grad_outputs.row(b, h, i), 0, 1, n.value_dim, C(1), grad_output_row.data());
            C* grad_query = &grad_query_rows[i * n.head_dim];
            const uint64_t first_block = static_cast<uint64_t>(((b * n.heads + h) * n.queries + i) * n.keys + first_key);
            for (int64_t c = 0; c < attended; ++c) {
              const C* key = &key_tile[c * n.head_dim];
              const C probability = std::exp(scale * dot(query_row.data(), key, n.head_dim) - row_lse[i]);
              // z / keep: what the forward multiplied this weight by.
              const C applied = !dropout.active ? C(1) : dropout.keeps(first_block + c) ? keep_scale : C(0);
              add_scaled(&grad_value_tile[c * n.value_dim], grad_output_row.data(), probability * applied, n.value_dim);
              const C grad_weight = dot(grad_output_row.data(), &value_tile[c * n.value_dim], n.value_dim);
              const C grad_score = scale * probability * (applied * grad_weight - corrections[i]);
              add_scaled(grad_query, key, grad_score, n.head_dim);
              add_scaled(&grad_key_tile[c * n.head_dim], query_row.data(), grad_score, n.head_dim);
            }
          }
          for (int64_t c = 0; c < tile_keys; ++c) {
            T* grad_key = grad_keys.row(b, h, first_key + c);
            T* grad_value = grad_values.row(b, h, first_key + c);
            for (int64_t d = 0; d < n.head_dim; ++d) grad_key[d] = static_cast<T>(grad_key_tile[c * n.head_dim + d]);
            for (int64_t d = 0; d < n.value_dim; ++d) grad_value[d] = static_cast<T>(grad_value_tile[c * n.value_dim + d]);
          }
        }
        for (int64_t i = 0; i < n.queries; ++i) {
          T* grad_query = grad_queries.row(b, h, i);
          for (int64_t d = 0; d < n.head_dim; ++d) grad_query[d] = static_cast<T>(grad_query_rows[i * n.head_dim + d]);
        }
      }
    }
  }
}

void check_log_sum_exp(const Tensor& q, const Tensor& log_sum_exp) {
  const DType expected = q.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  MG_ASSERT(log_sum_exp.dtype() == expected && log_sum_exp.is_contiguous(), "attention: log_sum_exp must be a "
            "contiguous ", expected, " tensor for ", q.dtype(), " inputs, got ", log_sum_exp.dtype());
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& params,
                       const Tensor& output, const Tensor& log_sum_exp) {
  check_log_sum_exp(q, log_sum_exp);
  dispatch_floating(q.dtype(), "attention", [&]<class T>() {
    forward_typed<T, attention_compute_t<T>>(q, k, v, params, output, log_sum_exp);
  });
}

void attention_backward(const Tensor& grad_output, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& output, const Tensor& log_sum_exp, const AttentionParams& params,
                        const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v) {
  check_log_sum_exp(q, log_sum_exp);
  dispatch_floating(q.dtype(), "attention backward", [&]<class T>() {
    backward_typed<T, attention_compute_t<T>>(grad_output, q, k, v, output, log_sum_exp, params, grad_q, grad_k,
                                              grad_v);
  });
}

}  // namespace mg::cpu
