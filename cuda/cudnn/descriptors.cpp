// cuda/cudnn/descriptors.cpp — cuDNN descriptors from memgrad's sizes and layouts.
//
// NOTE: destructors cannot throw, so they ignore the status of cudnnDestroy*Descriptor
// (host-side frees that fail only for a null descriptor, which the constructors rule out).
#include "cuda/cudnn/descriptors.h"

#include <climits>

#include "cuda/cudnn/check.h"

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

FilterDescriptor::FilterDescriptor(DType dtype, const Shape& sizes, MemoryFormat format) {
  MG_ASSERT(sizes.size() == 4, "cuDNN filter descriptor for shape ", sizes);
  cudnnTensorFormat_t layout = format == MemoryFormat::ChannelsLast ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  MG_CUDNN_CHECK(cudnnCreateFilterDescriptor(&descriptor_));
  try {
    MG_CUDNN_CHECK(cudnnSetFilter4dDescriptor(descriptor_, data_type(dtype), layout, as_int(sizes[0], "size"),
                                              as_int(sizes[1], "size"), as_int(sizes[2], "size"),
                                              as_int(sizes[3], "size")));
  } catch (...) {
    (void)cudnnDestroyFilterDescriptor(descriptor_);
    throw;
  }
}

FilterDescriptor::~FilterDescriptor() { (void)cudnnDestroyFilterDescriptor(descriptor_); }

ConvolutionDescriptor::ConvolutionDescriptor(DType dtype, const Window2d& window, cudnnMathType_t math) {
  MG_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&descriptor_));
  try {
    MG_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        descriptor_, as_int(window.pad_h, "padding"), as_int(window.pad_w, "padding"),
        as_int(window.stride_h, "stride"), as_int(window.stride_w, "stride"), as_int(window.dilation_h, "dilation"),
        as_int(window.dilation_w, "dilation"), CUDNN_CROSS_CORRELATION, compute_type(dtype)));
    MG_CUDNN_CHECK(cudnnSetConvolutionGroupCount(descriptor_, as_int(window.groups, "groups")));
    set_math_type(math);
  } catch (...) {
    (void)cudnnDestroyConvolutionDescriptor(descriptor_);
    throw;
  }
}

ConvolutionDescriptor::~ConvolutionDescriptor() { (void)cudnnDestroyConvolutionDescriptor(descriptor_); }

void ConvolutionDescriptor::set_math_type(cudnnMathType_t math) {
  MG_CUDNN_CHECK(cudnnSetConvolutionMathType(descriptor_, math));
}

}  // namespace mg::cuda::cudnn
