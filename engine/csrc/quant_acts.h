// The activations of a quantized linear layer, quantized to int16 per group of 32 channels
// (engine/csrc/quant_linear.cpp says why and how they are used).
#pragma once

#include "common.h"

#include <algorithm>
#include <vector>

namespace llm {

struct Acts {  // x [M, K] quantized per group of 32 channels
  AlignedVector<int16_t> q;   // [M, K]
  std::vector<float> d;       // [M, G] scale of each group
  std::vector<float> sum;     // [M, G] exact sum of x over each group
  std::vector<int32_t> qsum;  // [M, G] sum of q over each group
};

constexpr float kQMax = 32767.0f;
// bytes of one group of a packed q8 tile: 512 of codes, then 16 fp16 scales and 16 fp16 minimums
// (quant_linear.cpp draws the layout)
constexpr int kQ8Group = 576;
// Weights are read once per step from memory, in order: prefetching this far ahead kept the
// single-thread stream at 9-14 GB/s where the hardware prefetcher alone gave 6.5-7.5 (2 cores,
// 84 MB of int4 layers; 1 KiB and 16 KiB measured a little slower). The prefetches go to L2
// (_MM_HINT_T1), not L1, whose few miss buffers held the stream back: a one-sequence int4 decode
// step on 2 Zen 4 cores, medians of alternating runs, 5.4-6.3 -> 4.8-5.1 ms (mostly; the host
// was noisy), 4 sequences 7.7-10.4 -> 6.7-7.2; 8 KiB ahead rather than 4 from there on.
constexpr int64_t kPrefetch = 8192;

inline Acts quantize_acts(const float* x, int64_t m, int64_t k) {
  const int64_t g = k / kGroup;
  Acts a{AlignedVector<int16_t>(m * k), std::vector<float>(m * g), std::vector<float>(m * g),
         std::vector<int32_t>(m * g)};
  for (int64_t i = 0; i < m * g; ++i) {
    const float* src = x + i * kGroup;
    int16_t* q = a.q.data() + i * kGroup;
#if LLM_AVX512
    const __m512 lo = _mm512_loadu_ps(src), hi = _mm512_loadu_ps(src + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi)));
    const __m512 inv = _mm512_set1_ps(amax > 0.0f ? kQMax / amax : 0.0f);
    const __m512i qlo = _mm512_cvtps_epi32(_mm512_mul_ps(lo, inv));  // round to nearest even
    const __m512i qhi = _mm512_cvtps_epi32(_mm512_mul_ps(hi, inv));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm512_cvtsepi32_epi16(qlo));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 16), _mm512_cvtsepi32_epi16(qhi));
    a.d[i] = amax / kQMax;
    a.sum[i] = _mm512_reduce_add_ps(_mm512_add_ps(lo, hi));
    a.qsum[i] = _mm512_reduce_add_epi32(_mm512_add_epi32(qlo, qhi));
#elif LLM_AVX2
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4], mx = _mm256_setzero_ps(), sm = _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(src + 8 * j);
      mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, v[j]));
      sm = _mm256_add_ps(sm, v[j]);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    const __m256 inv = _mm256_set1_ps(amax > 0.0f ? kQMax / amax : 0.0f);
    __m256i qi[4];
    for (int j = 0; j < 4; ++j) qi[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], inv));  // nearest even
    // packs works within 128-bit lanes: [0-3 | 8-11 | 4-7 | 12-15], put back in order
    const __m256i p01 = _mm256_permute4x64_epi64(_mm256_packs_epi32(qi[0], qi[1]), 0xD8);
    const __m256i p23 = _mm256_permute4x64_epi64(_mm256_packs_epi32(qi[2], qi[3]), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), p01);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 16), p23);
    const __m256i qs = _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(qs), _mm256_extracti128_si256(qs, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    a.d[i] = amax / kQMax;
    a.sum[i] = simd::hsum(sm);
    a.qsum[i] = _mm_cvtsi128_si32(s4);
#else
    float amax = 0.0f, sum = 0.0f;
    for (int64_t j = 0; j < kGroup; ++j) {
      amax = std::max(amax, std::fabs(src[j]));
      sum += src[j];
    }
    const float inv = amax > 0.0f ? kQMax / amax : 0.0f;
    int32_t qsum = 0;
    for (int64_t j = 0; j < kGroup; ++j) {
      const float r = std::nearbyint(src[j] * inv);
      q[j] = static_cast<int16_t>(std::max(-kQMax, std::min(kQMax, r)));
      qsum += q[j];
    }
    a.d[i] = amax / kQMax;
    a.sum[i] = sum;
    a.qsum[i] = qsum;
#endif
  }
  return a;
}

}  // namespace llm
