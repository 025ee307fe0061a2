// Shared helpers of the engine's CPU kernels (engine/kernels.py builds and loads them).
//
// Every kernel has an AVX-512 path (compiled where the build machine's -march=native has it) and
// a portable scalar path computing the same quantities, so the library builds and is correct on
// any x86-64 or ARM host; engine/kernels.py reports which one was built.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#define LLM_AVX512 1
#include <immintrin.h>
#else
#define LLM_AVX512 0
#endif

namespace llm {

constexpr int64_t kTile = 16;   // output rows per weight tile (one AVX-512 register of fp32)
constexpr int64_t kGroup = 32;  // input channels per activation quantization group

inline void check_f32_2d(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.dim() == 2 && t.scalar_type() == at::kFloat && t.is_contiguous(), name,
              " must be a contiguous 2-d float32 tensor");
}

#if LLM_AVX512
// e^x for 16 lanes: x = n ln2 + r, |r| <= ln2 / 2, e^r by a degree-6 polynomial (relative error
// about 2e-7), scaled by 2^n. Inputs below -87 give 0, as they should for softmax and SiLU.
inline __m512 exp512(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.0f), hi = _mm512_set1_ps(88.0f);
  x = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}
#endif

}  // namespace llm
