// cuda/cudnn/descriptors.h — the cuDNN descriptors a convolution needs, as RAII objects
// built from memgrad's sizes, dtypes and memory formats.
//
// A tensor descriptor takes the strides of its layout (cudnnSetTensor4dDescriptorEx), so
// one descriptor type covers NCHW and channels_last (NHWC). The strides come from the
// layout, not from the tensor: a dim of size 1 may carry any stride in memgrad, and cuDNN
// recognises its fast packed NCHW/NHWC kernels only from the canonical strides.
// Descriptors are immutable after construction except the convolution's math type, which
// the algorithm search sets to the chosen algorithm's.
#pragma once

#include <cudnn.h>

#include "core/kernels.h"
#include "core/memory_format.h"

namespace mg::cuda::cudnn {

// cuDNN's name for a floating dtype (float32, float64, float16, bfloat16).
cudnnDataType_t data_type(DType dtype);

// The type a convolution accumulates in: float for the 16-bit types (as PyTorch does), the
// data type itself otherwise.
cudnnDataType_t compute_type(DType dtype);

// (N, C, H, W) sizes, dense in `format`.
class TensorDescriptor {
 public:
  TensorDescriptor(DType dtype, const Shape& sizes, MemoryFormat format);
  ~TensorDescriptor();
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  cudnnTensorDescriptor_t get() const { return descriptor_; }

 private:
  cudnnTensorDescriptor_t descriptor_ = nullptr;
};

// (K, C/groups, R, S) weight sizes; `format` ChannelsLast is cuDNN's NHWC filter (KRSC).
class FilterDescriptor {
 public:
  FilterDescriptor(DType dtype, const Shape& sizes, MemoryFormat format);
  ~FilterDescriptor();
  FilterDescriptor(const FilterDescriptor&) = delete;
  FilterDescriptor& operator=(const FilterDescriptor&) = delete;
  cudnnFilterDescriptor_t get() const { return descriptor_; }

 private:
  cudnnFilterDescriptor_t descriptor_ = nullptr;
};

// Stride, padding, dilation and groups of a cross-correlation (what deep learning calls
// convolution), computing in compute_type(dtype) with `math` (see settings.h).
class ConvolutionDescriptor {
 public:
  ConvolutionDescriptor(DType dtype, const Window2d& window, cudnnMathType_t math);
  ~ConvolutionDescriptor();
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;
  cudnnConvolutionDescriptor_t get() const { return descriptor_; }
  void set_math_type(cudnnMathType_t math);

 private:
  cudnnConvolutionDescriptor_t descriptor_ = nullptr;
};

}  // namespace mg::cuda::cudnn
