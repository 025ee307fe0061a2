// The AVX2 tiles of the quantized linear layers (quant_linear.cpp draws the packed layouts and the
// sums; these compute the same sums as its AVX-512 tiles).
#pragma once

#include "common.h"
#include "quant_acts.h"

namespace llm {

#if LLM_AVX2
// AVX2 has no vpdpwssd: vpmaddwd forms each 32-bit lane's pair product (exact in int32) and
// vpaddd sums it, and a 16-row tile is two registers of 8 rows (h = 0, 1: the low and high 32
// bytes of every 64-byte block). Same sums as q4_tile, MN rows of x against one tile.
inline __m256i pair8(const int16_t* q) {
  int32_t v;
  std::memcpy(&v, q, 4);
  return _mm256_set1_epi32(v);
}

inline void store_rows(float* out, __m256 lo, __m256 hi, int64_t valid) {
  if (valid >= kTile) {
    _mm256_storeu_ps(out, lo);
    _mm256_storeu_ps(out + 8, hi);
    return;
  }
  alignas(32) float tmp[16];
  _mm256_store_ps(tmp, lo);
  _mm256_store_ps(tmp + 8, hi);
  std::memcpy(out, tmp, valid * sizeof(float));
}

template <int MN>
void q4_tile2(const uint8_t* tile, int64_t groups, const Acts& a, int64_t m0, int64_t k, float* out,
              int64_t n, int64_t valid) {
  __m256 facc[MN][2];
  for (int m = 0; m < MN; ++m) facc[m][0] = facc[m][1] = _mm256_setzero_ps();
  const __m256i nibbles = _mm256_set1_epi32(0x000F000F);
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* blk = tile + g * 320;
    for (int l = 0; l < 320; l += 64) _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetch + l), _MM_HINT_T1);
    // Up to 2 rows: both halves under one broadcast of x (2 MN + 6 registers live; 16 exist).
    // More rows: one half at a time (MN + 4 live), else the accumulators spill.
    constexpr bool kBoth = MN <= 2;
    __m256i both[kBoth ? MN : 1][2];
    if constexpr (kBoth) {
      for (int m = 0; m < MN; ++m) both[m][0] = both[m][1] = _mm256_setzero_si256();
      for (int b = 0; b < 4; ++b) {
        const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + b * 64));
        const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + b * 64 + 32));
        for (int p = 0; p < 4; ++p) {
          const __m256i c0 = _mm256_and_si256(_mm256_srli_epi32(w0, 4 * p), nibbles);
          const __m256i c1 = _mm256_and_si256(_mm256_srli_epi32(w1, 4 * p), nibbles);
          for (int m = 0; m < MN; ++m) {
            const __m256i q = pair8(a.q.data() + (m0 + m) * k + g * kGroup + b * 8 + 2 * p);
            both[m][0] = _mm256_add_epi32(both[m][0], _mm256_madd_epi16(c0, q));
            both[m][1] = _mm256_add_epi32(both[m][1], _mm256_madd_epi16(c1, q));
          }
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      __m256i acc[MN];
      if constexpr (kBoth) {
        for (int m = 0; m < MN; ++m) acc[m] = both[m][h];
      } else {
        for (int m = 0; m < MN; ++m) acc[m] = _mm256_setzero_si256();
        for (int b = 0; b < 4; ++b) {
          const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + b * 64 + 32 * h));
          for (int p = 0; p < 4; ++p) {
            const __m256i c = _mm256_and_si256(_mm256_srli_epi32(w, 4 * p), nibbles);
            for (int m = 0; m < MN; ++m)
              acc[m] = _mm256_add_epi32(acc[m], _mm256_madd_epi16(c, pair8(a.q.data() + (m0 + m) * k + g * kGroup + b * 8 + 2 * p)));
          }
        }
      }
      const __m256 scale = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 256 + 16 * h)));
      const __m256 mins = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 288 + 16 * h)));
      const __m256 zeros = _mm256_fmadd_ps(_mm256_set1_ps(8.0f), scale, mins);
      for (int m = 0; m < MN; ++m) {
        const int64_t ag = (m0 + m) * groups + g;
        const __m256i centred = _mm256_sub_epi32(acc[m], _mm256_set1_epi32(8 * a.qsum[ag]));
        const __m256 sd = _mm256_mul_ps(scale, _mm256_set1_ps(a.d[ag]));
        facc[m][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(centred), sd, facc[m][h]);
        facc[m][h] = _mm256_fmadd_ps(zeros, _mm256_set1_ps(a.sum[ag]), facc[m][h]);
      }
    }
  }
  for (int m = 0; m < MN; ++m) store_rows(out + m * n, facc[m][0], facc[m][1], valid);
}

template <int MN>
void q8_tile2(const uint8_t* tile, int64_t groups, const Acts& a, int64_t m0, int64_t k, float* out,
              int64_t n, int64_t valid) {
  __m256 facc[MN][2];
  for (int m = 0; m < MN; ++m) facc[m][0] = facc[m][1] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* blk = tile + g * kQ8Group;
    for (int l = 0; l < kQ8Group; l += 64) _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetch + l), _MM_HINT_T1);
    for (int h = 0; h < 2; ++h) {
      __m256i acc[MN];
      for (int m = 0; m < MN; ++m) acc[m] = _mm256_setzero_si256();
      for (int b = 0; b < 16; ++b) {
        const __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + b * 32 + 16 * h)));
        for (int m = 0; m < MN; ++m)
          acc[m] = _mm256_add_epi32(acc[m], _mm256_madd_epi16(w, pair8(a.q.data() + (m0 + m) * k + g * kGroup + b * 2)));
      }
      const __m256 scale = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 512 + 16 * h)));
      const __m256 mins = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 544 + 16 * h)));
      const __m256 zeros = _mm256_fmadd_ps(_mm256_set1_ps(128.0f), scale, mins);
      for (int m = 0; m < MN; ++m) {  // the codes are stored centred: no qsum term
        const int64_t ag = (m0 + m) * groups + g;
        const __m256 sd = _mm256_mul_ps(scale, _mm256_set1_ps(a.d[ag]));
        facc[m][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[m]), sd, facc[m][h]);
        facc[m][h] = _mm256_fmadd_ps(zeros, _mm256_set1_ps(a.sum[ag]), facc[m][h]);
      }
    }
  }
  for (int m = 0; m < MN; ++m) store_rows(out + m * n, facc[m][0], facc[m][1], valid);
}
#endif

}  // namespace llm
