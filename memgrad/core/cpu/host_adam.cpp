// core/cpu/host_adam.cpp — the host Adam/AdamW update of core/cpu/host_adam.h: a scalar
// path (also every vector path's tail) and AVX2 and AVX-512F paths that do the same
// operations eight or sixteen lanes at a time.
//
// NOTE: bit-equality between the paths rests on three facts. Each vector operation is the
// scalar one rounded the same way (IEEE add, mul, div and sqrt are correctly rounded in
// both); max_ps(second, max) picks as `max < second ? second : max` does, NaN included;
// and nothing is contracted into a fused multiply-add, which GCC would otherwise do even
// to intrinsics (CMakeLists.txt builds this file with -ffp-contract=off). The 16-bit
// conversions round to nearest even like core/half.h; float16's NaN lanes are set to
// half.h's canonical quiet NaN, which the hardware conversion would not produce.
#include "memgrad/core/cpu/host_adam.h"

#include <cpuid.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "memgrad/core/error.h"
#include "memgrad/core/half.h"

namespace mg::cpu {

namespace {

using Coefficients = optimizer_formulas::AdamCoefficients<float>;

// Elements per OpenMP work item: 64 KiB of each float32 array, a multiple of every
// vector width, so each chunk but the last runs without a scalar tail.
constexpr int64_t kChunk = 16384;

float load_grad(const HostAdamArrays& a, int64_t i) {
  switch (a.grad_dtype) {
    case DType::Float16: return Half::to_float(static_cast<const uint16_t*>(a.grad)[i]);
    case DType::BFloat16: return static_cast<float>(static_cast<const BFloat16*>(a.grad)[i]);
    default: return static_cast<const float*>(a.grad)[i];
  }
}

void store_param(const HostAdamArrays& a, int64_t i, float value) {
  switch (a.param_out_dtype) {
    case DType::Float16: static_cast<uint16_t*>(a.param_out)[i] = Half::from_float(value); break;
    case DType::BFloat16: static_cast<uint16_t*>(a.param_out)[i] = BFloat16::from_float(value); break;
    default: static_cast<float*>(a.param_out)[i] = value; break;
  }
}

void scalar_range(const HostAdamArrays& a, const Coefficients& k, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    float first = a.exp_avg[i], second = a.exp_avg_sq[i];
    float max_second = a.max_exp_avg_sq != nullptr ? a.max_exp_avg_sq[i] : 0.0f;
    const float updated = optimizer_formulas::adam_element(a.master_param[i], load_grad(a, i), first, second,
                                                           a.max_exp_avg_sq != nullptr ? &max_second : nullptr, k);
    a.exp_avg[i] = first;
    a.exp_avg_sq[i] = second;
    if (a.max_exp_avg_sq != nullptr) a.max_exp_avg_sq[i] = max_second;
    a.master_param[i] = updated;
    if (a.param_out != nullptr) store_param(a, i, updated);
  }
}

// ---- AVX2 (with F16C for float16): 8 lanes ----

#define MG_AVX2 __attribute__((target("avx2,f16c")))

MG_AVX2 __m256 load8_grad(const HostAdamArrays& a, int64_t i) {
  switch (a.grad_dtype) {
    case DType::Float16:
      return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(a.grad) + i)));
    case DType::BFloat16: {
      const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(a.grad) + i));
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
    }
    default: return _mm256_loadu_ps(static_cast<const float*>(a.grad) + i);
  }
}

// float32 -> bfloat16 bits as BFloat16::from_float, in the low halves of 32-bit lanes.
MG_AVX2 __m256i bfloat16_bits8(__m256 value) {
  const __m256i raw = _mm256_castps_si256(value);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(raw, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(raw, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(raw, 16), _mm256_set1_epi32(0x40));
  const __m256i magnitude = _mm256_and_si256(raw, _mm256_set1_epi32(0x7fffffff));
  const __m256i is_nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
}

MG_AVX2 void store8_param(const HostAdamArrays& a, int64_t i, __m256 value) {
  switch (a.param_out_dtype) {
    case DType::Float16: {
      __m128i bits = _mm256_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m128i is_nan = _mm_cmpgt_epi16(_mm_and_si128(bits, _mm_set1_epi16(0x7fff)), _mm_set1_epi16(0x7c00));
      const __m128i canonical = _mm_or_si128(_mm_and_si128(bits, _mm_set1_epi16(static_cast<int16_t>(0x8000))),
                                             _mm_set1_epi16(0x7e00));
      bits = _mm_blendv_epi8(bits, canonical, is_nan);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint16_t*>(a.param_out) + i), bits);
      break;
    }
    case DType::BFloat16: {
      const __m256i bits = bfloat16_bits8(value);
      const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint16_t*>(a.param_out) + i), packed);
      break;
    }
    default: _mm256_storeu_ps(static_cast<float*>(a.param_out) + i, value); break;
  }
}

MG_AVX2 void avx2_range(const HostAdamArrays& a, const Coefficients& k, int64_t begin, int64_t end) {
  const __m256 step_size = _mm256_set1_ps(k.step_size), correction2_sqrt = _mm256_set1_ps(k.correction2_sqrt);
  const __m256 beta1_complement = _mm256_set1_ps(k.beta1_complement), beta2 = _mm256_set1_ps(k.beta2);
  const __m256 beta2_complement = _mm256_set1_ps(k.beta2_complement), eps = _mm256_set1_ps(k.eps);
  const __m256 param_scale = _mm256_set1_ps(k.param_scale), grad_decay = _mm256_set1_ps(k.grad_decay);
  const bool decays_grad = k.grad_decay != 0.0f;
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m256 param = _mm256_loadu_ps(a.master_param + i);
    __m256 gradient = load8_grad(a, i);
    if (decays_grad) gradient = _mm256_add_ps(gradient, _mm256_mul_ps(grad_decay, param));
    __m256 first = _mm256_loadu_ps(a.exp_avg + i);
    first = _mm256_add_ps(first, _mm256_mul_ps(beta1_complement, _mm256_sub_ps(gradient, first)));
    const __m256 second = _mm256_add_ps(_mm256_mul_ps(beta2, _mm256_loadu_ps(a.exp_avg_sq + i)),
                                        _mm256_mul_ps(_mm256_mul_ps(beta2_complement, gradient), gradient));
    __m256 denominator_second = second;
    if (a.max_exp_avg_sq != nullptr) {
      denominator_second = _mm256_max_ps(second, _mm256_loadu_ps(a.max_exp_avg_sq + i));
      _mm256_storeu_ps(a.max_exp_avg_sq + i, denominator_second);
    }
    const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(denominator_second), correction2_sqrt), eps);
    const __m256 updated =
        _mm256_sub_ps(_mm256_mul_ps(param, param_scale), _mm256_mul_ps(step_size, _mm256_div_ps(first, denom)));
    _mm256_storeu_ps(a.exp_avg + i, first);
    _mm256_storeu_ps(a.exp_avg_sq + i, second);
    _mm256_storeu_ps(a.master_param + i, updated);
    if (a.param_out != nullptr) store8_param(a, i, updated);
  }
  scalar_range(a, k, i, end);
}

// ---- AVX-512F: 16 lanes ----

#define MG_AVX512 __attribute__((target("avx512f")))

MG_AVX512 __m512 load16_grad(const HostAdamArrays& a, int64_t i) {
  switch (a.grad_dtype) {
    case DType::Float16:
      return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(a.grad) + i)));
    case DType::BFloat16: {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(a.grad) + i));
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
    }
    default: return _mm512_loadu_ps(static_cast<const float*>(a.grad) + i);
  }
}

MG_AVX512 void store16_param(const HostAdamArrays& a, int64_t i, __m512 value) {
  uint16_t* out16 = static_cast<uint16_t*>(a.param_out) + i;
  switch (a.param_out_dtype) {
    case DType::Float16: {
      __m256i bits = _mm512_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m256i is_nan =
          _mm256_cmpgt_epi16(_mm256_and_si256(bits, _mm256_set1_epi16(0x7fff)), _mm256_set1_epi16(0x7c00));
      const __m256i canonical = _mm256_or_si256(
          _mm256_and_si256(bits, _mm256_set1_epi16(static_cast<int16_t>(0x8000))), _mm256_set1_epi16(0x7e00));
      bits = _mm256_blendv_epi8(bits, canonical, is_nan);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out16), bits);
      break;
    }
    case DType::BFloat16: {
      const __m512i raw = _mm512_castps_si512(value);
      const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(raw, 16), _mm512_set1_epi32(1));
      const __m512i rounded =
          _mm512_srli_epi32(_mm512_add_epi32(raw, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
      const __m512i quiet_nan = _mm512_or_si512(_mm512_srli_epi32(raw, 16), _mm512_set1_epi32(0x40));
      const __mmask16 is_nan =
          _mm512_cmpgt_epi32_mask(_mm512_and_si512(raw, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out16),
                          _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(is_nan, rounded, quiet_nan)));
      break;
    }
    default: _mm512_storeu_ps(static_cast<float*>(a.param_out) + i, value); break;
  }
}

MG_AVX512 void avx512_range(const HostAdamArrays& a, const Coefficients& k, int64_t begin, int64_t end) {
  const __m512 step_size = _mm512_set1_ps(k.step_size), correction2_sqrt = _mm512_set1_ps(k.correction2_sqrt);
  const __m512 beta1_complement = _mm512_set1_ps(k.beta1_complement), beta2 = _mm512_set1_ps(k.beta2);
  const __m512 beta2_complement = _mm512_set1_ps(k.beta2_complement), eps = _mm512_set1_ps(k.eps);
  const __m512 param_scale = _mm512_set1_ps(k.param_scale), grad_decay = _mm512_set1_ps(k.grad_decay);
  const bool decays_grad = k.grad_decay != 0.0f;
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    const __m512 param = _mm512_loadu_ps(a.master_param + i);
    __m512 gradient = load16_grad(a, i);
    if (decays_grad) gradient = _mm512_add_ps(gradient, _mm512_mul_ps(grad_decay, param));
    __m512 first = _mm512_loadu_ps(a.exp_avg + i);
    first = _mm512_add_ps(first, _mm512_mul_ps(beta1_complement, _mm512_sub_ps(gradient, first)));
    const __m512 second = _mm512_add_ps(_mm512_mul_ps(beta2, _mm512_loadu_ps(a.exp_avg_sq + i)),
                                        _mm512_mul_ps(_mm512_mul_ps(beta2_complement, gradient), gradient));
    __m512 denominator_second = second;
    if (a.max_exp_avg_sq != nullptr) {
      denominator_second = _mm512_max_ps(second, _mm512_loadu_ps(a.max_exp_avg_sq + i));
      _mm512_storeu_ps(a.max_exp_avg_sq + i, denominator_second);
    }
    const __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(denominator_second), correction2_sqrt), eps);
    const __m512 updated =
        _mm512_sub_ps(_mm512_mul_ps(param, param_scale), _mm512_mul_ps(step_size, _mm512_div_ps(first, denom)));
    _mm512_storeu_ps(a.exp_avg + i, first);
    _mm512_storeu_ps(a.exp_avg_sq + i, second);
    _mm512_storeu_ps(a.master_param + i, updated);
    if (a.param_out != nullptr) store16_param(a, i, updated);
  }
  scalar_range(a, k, i, end);
}

// F16C from CPUID leaf 1 (ECX bit 29): clang 14, the sanitizer build's compiler, has no
// "f16c" in __builtin_cpu_supports.
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

bool runs(HostAdamPath path) {
  switch (path) {
    case HostAdamPath::Avx512: return __builtin_cpu_supports("avx512f");
    case HostAdamPath::Avx2: return __builtin_cpu_supports("avx2") && has_f16c();
    default: return true;
  }
}

}  // namespace

bool host_adam_path_available(HostAdamPath path) { return runs(path); }

HostAdamPath best_host_adam_path() {
  static const HostAdamPath best = runs(HostAdamPath::Avx512) ? HostAdamPath::Avx512
                                   : runs(HostAdamPath::Avx2) ? HostAdamPath::Avx2
                                                              : HostAdamPath::Scalar;
  return best;
}

const char* host_adam_path_name(HostAdamPath path) {
  switch (path) {
    case HostAdamPath::Avx512: return "avx512";
    case HostAdamPath::Avx2: return "avx2";
    default: return "scalar";
  }
}

void host_adam_update(const HostAdamArrays& arrays, const Coefficients& k, HostAdamPath path) {
  MG_CHECK(runs(path), "host_adam_update: this CPU has no ", host_adam_path_name(path), " instructions. Hint: ",
           "use best_host_adam_path().");
  MG_ASSERT(arrays.grad_dtype == DType::Float32 || arrays.grad_dtype == DType::Float16 ||
                arrays.grad_dtype == DType::BFloat16,
            "host_adam_update: gradient dtype ", arrays.grad_dtype);
  const int64_t chunks = (arrays.count + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const int64_t begin = chunk * kChunk;
    const int64_t end = std::min(arrays.count, begin + kChunk);
    switch (path) {
      case HostAdamPath::Avx512: avx512_range(arrays, k, begin, end); break;
      case HostAdamPath::Avx2: avx2_range(arrays, k, begin, end); break;
      default: scalar_range(arrays, k, begin, end); break;
    }
  }
}

}  // namespace mg::cpu
