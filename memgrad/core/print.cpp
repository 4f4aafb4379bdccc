// core/print.cpp — Tensor::str() and operator<<: PyTorch's repr, rule for rule.
//
// Follows torch/_tensor_str.py with its default print options (4 decimals, summarise above
// 1000 elements keeping 3 items at each edge, lines of 80 columns), so that a tensor prints
// as the same tensor prints in PyTorch; only dtypes are spelled without "torch.". The
// steps: copy to the host the elements that will be shown, choose one format that fits all
// of them (Formatter), lay them out in nested brackets, then append the suffixes (device,
// size, dtype, grad_fn or requires_grad) in PyTorch's order.
#include "memgrad/core/print.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "memgrad/core/factory.h"
#include "memgrad/core/tensor.h"

namespace mg {

namespace {

constexpr int kPrecision = 4;
constexpr int64_t kThreshold = 1000;  // tensors with more elements are summarised
constexpr int64_t kEdgeItems = 3;     // items kept at each end of a summarised dim
constexpr int kLineWidth = 80;

std::atomic<GradFnNamer> grad_fn_namer{nullptr};

// The elements a repr shows, on the host, row-major over `sizes`: the whole tensor, or
// when summarising, the first and last kEdgeItems entries of every longer dim.
struct ShownValues {
  Shape sizes;
  std::vector<bool> elided;       // per dim: entries between the edges became "..."
  bool floating = false;
  bool boolean = false;
  std::vector<double> floats;     // floating dtypes (16-bit floats widen exactly)
  std::vector<int64_t> integers;  // integral and bool dtypes
};

// Copies `block` (a view) to the host as T and scatters it into `values` (row-major over
// the shown sizes, with `shown_strides`), starting at shown coordinates `first`.
template <class T>
void scatter_block(const Tensor& block, DType host_dtype, const Shape& first,
                   const Shape& shown_strides, std::vector<T>& values) {
  Tensor host = converted_copy(block, host_dtype, Device::cpu());
  const T* data = static_cast<const T*>(host.raw_data());
  const Shape& sizes = block.sizes();
  Shape index = Shape::filled(sizes.size(), 0);
  for (int64_t i = 0; i < host.numel(); ++i) {
    int64_t target = 0;
    for (int d = 0; d < sizes.size(); ++d) target += (first[d] + index[d]) * shown_strides[d];
    values[static_cast<size_t>(target)] = data[i];
    for (int d = sizes.size() - 1; d >= 0 && ++index[d] == sizes[d]; --d) index[d] = 0;
  }
}

ShownValues gather_shown_values(const Tensor& tensor, bool summarize) {
  ShownValues shown;
  shown.floating = is_floating(tensor.dtype());
  shown.boolean = tensor.dtype() == DType::Bool;
  std::vector<int> elided_dims;
  for (int d = 0; d < tensor.dim(); ++d) {
    const bool elided = summarize && tensor.size(d) > 2 * kEdgeItems;
    shown.elided.push_back(elided);
    shown.sizes.push_back(elided ? 2 * kEdgeItems : tensor.size(d));
    if (elided) elided_dims.push_back(d);
  }
  const auto count = static_cast<size_t>(shown.sizes.numel());
  if (shown.floating) {
    shown.floats.resize(count);
  } else {
    shown.integers.resize(count);
  }
  const Shape shown_strides = contiguous_strides(shown.sizes);

  // NOTE: every elided dim keeps two runs of entries (its head and its tail), so the shown
  // elements are 2^k strided blocks of the tensor, for k elided dims. Copying those blocks,
  // rather than the whole tensor, keeps printing a large device tensor cheap.
  for (uint32_t corner = 0; corner < (1u << elided_dims.size()); ++corner) {
    Shape block_sizes = shown.sizes;
    Shape first = Shape::filled(tensor.dim(), 0);  // the block's place among shown entries
    int64_t offset = tensor.storage_offset();
    for (size_t i = 0; i < elided_dims.size(); ++i) {
      const int d = elided_dims[i];
      block_sizes[d] = kEdgeItems;
      if ((corner >> i) & 1u) {
        first[d] = kEdgeItems;
        offset += (tensor.size(d) - kEdgeItems) * tensor.stride(d);
      }
    }
    Tensor block = make_view(tensor, block_sizes, tensor.strides(), offset);
    if (shown.floating) {
      scatter_block(block, DType::Float64, first, shown_strides, shown.floats);
    } else {
      scatter_block(block, DType::Int64, first, shown_strides, shown.integers);
    }
  }
  return shown;
}

// printf-formats a double in style 'f' or 'e'. NaN is always "nan", as Python writes it
// (glibc would write "-nan" for a NaN with its sign bit set).
std::string format_double(double value, char style, int precision) {
  if (std::isnan(value)) return "nan";
  char text[400];  // %.4f of the largest double has 309 digits before the point
  std::snprintf(text, sizeof text, style == 'e' ? "%.*e" : "%.*f", precision, value);
  return text;
}

// One format for every shown element, chosen as PyTorch's _Formatter chooses it: integers
// plain; floats whose non-zero finite values are all integers as "3."; otherwise 4
// decimals; scientific notation when the magnitudes span more than 1000x, exceed 1e8, or
// (for non-integers) fall below 1e-4. All elements are right-aligned to one width.
class Formatter {
 public:
  explicit Formatter(const ShownValues& shown) : shown_(shown) {
    if (!shown.floating) {
      for (size_t i = 0; i < shown.integers.size(); ++i) {
        width_ = std::max(width_, static_cast<int>(unpadded(i).size()));
      }
      return;
    }
    double min_abs = INFINITY;
    double max_abs = 0.0;
    for (double value : shown.floats) {
      if (!std::isfinite(value) || value == 0.0) continue;
      min_abs = std::min(min_abs, std::fabs(value));
      max_abs = std::max(max_abs, std::fabs(value));
      if (value != std::ceil(value)) int_mode_ = false;
    }
    if (max_abs == 0.0) return;  // only zeros, infinities and NaNs: "0." and friends
    const bool wide_range = max_abs / min_abs > 1000.0 || max_abs > 1.0e8;
    sci_mode_ = wide_range || (!int_mode_ && min_abs < 1.0e-4);
    for (size_t i = 0; i < shown.floats.size(); ++i) {
      const double value = shown.floats[i];
      if (!std::isfinite(value) || value == 0.0) continue;
      width_ = std::max(width_, static_cast<int>(unpadded(i).size()));
    }
  }

  int width() const { return width_; }

  // Shown element `index`, right-aligned to width().
  std::string format(size_t index) const {
    std::string text = unpadded(index);
    if (static_cast<int>(text.size()) < width_) text.insert(0, width_ - text.size(), ' ');
    return text;
  }

 private:
  std::string unpadded(size_t index) const {
    if (!shown_.floating) {
      const int64_t value = shown_.integers[index];
      if (shown_.boolean) return value != 0 ? "True" : "False";
      return std::to_string(value);
    }
    const double value = shown_.floats[index];
    if (sci_mode_) return format_double(value, 'e', kPrecision);
    if (!int_mode_) return format_double(value, 'f', kPrecision);
    // The point marks the tensor as floating; infinities and NaNs go without it.
    std::string text = format_double(value, 'f', 0);
    if (std::isfinite(value)) text += '.';
    return text;
  }

  const ShownValues& shown_;
  bool int_mode_ = true;
  bool sci_mode_ = false;
  int width_ = 1;
};

// The bracketed text of the shown elements from dim `dim` on, the sub-tensor starting at
// shown element `base`; `indent` is the column of its opening bracket.
std::string format_values(const ShownValues& shown, const Formatter& formatter,
                          const Shape& shown_strides, int dim, int64_t base, int indent) {
  const int dims = shown.sizes.size();
  if (dim == dims) return formatter.format(static_cast<size_t>(base));  // a 0-d tensor

  const int64_t count = shown.sizes[dim];
  const bool elided = shown.elided[dim];
  std::vector<std::string> items;
  if (dim == dims - 1) {
    for (int64_t i = 0; i < count; ++i) {
      if (elided && i == kEdgeItems) items.push_back(" ...");
      items.push_back(formatter.format(static_cast<size_t>(base + i * shown_strides[dim])));
    }
    // Items wrap so that a line, with ", " after each item, fits the line width.
    const int per_line = std::max(1, (kLineWidth - indent) / (formatter.width() + 2));
    std::string text = "[";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) text += i % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ";
      text += items[i];
    }
    return text + "]";
  }

  for (int64_t i = 0; i < count; ++i) {
    if (elided && i == kEdgeItems) items.push_back("...");
    items.push_back(format_values(shown, formatter, shown_strides, dim + 1,
                                  base + i * shown_strides[dim], indent + 1));
  }
  // Sub-tensors of a 3-d tensor are separated by a blank line, of a 4-d one by two, ...
  const std::string separator =
      "," + std::string(dims - dim - 1, '\n') + std::string(indent + 1, ' ');
  std::string text = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) text += separator;
    text += items[i];
  }
  return text + "]";
}

std::string format_data(const Tensor& tensor, int indent) {
  const ShownValues shown = gather_shown_values(tensor, tensor.numel() > kThreshold);
  const Formatter formatter(shown);
  return format_values(shown, formatter, contiguous_strides(shown.sizes), 0, 0, indent);
}

// Python's str(tuple(sizes)): "(2, 3)", "(3,)", "()".
std::string size_tuple(const Shape& sizes) {
  std::string text = "(";
  for (int d = 0; d < sizes.size(); ++d) {
    if (d > 0) text += ", ";
    text += std::to_string(sizes[d]);
  }
  if (sizes.size() == 1) text += ",";
  return text + ")";
}

// Appends ", suffix" for each suffix, moving one to a new line (indented to `indent`)
// when it would end past the line width.
std::string add_suffixes(std::string text, const std::vector<std::string>& suffixes,
                         int indent) {
  // NOTE: PyTorch counts the last line 2 columns longer than it is (len - rfind("\n") + 1);
  // kept, since it decides where lines break.
  const size_t newline = text.rfind('\n');
  const int64_t last_newline = newline == std::string::npos ? -1 : static_cast<int64_t>(newline);
  int64_t line_length = static_cast<int64_t>(text.size()) - last_newline + 1;
  for (const std::string& suffix : suffixes) {
    const auto suffix_length = static_cast<int64_t>(suffix.size());
    if (line_length + suffix_length + 2 > kLineWidth) {
      text += ",\n" + std::string(indent, ' ') + suffix;
      line_length = indent + suffix_length;
    } else {
      text += ", " + suffix;
      line_length += suffix_length + 2;
    }
  }
  return text + ")";
}

}  // namespace

void register_grad_fn_namer(GradFnNamer namer) {
  grad_fn_namer.store(namer, std::memory_order_relaxed);
}

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  const int indent = static_cast<int>(prefix.size());
  const std::string dtype_suffix = std::string("dtype=") + dtype_name(dtype());
  std::vector<std::string> suffixes;
  if (!device().is_cpu()) suffixes.push_back("device='" + device().str() + "'");

  std::string body;
  if (!storage()->has_data()) {
    // The simulated device holds sizes, not values (PyTorch prints meta tensors this way).
    body = "...";
    suffixes.push_back("size=" + size_tuple(sizes()));
    if (dtype() != DType::Float32) suffixes.push_back(dtype_suffix);
  } else if (numel() == 0) {
    body = "[]";
    if (dim() != 1) suffixes.push_back("size=" + size_tuple(sizes()));
    // With no values to tell int64 from float32, only float32 goes unnamed.
    if (dtype() != DType::Float32) suffixes.push_back(dtype_suffix);
  } else {
    body = format_data(*this, indent);
    const bool default_dtype =
        dtype() == DType::Float32 || dtype() == DType::Int64 || dtype() == DType::Bool;
    if (!default_dtype) suffixes.push_back(dtype_suffix);
  }

  if (const std::shared_ptr<autograd::Node>& node = grad_fn()) {
    const GradFnNamer namer = grad_fn_namer.load(std::memory_order_relaxed);
    MG_ASSERT(namer != nullptr, "a tensor has a grad_fn but no Node registered the namer");
    suffixes.push_back(std::string("grad_fn=<") + namer(*node) + ">");
  } else if (requires_grad()) {
    suffixes.push_back("requires_grad=True");
  }
  return add_suffixes(prefix + body, suffixes, indent);
}

std::ostream& operator<<(std::ostream& out, const Tensor& tensor) { return out << tensor.str(); }

}  // namespace mg
