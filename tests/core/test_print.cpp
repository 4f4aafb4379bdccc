// tests/core/test_print.cpp — Tensor::str() against what PyTorch prints for the same tensor.
//
// Each expected string is PyTorch's repr (torch/_tensor_str.py, default print options) with
// "torch." dropped from dtype names. Tensors are built from explicit values in core only
// (no autograd ops), so the test needs nothing beyond core.
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "memgrad/core/factory.h"
#include "memgrad/core/tensor.h"

namespace {

using mg::Device;
using mg::DType;
using mg::Tensor;

std::vector<float> float_range(float start, int count) {
  std::vector<float> values;
  for (int i = 0; i < count; ++i) values.push_back(start + static_cast<float>(i));
  return values;
}

std::vector<int64_t> int_range(int64_t count) {
  std::vector<int64_t> values;
  for (int64_t i = 0; i < count; ++i) values.push_back(i);
  return values;
}

}  // namespace

TEST_CASE("integer-valued floats print as '1.' with a common width", "[print]") {
  CHECK(mg::zeros({2, 3}).str() ==
        "tensor([[0., 0., 0.],\n"
        "        [0., 0., 0.]])");
  CHECK(mg::from_vector(float_range(0, 8), {2, 2, 2}).str() ==
        "tensor([[[0., 1.],\n"
        "         [2., 3.]],\n"
        "\n"
        "        [[4., 5.],\n"
        "         [6., 7.]]])");
  CHECK(mg::from_vector<float>({-1, 20}).str() == "tensor([-1., 20.])");
  // Infinities and NaN take no point, and do not count towards the width.
  CHECK(mg::from_vector<float>({INFINITY, NAN, 1, -INFINITY}).str() ==
        "tensor([inf, nan, 1., -inf])");
}

TEST_CASE("other floats print with 4 decimals, right-aligned", "[print]") {
  CHECK(mg::from_vector<float>({1.5f, -2.25f}).str() == "tensor([ 1.5000, -2.2500])");
  CHECK(mg::scalar_tensor(3.5).str() == "tensor(3.5000)");
  CHECK(mg::from_vector<float>({0.12345f}).str() == "tensor([0.1235])");
}

TEST_CASE("scientific notation when the magnitudes call for it", "[print]") {
  // Smallest non-zero magnitude below 1e-4 (non-integers only).
  CHECK(mg::from_vector<float>({1e-5f, 1.0f}).str() == "tensor([1.0000e-05, 1.0000e+00])");
  CHECK(mg::from_vector<float>({-1e-5f, 1.0f}).str() == "tensor([-1.0000e-05,  1.0000e+00])");
  // Magnitudes more than 1000x apart, even when all are integers.
  CHECK(mg::from_vector<float>({1e10f, 1.0f}).str() == "tensor([1.0000e+10, 1.0000e+00])");
  // Zeros do not count: only non-zero finite values decide.
  CHECK(mg::from_vector<float>({0.0f, 1.0f, 500.0f}).str() == "tensor([  0.,   1., 500.])");
}

TEST_CASE("integers and bools print plain", "[print]") {
  CHECK(mg::from_vector(int_range(6)).str() == "tensor([0, 1, 2, 3, 4, 5])");
  CHECK(mg::from_vector<int64_t>({-1, 20}).str() == "tensor([-1, 20])");
  CHECK(mg::from_vector<bool>({true, false, true}).str() == "tensor([ True, False,  True])");
}

TEST_CASE("empty tensors show their size when not 1-d, and any non-float32 dtype", "[print]") {
  CHECK(mg::empty({0}).str() == "tensor([])");
  CHECK(mg::empty({0, 3}).str() == "tensor([], size=(0, 3))");
  CHECK(mg::empty({0}, {.dtype = DType::Int64}).str() == "tensor([], dtype=int64)");
}

TEST_CASE("suffixes: dtype when not the default of its kind, requires_grad", "[print]") {
  CHECK(mg::from_vector<double>({1.5, 2.0}).str() == "tensor([1.5000, 2.0000], dtype=float64)");
  CHECK(mg::from_vector<int32_t>({1, 2}).str() == "tensor([1, 2], dtype=int32)");
  CHECK(mg::scalar_tensor(1.5, {.dtype = DType::Float16}).str() ==
        "tensor(1.5000, dtype=float16)");
  CHECK(mg::ones({2}, {.requires_grad = true}).str() == "tensor([1., 1.], requires_grad=True)");
}

TEST_CASE("long rows wrap at 80 columns, and suffixes move to a new line", "[print]") {
  std::vector<float> halves;
  for (int i = 0; i < 20; ++i) halves.push_back(0.5f + static_cast<float>(i));
  CHECK(mg::from_vector(halves).str() ==
        "tensor([ 0.5000,  1.5000,  2.5000,  3.5000,  4.5000,  5.5000,  6.5000,  7.5000,\n"
        "         8.5000,  9.5000, 10.5000, 11.5000, 12.5000, 13.5000, 14.5000, 15.5000,\n"
        "        16.5000, 17.5000, 18.5000, 19.5000])");

  std::vector<double> wide;
  for (int i = 0; i < 8; ++i) wide.push_back(10.5 + i);
  Tensor tensor = mg::from_vector(wide);
  tensor.requires_grad_();
  CHECK(tensor.str() ==
        "tensor([10.5000, 11.5000, 12.5000, 13.5000, 14.5000, 15.5000, 16.5000, 17.5000],\n"
        "       dtype=float64, requires_grad=True)");
}

TEST_CASE("more than 1000 elements are summarised, 3 items at each edge", "[print]") {
  // torch.arange(2000.): the format is chosen from the shown items only (0..2 and
  // 1997..1999 span more than 1000x), and 6 items of width 10 fill a line.
  CHECK(mg::from_vector(float_range(0, 2000)).str() ==
        "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
        "        1.9990e+03])");
  // torch.arange(1100).reshape(100, 11)
  CHECK(mg::from_vector(int_range(1100), {100, 11}).str() ==
        "tensor([[   0,    1,    2,  ...,    8,    9,   10],\n"
        "        [  11,   12,   13,  ...,   19,   20,   21],\n"
        "        [  22,   23,   24,  ...,   30,   31,   32],\n"
        "        ...,\n"
        "        [1067, 1068, 1069,  ..., 1075, 1076, 1077],\n"
        "        [1078, 1079, 1080,  ..., 1086, 1087, 1088],\n"
        "        [1089, 1090, 1091,  ..., 1097, 1098, 1099]])");
  // 1001 elements: summarised, yet a dim of at most 6 entries is shown whole.
  CHECK(mg::from_vector(int_range(1002), {167, 6}).str() ==
        "tensor([[   0,    1,    2,    3,    4,    5],\n"
        "        [   6,    7,    8,    9,   10,   11],\n"
        "        [  12,   13,   14,   15,   16,   17],\n"
        "        ...,\n"
        "        [ 984,  985,  986,  987,  988,  989],\n"
        "        [ 990,  991,  992,  993,  994,  995],\n"
        "        [ 996,  997,  998,  999, 1000, 1001]])");
}

TEST_CASE("views print their own elements", "[print]") {
  Tensor base = mg::from_vector(int_range(6), {2, 3});
  Tensor transposed = mg::make_view(base, {3, 2}, {1, 3}, 0);
  CHECK(transposed.str() ==
        "tensor([[0, 3],\n"
        "        [1, 4],\n"
        "        [2, 5]])");
  Tensor second_row = mg::make_view(base, {3}, {1}, 3);
  CHECK(second_row.str() == "tensor([3, 4, 5])");
}

TEST_CASE("simulated tensors print their size instead of data", "[print]") {
  CHECK(mg::empty({2, 3}, {.device = Device::simulated(13)}).str() ==
        "tensor(..., device='simulated:13', size=(2, 3))");
  CHECK(mg::empty({4}, {.dtype = DType::Int64, .device = Device::simulated(13)}).str() ==
        "tensor(..., device='simulated:13', size=(4,), dtype=int64)");
}

TEST_CASE("operator<< writes str() and an undefined tensor says so", "[print]") {
  std::ostringstream out;
  out << mg::from_vector<int64_t>({7});
  CHECK(out.str() == "tensor([7])");
  CHECK(Tensor().str() == "tensor(undefined)");
}
