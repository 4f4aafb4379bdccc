// core/shape.cpp — shape arithmetic shared by views, broadcasting and kernels.
#include "memgrad/core/shape.h"

namespace mg {

std::string Shape::str() const {
  std::string text = "[";
  for (int i = 0; i < size_; ++i) {
    if (i) text += ", ";
    text += std::to_string(values_[i]);
  }
  return text + "]";
}

Shape contiguous_strides(const Shape& sizes) {
  Shape strides = Shape::filled(sizes.size(), 1);
  int64_t running = 1;
  for (int i = sizes.size() - 1; i >= 0; --i) {
    strides[i] = running;
    running *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  int ndim = std::max(a.size(), b.size());
  Shape result = Shape::filled(ndim, 1);
  for (int i = 0; i < ndim; ++i) {
    int ia = a.size() - ndim + i;
    int ib = b.size() - ndim + i;
    int64_t size_a = ia >= 0 ? a[ia] : 1;
    int64_t size_b = ib >= 0 ? b[ib] : 1;
    MG_CHECK(size_a == size_b || size_a == 1 || size_b == 1, "shapes ", a, " and ", b,
             " cannot be broadcast together: dimension ", i, " has sizes ", size_a, " and ",
             size_b, ". Hint: sizes must match or one of them must be 1.");
    result[i] = size_a == 1 ? size_b : size_a;
  }
  return result;
}

LinesAlong lines_along(const Shape& sizes, int dim) {
  LinesAlong lines;
  lines.extent = sizes[dim];
  for (int d = 0; d < dim; ++d) lines.outer *= sizes[d];
  for (int d = dim + 1; d < sizes.size(); ++d) lines.inner *= sizes[d];
  return lines;
}

int wrap_dim(int64_t dim, int ndim) {
  int64_t extent = std::max(ndim, 1);
  MG_CHECK(dim >= -extent && dim < extent, "dimension ", dim, " is out of range for a tensor with ",
           ndim, " dimension(s) (expected in [", -extent, ", ", extent - 1, "])");
  return static_cast<int>(dim < 0 ? dim + extent : dim);
}

}  // namespace mg
