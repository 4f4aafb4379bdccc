// cuda/cudnn/descriptors.h — cuDNN's names for memgrad's dtypes, and the legacy tensor
// descriptor that cudnnAddTensor (a convolution's bias) takes, as an RAII object.
//
// A tensor descriptor takes the strides of its layout (cudnnSetTensor4dDescriptorEx), so
// one descriptor type covers NCHW and channels_last (NHWC). The strides come from the
// layout, not from the tensor: a dim of size 1 may carry any stride in memgrad, and cuDNN
// recognises its fast packed NCHW/NHWC kernels only from the canonical strides (the
// backend graph's tensors in cuda/cudnn/conv_graph.cpp follow the same rule).
#pragma once

#include <cudnn.h>

#include "memgrad/core/kernels.h"
#include "memgrad/core/memory_format.h"

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

}  // namespace mg::cuda::cudnn
