// core/dtype.h — element types, their sizes and names, type promotion, and the dispatcher
// that turns a runtime DType into a compile-time C++ type for kernels.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <type_traits>

#include "memgrad/core/error.h"
#include "memgrad/core/half.h"

namespace mg {

enum class DType : uint8_t { Float32, Float64, Float16, BFloat16, Int64, Int32, UInt8, Bool };

inline constexpr int kNumDTypes = 8;

size_t element_size(DType dtype);
const char* dtype_name(DType dtype);  // "float32", as PyTorch spells it
bool is_floating(DType dtype);
bool is_16_bit_float(DType dtype);  // float16 or bfloat16: stored in 2 bytes, computed in float32
// The dtype of a binary op's result, following PyTorch: floating beats integral beats bool,
// and within a kind the wider type wins (float16 with bfloat16 gives float32).
DType promote_types(DType a, DType b);

inline std::ostream& operator<<(std::ostream& out, DType dtype) { return out << dtype_name(dtype); }

template <class T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::Float32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::Float64; };
template <> struct DTypeOf<Half> { static constexpr DType value = DType::Float16; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::Bool; };
template <class T> inline constexpr DType dtype_of = DTypeOf<T>::value;

// The type arithmetic on T is carried out in: 16-bit floats compute in float.
template <class T> struct ComputeTypeOf { using type = T; };
template <> struct ComputeTypeOf<Half> { using type = float; };
template <> struct ComputeTypeOf<BFloat16> { using type = float; };
template <class T> using compute_t = typename ComputeTypeOf<T>::type;

// Converts one value between element types the way a tensor copy does: through the
// compute types, and to bool as "non-zero".
template <class Out, class In>
Out convert_value(In value) {
  if constexpr (std::is_same_v<Out, bool>) {
    return static_cast<compute_t<In>>(value) != compute_t<In>(0);
  } else {
    return static_cast<Out>(static_cast<compute_t<Out>>(static_cast<compute_t<In>>(value)));
  }
}

// Calls `fn.template operator()<T>()` with T the C++ type of `dtype`.
template <class Fn>
decltype(auto) dispatch_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: return fn.template operator()<float>();
    case DType::Float64: return fn.template operator()<double>();
    case DType::Float16: return fn.template operator()<Half>();
    case DType::BFloat16: return fn.template operator()<BFloat16>();
    case DType::Int64: return fn.template operator()<int64_t>();
    case DType::Int32: return fn.template operator()<int32_t>();
    case DType::UInt8: return fn.template operator()<uint8_t>();
    case DType::Bool: return fn.template operator()<bool>();
  }
  MG_ASSERT(false, "unknown dtype ", static_cast<int>(dtype));
}

// Like dispatch_dtype, for kernels that only make sense on floating types; `op` names the
// operation in the error raised for any other dtype.
template <class Fn>
decltype(auto) dispatch_floating(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: return fn.template operator()<float>();
    case DType::Float64: return fn.template operator()<double>();
    case DType::Float16: return fn.template operator()<Half>();
    case DType::BFloat16: return fn.template operator()<BFloat16>();
    default: break;
  }
  MG_CHECK(false, op, ": expected a floating-point tensor, got ", dtype_name(dtype),
           ". Hint: convert with .to(mg::DType::Float32).");
}

}  // namespace mg
