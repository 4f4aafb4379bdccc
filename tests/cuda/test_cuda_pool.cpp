// tests/cuda/test_cuda_pool.cpp — the CUDA pooling kernels against the CPU kernels on
// random inputs: max (overlapping windows, padding, dilation, ceil_mode; window positions
// must be identical) and average (count_include_pad on and off, ceil_mode), forward and
// backward, float32 and float64, plus float16 max pooling (exact: it only selects), and
// channels-last inputs against the CPU's NCHW results. Max pooling on channels-last
// tensors takes several channels a thread (8 for 16-bit types, 4 for float32, 2 for
// float64, fewer when C or the data's alignment asks): those cases must match the CPU
// exactly, 16-bit and offset (less aligned) views included. Max pooling's backward threads
// take two pixels of a row (odd widths leave one) and offset in 32 bits below 2^31
// elements, in 64 bits from there (one test of 4.3 GB). Inputs with many equal values,
// NaNs and infinities pin down which position wins a tie and how NaN propagates.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "memgrad/autograd/pool.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/kernels.h"

using namespace mg;

namespace {

struct PoolCase {
  Shape input_sizes;
  Pool2dOptions options;
};

Pool2dOptions make_options(std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride,
                           std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation, bool ceil_mode,
                           bool count_include_pad) {
  Pool2dOptions options;
  options.kernel_size = kernel;
  options.stride = stride;
  options.padding = padding;
  options.dilation = dilation;
  options.ceil_mode = ceil_mode;
  options.count_include_pad = count_include_pad;
  return options;
}

std::vector<PoolCase> cases() {
  return {
      {{2, 3, 8, 8}, make_options({2, 2}, {2, 2}, {0, 0}, {1, 1}, false, true)},
      {{2, 3, 9, 11}, make_options({3, 3}, {1, 1}, {1, 1}, {1, 1}, false, true)},   // overlapping
      {{1, 4, 13, 10}, make_options({3, 2}, {2, 3}, {1, 1}, {2, 2}, true, false)},  // dilation + ceil
      {{3, 2, 7, 7}, make_options({2, 2}, {2, 2}, {1, 1}, {1, 1}, true, false)},
      {{2, 2, 7, 9}, make_options({3, 3}, {2, 2}, {1, 1}, {1, 1}, true, true)},
      {{1, 1, 64, 80}, make_options({5, 4}, {3, 2}, {2, 1}, {1, 3}, false, true)},
  };
}

// The kernels' geometry for `options` (as autograd/pool.cpp builds it).
Window2d window_of(const Pool2dOptions& options, bool is_max) {
  Window2d window;
  window.kernel_h = options.kernel_size[0];
  window.kernel_w = options.kernel_size[1];
  window.stride_h = options.stride[0];
  window.stride_w = options.stride[1];
  window.pad_h = options.padding[0];
  window.pad_w = options.padding[1];
  window.dilation_h = is_max ? options.dilation[0] : 1;
  window.dilation_w = is_max ? options.dilation[1] : 1;
  window.ceil_mode = options.ceil_mode;
  window.count_include_pad = options.count_include_pad;
  return window;
}

Tensor random_input(const Shape& sizes, DType dtype, uint64_t seed) {
  Generator generator(seed);
  return randn(sizes, {.dtype = dtype}, &generator);
}

Tensor on_cuda(const Tensor& tensor) { return converted_copy(tensor, tensor.dtype(), Device::cuda()); }
Tensor on_cpu(const Tensor& tensor) { return converted_copy(tensor, tensor.dtype(), Device::cpu()); }

Tensor empty_on(const Shape& sizes, DType dtype, Device device) { return empty(sizes, {.dtype = dtype, .device = device}); }

void check_close(const Tensor& cuda_result, const Tensor& cpu_result, double relative) {
  std::vector<double> actual = on_cpu(cuda_result).to_vector<double>();
  std::vector<double> expected = cpu_result.to_vector<double>();
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("element " << i);
    CHECK(actual[i] == Approx(expected[i]).epsilon(relative).margin(relative));
  }
}

// Bit for bit where it matters: NaN where the CPU has NaN, else the same value with the
// same sign (which of two equal zeros won a tie shows).
void check_identical(const Tensor& cuda_result, const Tensor& cpu_result) {
  std::vector<double> actual = on_cpu(cuda_result).to_vector<double>();
  std::vector<double> expected = cpu_result.to_vector<double>();
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("element " << i << ": " << actual[i] << " against the CPU's " << expected[i]);
    if (std::isnan(expected[i])) {
      CHECK(std::isnan(actual[i]));
    } else {
      CHECK((actual[i] == expected[i] && std::signbit(actual[i]) == std::signbit(expected[i])));
    }
  }
}

// d(sum(y * grad_output)) / dx through autograd, as the op hands it back (a hook sees it
// before the leaf's accumulation copies it); x's gradient is cleared first.
Tensor autograd_grad(const Tensor& y, const Tensor& x, const Tensor& grad_output) {
  x.set_grad(Tensor());
  auto incoming = std::make_shared<Tensor>();  // outlives this call: the hook stays registered
  x.register_hook([incoming](const Tensor& grad) {
    *incoming = grad;
    return Tensor();
  });
  y.backward(grad_output, /*retain_graph=*/true);
  return *incoming;
}

// Runs the max pooling kernels on `cuda_input` (channels-last, filled) into
// `cuda_grad_input` (channels-last, same sizes) and compares with the CPU kernels on the
// same values in NCHW. Everything must be identical: maxima are selected, not computed,
// and both backwards sum in the compute type in (oh, ow) order and round once.
void check_channels_last_max_pool(const Tensor& cuda_input, const Tensor& cuda_grad_input,
                                  const Pool2dOptions& options, uint64_t seed) {
  REQUIRE(is_contiguous_in(cuda_input, MemoryFormat::ChannelsLast));
  REQUIRE(is_contiguous_in(cuda_grad_input, MemoryFormat::ChannelsLast));
  DType dtype = cuda_input.dtype();
  Shape out_sizes = max_pool2d(zeros(cuda_input.sizes()), options).sizes();
  Window2d window = window_of(options, true);
  Tensor input = contiguous_copy(on_cpu(cuda_input));  // NCHW
  Tensor grad_output = converted_copy(random_input(out_sizes, DType::Float32, seed), dtype, Device::cpu());

  Tensor cpu_out = empty_on(out_sizes, dtype, Device::cpu());
  Tensor cpu_indices = empty_on(out_sizes, DType::UInt8, Device::cpu());
  kernels(Device::cpu()).max_pool2d(input, window, cpu_out, cpu_indices);
  Tensor cuda_out = empty(out_sizes, {.dtype = dtype, .device = Device::cuda()}, MemoryFormat::ChannelsLast);
  Tensor cuda_indices =
      empty(out_sizes, {.dtype = DType::UInt8, .device = Device::cuda()}, MemoryFormat::ChannelsLast);
  kernels(Device::cuda()).max_pool2d(cuda_input, window, cuda_out, cuda_indices);
  check_close(cuda_out, cpu_out, 0.0);
  CHECK(on_cpu(cuda_indices).to_vector<int64_t>() == cpu_indices.to_vector<int64_t>());

  Tensor cpu_grad = empty_on(input.sizes(), dtype, Device::cpu());
  kernels(Device::cpu()).max_pool2d_backward(grad_output, cpu_indices, window, cpu_grad);
  kernels(Device::cuda()).max_pool2d_backward(contiguous_copy(on_cuda(grad_output), MemoryFormat::ChannelsLast),
                                              cuda_indices, window, cuda_grad_input);
  check_close(cuda_grad_input, cpu_grad, 0.0);
}

// A dense channels-last (N, C, H, W) GPU tensor whose data starts `offset` elements into
// its storage, so that it is aligned to `offset` elements only (for offset 1 or 2).
Tensor channels_last_at_offset(const Shape& sizes, DType dtype, int64_t offset) {
  Tensor storage = empty_on({sizes.numel() + offset}, dtype, Device::cuda());
  Tensor nhwc = storage.narrow(0, offset, sizes.numel()).view({sizes[0], sizes[2], sizes[3], sizes[1]});
  return nhwc.permute({0, 3, 1, 2});
}

}  // namespace

TEST_CASE("CUDA max_pool2d matches the CPU, window positions included", "[cuda]") {
  uint64_t seed = 1;
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const PoolCase& test : cases()) {
      INFO("input " << test.input_sizes << ", dtype " << dtype);
      Shape out_sizes = max_pool2d(zeros(test.input_sizes), test.options).sizes();
      Window2d window = window_of(test.options, true);
      Tensor input = random_input(test.input_sizes, dtype, seed++);
      Tensor grad_output = random_input(out_sizes, dtype, seed++);

      Tensor cpu_out = empty_on(out_sizes, dtype, Device::cpu());
      Tensor cpu_indices = empty_on(out_sizes, DType::UInt8, Device::cpu());
      kernels(Device::cpu()).max_pool2d(input, window, cpu_out, cpu_indices);
      Tensor cuda_out = empty_on(out_sizes, dtype, Device::cuda());
      Tensor cuda_indices = empty_on(out_sizes, DType::UInt8, Device::cuda());
      kernels(Device::cuda()).max_pool2d(on_cuda(input), window, cuda_out, cuda_indices);
      check_close(cuda_out, cpu_out, 0.0);
      CHECK(on_cpu(cuda_indices).to_vector<int64_t>() == cpu_indices.to_vector<int64_t>());

      Tensor cpu_grad = empty_on(test.input_sizes, dtype, Device::cpu());
      kernels(Device::cpu()).max_pool2d_backward(grad_output, cpu_indices, window, cpu_grad);
      Tensor cuda_grad = empty_on(test.input_sizes, dtype, Device::cuda());
      kernels(Device::cuda()).max_pool2d_backward(on_cuda(grad_output), cuda_indices, window, cuda_grad);
      check_close(cuda_grad, cpu_grad, 0.0);  // the same sums in the same order
    }
  }
}

TEST_CASE("CUDA avg_pool2d matches the CPU", "[cuda]") {
  uint64_t seed = 100;
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const PoolCase& test : cases()) {
      INFO("input " << test.input_sizes << ", dtype " << dtype);
      Shape out_sizes = avg_pool2d(zeros(test.input_sizes), test.options).sizes();
      Window2d window = window_of(test.options, false);
      Tensor input = random_input(test.input_sizes, dtype, seed++);
      Tensor grad_output = random_input(out_sizes, dtype, seed++);

      Tensor cpu_out = empty_on(out_sizes, dtype, Device::cpu());
      kernels(Device::cpu()).avg_pool2d(input, window, cpu_out);
      Tensor cuda_out = empty_on(out_sizes, dtype, Device::cuda());
      kernels(Device::cuda()).avg_pool2d(on_cuda(input), window, cuda_out);
      check_close(cuda_out, cpu_out, 1e-6);

      Tensor cpu_grad = empty_on(test.input_sizes, dtype, Device::cpu());
      kernels(Device::cpu()).avg_pool2d_backward(grad_output, window, cpu_grad);
      Tensor cuda_grad = empty_on(test.input_sizes, dtype, Device::cuda());
      kernels(Device::cuda()).avg_pool2d_backward(on_cuda(grad_output), window, cuda_grad);
      check_close(cuda_grad, cpu_grad, 1e-6);
    }
  }
}

TEST_CASE("CUDA pooling ops: float16 max pooling and autograd on the GPU", "[cuda]") {
  Pool2dOptions options = make_options({3, 3}, {2, 2}, {1, 1}, {1, 1}, true, true);
  Tensor input = converted_copy(random_input({2, 3, 9, 9}, DType::Float32, 7), DType::Float16, Device::cpu());
  check_close(max_pool2d(on_cuda(input), options), max_pool2d(input, options), 0.0);

  // Through autograd: the gradient of the sum agrees with the CPU's.
  Tensor cpu_x = random_input({2, 3, 9, 9}, DType::Float32, 8);
  Tensor cuda_x = on_cuda(cpu_x);
  cpu_x.requires_grad_(true);
  cuda_x.requires_grad_(true);
  Tensor cpu_y = avg_pool2d(max_pool2d(cpu_x, options), make_options({2, 2}, {1, 1}, {0, 0}, {1, 1}, false, true));
  Tensor cuda_y = avg_pool2d(max_pool2d(cuda_x, options), make_options({2, 2}, {1, 1}, {0, 0}, {1, 1}, false, true));
  check_close(cuda_y, cpu_y, 1e-6);
  cpu_y.backward(ones_like(cpu_y));
  cuda_y.backward(ones_like(cuda_y));
  check_close(cuda_x.grad(), cpu_x.grad(), 1e-6);
}

// Through autograd with channels-last inputs on the GPU against NCHW on the CPU: the
// outputs, window positions and gradients keep the input's layout and the CPU's values.
TEST_CASE("CUDA pooling of channels_last inputs matches the CPU in NCHW", "[cuda]") {
  uint64_t seed = 300;
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const PoolCase& test : cases()) {
      INFO("input " << test.input_sizes << ", dtype " << dtype);
      Tensor cpu_x = random_input(test.input_sizes, dtype, seed++).requires_grad_();
      Tensor cuda_x = contiguous_copy(on_cuda(cpu_x.detach()), MemoryFormat::ChannelsLast).requires_grad_();
      for (bool is_max : {true, false}) {
        Tensor cpu_y = is_max ? max_pool2d(cpu_x, test.options) : avg_pool2d(cpu_x, test.options);
        Tensor cuda_y = is_max ? max_pool2d(cuda_x, test.options) : avg_pool2d(cuda_x, test.options);
        CHECK(is_contiguous_in(cuda_y, MemoryFormat::ChannelsLast));
        check_close(cuda_y, cpu_y, 1e-6);
        // An NCHW incoming gradient: the backward brings it to the positions' layout.
        Tensor grad_output = random_input(cpu_y.sizes(), dtype, seed++);
        Tensor cpu_grad = autograd_grad(cpu_y, cpu_x, grad_output);
        Tensor cuda_grad = autograd_grad(cuda_y, cuda_x, on_cuda(grad_output));
        CHECK(is_contiguous_in(cuda_grad, MemoryFormat::ChannelsLast));
        check_close(cuda_grad, cpu_grad, 1e-6);
      }
    }
  }
}

TEST_CASE("CUDA max_pool2d kernels on channels_last tensors write channels_last window positions", "[cuda]") {
  PoolCase test{{4, 40, 15, 13}, make_options({3, 3}, {2, 2}, {1, 1}, {1, 1}, true, true)};
  Shape out_sizes = max_pool2d(zeros(test.input_sizes), test.options).sizes();
  Window2d window = window_of(test.options, true);
  Tensor input = random_input(test.input_sizes, DType::Float32, 400);
  Tensor cpu_out = empty_on(out_sizes, DType::Float32, Device::cpu());
  Tensor cpu_indices = empty_on(out_sizes, DType::UInt8, Device::cpu());
  kernels(Device::cpu()).max_pool2d(input, window, cpu_out, cpu_indices);
  TensorOptions on_gpu{.device = Device::cuda()};
  Tensor cuda_out = empty(out_sizes, on_gpu, MemoryFormat::ChannelsLast);
  Tensor cuda_indices = empty(out_sizes, {.dtype = DType::UInt8, .device = Device::cuda()}, MemoryFormat::ChannelsLast);
  kernels(Device::cuda()).max_pool2d(contiguous_copy(on_cuda(input), MemoryFormat::ChannelsLast), window, cuda_out,
                                     cuda_indices);
  check_close(cuda_out, cpu_out, 0.0);
  CHECK(on_cpu(cuda_indices).to_vector<int64_t>() == cpu_indices.to_vector<int64_t>());
}

TEST_CASE("CUDA max_pool2d kernels on channels_last 16-bit tensors match the CPU exactly", "[cuda]") {
  std::vector<PoolCase> vector_cases = {
      {{2, 64, 15, 13}, make_options({3, 3}, {2, 2}, {1, 1}, {1, 1}, false, true)},  // 8 channels a thread
      {{2, 64, 15, 13}, make_options({3, 3}, {2, 2}, {1, 1}, {1, 1}, true, true)},
      {{3, 24, 9, 9}, make_options({3, 3}, {2, 2}, {1, 1}, {1, 1}, true, true)},      // 3 groups a pixel
      {{2, 12, 9, 9}, make_options({3, 3}, {2, 2}, {1, 1}, {1, 1}, false, true)},     // 4 a thread
      {{2, 6, 7, 9}, make_options({2, 2}, {1, 1}, {0, 0}, {1, 1}, false, true)},      // 2 a thread
      {{2, 16, 13, 10}, make_options({3, 2}, {2, 3}, {1, 1}, {2, 2}, true, false)},   // dilated
      {{2, 5, 8, 8}, make_options({2, 2}, {2, 2}, {0, 0}, {1, 1}, false, true)},      // odd C: 1 a thread
  };
  uint64_t seed = 500;
  for (DType dtype : {DType::Float16, DType::BFloat16}) {
    for (const PoolCase& test : vector_cases) {
      INFO("input " << test.input_sizes << ", dtype " << dtype);
      Tensor values = converted_copy(random_input(test.input_sizes, DType::Float32, seed++), dtype, Device::cpu());
      Tensor cuda_input = contiguous_copy(on_cuda(values), MemoryFormat::ChannelsLast);
      Tensor cuda_grad_input = empty(test.input_sizes, {.dtype = dtype, .device = Device::cuda()},
                                     MemoryFormat::ChannelsLast);
      check_channels_last_max_pool(cuda_input, cuda_grad_input, test.options, seed++);
    }
  }
}

// C = 64: float32 takes 4 channels a thread and float64 2 when the data is 16-byte
// aligned; a view 1 element into its storage takes 1, and 2 elements in, float32 takes 2.
TEST_CASE("CUDA max_pool2d kernels on channels_last views of any alignment match the CPU exactly", "[cuda]") {
  Shape sizes{2, 64, 11, 10};
  Pool2dOptions options = make_options({3, 3}, {2, 2}, {1, 1}, {1, 1}, true, true);
  uint64_t seed = 600;
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (int64_t offset : {0, 1, 2}) {
      INFO("dtype " << dtype << ", offset " << offset);
      Tensor cuda_input = channels_last_at_offset(sizes, dtype, offset);
      cuda_input.copy_(random_input(sizes, dtype, seed++));
      check_channels_last_max_pool(cuda_input, channels_last_at_offset(sizes, dtype, offset), options, seed++);
    }
  }
}

// Average pooling's backward takes up to 16 bytes of adjacent channels a thread on
// channels-last tensors; each lane sums as the CPU does (the same divisions, in the same
// order, rounded once), so the results are identical.
TEST_CASE("CUDA avg_pool2d backward on channels_last tensors matches the CPU exactly", "[cuda]") {
  std::vector<PoolCase> vector_cases = {
      {{3, 64, 7, 7}, make_options({7, 7}, {7, 7}, {0, 0}, {1, 1}, false, true)},    // ResNet's global pool
      {{2, 64, 15, 13}, make_options({3, 3}, {2, 2}, {1, 1}, {1, 1}, false, true)},  // overlapping, padded
      {{2, 12, 9, 9}, make_options({3, 3}, {2, 2}, {1, 1}, {1, 1}, true, false)},    // 4 channels a thread
      {{2, 6, 7, 9}, make_options({2, 2}, {1, 1}, {0, 0}, {1, 1}, false, true)},     // 2 a thread
      {{2, 5, 8, 8}, make_options({2, 2}, {2, 2}, {0, 0}, {1, 1}, false, true)},     // odd C: 1 a thread
  };
  uint64_t seed = 700;
  for (DType dtype : {DType::Float16, DType::BFloat16, DType::Float32}) {
    for (const PoolCase& test : vector_cases) {
      INFO("input " << test.input_sizes << ", dtype " << dtype);
      Shape out_sizes = avg_pool2d(zeros(test.input_sizes), test.options).sizes();
      Window2d window = window_of(test.options, false);
      Tensor grad_output = converted_copy(random_input(out_sizes, DType::Float32, seed++), dtype, Device::cpu());
      Tensor cpu_grad = empty_on(test.input_sizes, dtype, Device::cpu());
      kernels(Device::cpu()).avg_pool2d_backward(grad_output, window, cpu_grad);
      Tensor cuda_grad = empty(test.input_sizes, {.dtype = dtype, .device = Device::cuda()}, MemoryFormat::ChannelsLast);
      kernels(Device::cuda()).avg_pool2d_backward(contiguous_copy(on_cuda(grad_output), MemoryFormat::ChannelsLast),
                                                  window, cuda_grad);
      check_close(cuda_grad, cpu_grad, 0.0);
      // The (N, C, 1, 1) gradient of a global pool as a flatten hands it back: dense NCHW.
      if (out_sizes[2] == 1 && out_sizes[3] == 1) {
        cuda_grad.fill_(0.0);
        kernels(Device::cuda()).avg_pool2d_backward(on_cuda(grad_output), window, cuda_grad);
        check_close(cuda_grad, cpu_grad, 0.0);
      }
    }
  }
}

// Max pooling's backward offsets in 32 bits when the input-sized and the output-sized
// tensors both have fewer than 2^31 elements (every test above) and in 64 bits otherwise
// (the forward always in 64): here ResNet's stem window on a float16 channels-last input
// of more than 2^31 elements (4.3 GB), forward and backward. Checked on the first and the last images (the last lies past
// 2^31 elements) against the CPU kernels run on those images alone.
TEST_CASE("CUDA max_pool2d indexes tensors of more than 2^31 elements", "[cuda]") {
  const int64_t images = 8455, channels = 64, side = 63, out_side = 32;  // (63 + 2 - 3) / 2 + 1
  Shape sizes{images, channels, side, side};
  Shape out_sizes{images, channels, out_side, out_side};
  REQUIRE(sizes.numel() > (int64_t{1} << 31));
  Pool2dOptions options = make_options({3, 3}, {2, 2}, {1, 1}, {1, 1}, false, true);
  Window2d window = window_of(options, true);
  // Random channels-last tensors: filled as dense NHWC, then viewed as (N, C, H, W).
  Generator generator(800);
  auto random_channels_last = [&](const Shape& nchw, DType dtype) {
    Tensor nhwc = empty({nchw[0], nchw[2], nchw[3], nchw[1]}, {.dtype = dtype, .device = Device::cuda()});
    normal_(nhwc, 0.0, 1.0, &generator);
    return nhwc.permute({0, 3, 1, 2});
  };
  Tensor input = random_channels_last(sizes, DType::Float16);
  Tensor grad_output = random_channels_last(out_sizes, DType::Float16);
  Tensor indices = empty(out_sizes, {.dtype = DType::UInt8, .device = Device::cuda()}, MemoryFormat::ChannelsLast);
  Tensor output = empty(out_sizes, {.dtype = DType::Float16, .device = Device::cuda()}, MemoryFormat::ChannelsLast);
  kernels(Device::cuda()).max_pool2d(input, window, output, indices);
  Tensor grad_input = empty(sizes, {.dtype = DType::Float16, .device = Device::cuda()}, MemoryFormat::ChannelsLast);
  kernels(Device::cuda()).max_pool2d_backward(grad_output, indices, window, grad_input);

  for (int64_t image : {int64_t{0}, images - 1}) {
    INFO("image " << image);
    auto on_cpu_nchw = [&](const Tensor& tensor) { return contiguous_copy(on_cpu(tensor.narrow(0, image, 1))); };
    Tensor image_indices = on_cpu_nchw(indices);
    Tensor cpu_indices = empty_on({1, channels, out_side, out_side}, DType::UInt8, Device::cpu());
    Tensor cpu_output = empty_on({1, channels, out_side, out_side}, DType::Float16, Device::cpu());
    kernels(Device::cpu()).max_pool2d(on_cpu_nchw(input), window, cpu_output, cpu_indices);
    check_close(output.narrow(0, image, 1), cpu_output, 0.0);
    CHECK(image_indices.to_vector<int64_t>() == cpu_indices.to_vector<int64_t>());
    Tensor cpu_grad = empty_on({1, channels, side, side}, DType::Float16, Device::cpu());
    kernels(Device::cpu()).max_pool2d_backward(on_cpu_nchw(grad_output), image_indices, window, cpu_grad);
    check_close(grad_input.narrow(0, image, 1), cpu_grad, 0.0);
  }
}

// Max pooling's takeover rule, as the CPU's: a strictly larger value or a NaN takes over,
// so among equal values the first in (r, s) order wins and the last NaN of a window does.
// Values rounded to halves (-0.0 among them) make ties common; 3% NaN, 2% -inf, 1% +inf.
// NCHW takes one channel a thread, channels-last up to 16 bytes of them; odd output
// widths (the stem's 7 columns) and even ones both appear.
TEST_CASE("CUDA max_pool2d breaks ties and propagates NaN as the CPU", "[cuda]") {
  std::vector<PoolCase> tie_cases = {
      {{2, 64, 15, 13}, make_options({3, 3}, {2, 2}, {1, 1}, {1, 1}, false, true)},  // ResNet's stem, 7 columns
      {{2, 64, 16, 16}, make_options({3, 3}, {2, 2}, {1, 1}, {1, 1}, false, true)},  // 8 columns
      {{2, 8, 9, 11}, make_options({3, 3}, {1, 1}, {1, 1}, {1, 1}, false, true)},    // stride 1: 11 columns
      {{2, 8, 7, 9}, make_options({3, 3}, {2, 2}, {1, 1}, {1, 1}, true, true)},      // ceil_mode: 5 columns
      {{1, 16, 13, 10}, make_options({3, 2}, {2, 3}, {1, 1}, {2, 2}, true, false)},  // dilated
      {{2, 6, 8, 8}, make_options({2, 2}, {3, 3}, {0, 0}, {1, 1}, false, true)},     // gaps between windows
  };
  uint64_t seed = 900;
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    for (const PoolCase& test : tie_cases) {
      for (MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
        INFO("input " << test.input_sizes << ", dtype " << dtype << ", " << format);
        std::vector<float> values = random_input(test.input_sizes, DType::Float32, seed++).to_vector<float>();
        Generator generator(seed++);
        std::vector<float> draws = rand(test.input_sizes, {}, &generator).to_vector<float>();
        for (size_t i = 0; i < values.size(); ++i) {
          values[i] = draws[i] < 0.03f   ? NAN
                      : draws[i] < 0.05f ? -INFINITY
                      : draws[i] < 0.06f ? INFINITY
                                         : std::round(values[i] * 2) / 2;
        }
        Tensor input = converted_copy(from_vector(values, test.input_sizes), dtype, Device::cpu());
        Shape out_sizes = max_pool2d(zeros(test.input_sizes), test.options).sizes();
        Window2d window = window_of(test.options, true);

        Tensor cpu_out = empty_on(out_sizes, dtype, Device::cpu());
        Tensor cpu_indices = empty_on(out_sizes, DType::UInt8, Device::cpu());
        kernels(Device::cpu()).max_pool2d(input, window, cpu_out, cpu_indices);
        Tensor cuda_out = empty(out_sizes, {.dtype = dtype, .device = Device::cuda()}, format);
        Tensor cuda_indices = empty(out_sizes, {.dtype = DType::UInt8, .device = Device::cuda()}, format);
        kernels(Device::cuda()).max_pool2d(contiguous_copy(on_cuda(input), format), window, cuda_out, cuda_indices);
        check_identical(cuda_out, cpu_out);
        CHECK(on_cpu(cuda_indices).to_vector<int64_t>() == cpu_indices.to_vector<int64_t>());
      }
    }
  }
}
