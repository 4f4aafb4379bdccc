// cuda/cudnn/descriptors.cpp — cuDNN's dtypes and tensor descriptors from memgrad's.
//
// NOTE: the destructor cannot throw, so it ignores the status of cudnnDestroyTensorDescriptor
// (a host-side free that fails only for a null descriptor, which the constructor rules out).
#include "memgrad/cuda/cudnn/descriptors.h"

#include <climits>

#include "memgrad/cuda/cudnn/check.h"

namespace mg::cuda::cudnn {

namespace {

// cuDNN's legacy descriptors hold 32-bit ints; memgrad's sizes are 64-bit.
int as_int(int64_t value, const char* what) {
  MG_CHECK(value >= 0 && value <= INT_MAX, "cuDNN convolution: ", what, " ", value,
           " does not fit cuDNN's 32-bit descriptors. Hint: split the batch, or set_cudnn_enabled(false).");
  return static_cast<int>(value);
}

}  // namespace

cudnnDataType_t data_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return CUDNN_DATA_FLOAT;
    case DType::Float64: return CUDNN_DATA_DOUBLE;
    case DType::Float16: return CUDNN_DATA_HALF;
    case DType::BFloat16: return CUDNN_DATA_BFLOAT16;
    default: break;
  }
  MG_CHECK(false, "cuDNN convolution: expected a floating dtype, got ", dtype);
}

cudnnDataType_t compute_type(DType dtype) {
  return dtype == DType::Float64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}

TensorDescriptor::TensorDescriptor(DType dtype, const Shape& sizes, MemoryFormat format) {
  MG_ASSERT(sizes.size() == 4, "cuDNN tensor descriptor for shape ", sizes);
  Shape strides = strides_for(sizes, format);
  MG_CUDNN_CHECK(cudnnCreateTensorDescriptor(&descriptor_));
  try {
    MG_CUDNN_CHECK(cudnnSetTensor4dDescriptorEx(
        descriptor_, data_type(dtype), as_int(sizes[0], "size"), as_int(sizes[1], "size"), as_int(sizes[2], "size"),
        as_int(sizes[3], "size"), as_int(strides[0], "stride"), as_int(strides[1], "stride"),
        as_int(strides[2], "stride"), as_int(strides[3], "stride")));
  } catch (...) {
    (void)cudnnDestroyTensorDescriptor(descriptor_);
    throw;
  }
}

TensorDescriptor::~TensorDescriptor() { (void)cudnnDestroyTensorDescriptor(descriptor_); }

}  // namespace mg::cuda::cudnn
