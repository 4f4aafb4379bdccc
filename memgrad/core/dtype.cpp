// core/dtype.cpp — sizes, names and promotion rules of the element types.
#include "memgrad/core/dtype.h"

namespace mg {

size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::Float64: case DType::Int64: return 8;
    case DType::Float32: case DType::Int32: return 4;
    case DType::Float16: case DType::BFloat16: return 2;
    case DType::UInt8: case DType::Bool: return 1;
  }
  MG_ASSERT(false, "unknown dtype");
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Int64: return "int64";
    case DType::Int32: return "int32";
    case DType::UInt8: return "uint8";
    case DType::Bool: return "bool";
  }
  return "unknown";
}

bool is_floating(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::Float16 ||
         dtype == DType::BFloat16;
}

bool is_16_bit_float(DType dtype) { return dtype == DType::Float16 || dtype == DType::BFloat16; }

namespace {
// Rank within a kind: larger wins.
int rank(DType dtype) {
  switch (dtype) {
    case DType::Bool: return 0;
    case DType::UInt8: return 1;
    case DType::Int32: return 2;
    case DType::Int64: return 3;
    case DType::Float16: case DType::BFloat16: return 4;
    case DType::Float32: return 5;
    case DType::Float64: return 6;
  }
  return -1;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (is_16_bit_float(a) && is_16_bit_float(b)) return DType::Float32;  // float16 with bfloat16
  return rank(a) >= rank(b) ? a : b;
}

}  // namespace mg
