// What both bf16 paths of the int4 linear layer share (amx_linear.cpp on AMX tiles,
// bf16dot_linear.cpp on AVX-512 BF16 dot products): activations rounded to bf16, and one group of
// a packed q4 tile (quant_linear.cpp draws its layout) dequantized into the VNNI pair layout both
// instructions read:
//
//   B [16 pairs of k][16 output rows][2] bf16: row kp holds W[n][2kp], W[n][2kp+1] for n = 0..15
//   (64 bytes, one zmm register), 1 KiB a group.
#pragma once

#include "common.h"

#if LLM_AVX512 && defined(__AVX512BF16__)
#define LLM_BF16 1
#else
#define LLM_BF16 0
#endif

namespace llm {

constexpr int64_t kPairBytes = 1024;  // one group of one tile in the pair layout

#if LLM_BF16
// Group g of one packed q4 tile as fp32 W = code * scale + min, each rounded once (an FMA), then to
// bf16 (nearest even), into dst in the pair layout. Lane n of a 64-byte load holds row n's 8 codes
// of 8 channels: code(n, 8b + 2p) at bits 4p, code(n, 8b + 2p + 1) at bits 16 + 4p.
//
// The codes become floats without a conversion: a code c ORed into the mantissa of 128.0f (bits
// 16..19 of 0x43000000) is exactly 128 + c, and (128 + c) * scale + (min - 128 * scale) is the same
// exact value as c * scale + min whenever min - 128 * scale is exact in fp32, so the one FMA rounds
// it to the same float: 9 vector operations per 32 weights instead of 11. Where that difference is
// not exact (a minimum tiny beside its scale), checked per group by TwoSum, the group takes the
// conversions instead. The same bits either way.
inline void dequant_group(const uint8_t* blk, uint16_t* dst) {
  const __m512 scale = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 256)));
  const __m512 mins = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 288)));
  // interleaves [even 0..15 | odd 0..15] into (even n, odd n) pairs
  const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                         22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512 b = _mm512_mul_ps(scale, _mm512_set1_ps(-128.0f));  // exact: a power of two
  const __m512 shifted = _mm512_add_ps(mins, b);                    // min - 128 * scale, rounded
  // TwoSum: the rounding error of mins + b, zero in every lane when the sum is exact
  const __m512 bv = _mm512_sub_ps(shifted, mins), av = _mm512_sub_ps(shifted, bv);
  const __m512 err = _mm512_add_ps(_mm512_sub_ps(mins, av), _mm512_sub_ps(b, bv));
  if (_mm512_cmp_ps_mask(err, _mm512_setzero_ps(), _CMP_NEQ_UQ) == 0) {
    const __m512i code = _mm512_set1_epi32(0x000F0000), base = _mm512_set1_epi32(0x43000000);
    for (int q = 0; q < 4; ++q) {
      const __m512i w = _mm512_loadu_si512(blk + q * 64);
      for (int p = 0; p < 4; ++p) {
        const __m512i sh = p == 0 ? w : _mm512_srli_epi32(w, 4 * p);
        // (x & code) | base: 128 + the code at bits 16..19, as a float
        const __m512 odd = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(sh, code, base, 0xEA));
        const __m512 even = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_slli_epi32(sh, 16), code, base, 0xEA));
        const __m512i both = reinterpret_cast<__m512i>(
            _mm512_cvtne2ps_pbh(_mm512_fmadd_ps(odd, scale, shifted), _mm512_fmadd_ps(even, scale, shifted)));
        _mm512_storeu_si512(dst + (4 * q + p) * 32, _mm512_permutexvar_epi16(order, both));
      }
    }
    return;
  }
  const __m512i nibbles = _mm512_set1_epi32(0x000F000F), low = _mm512_set1_epi32(0xFFFF);
  for (int q = 0; q < 4; ++q) {
    const __m512i w = _mm512_loadu_si512(blk + q * 64);
    for (int p = 0; p < 4; ++p) {  // lane n: code(n, 8q + 2p) | code(n, 8q + 2p + 1) << 16
      const __m512i pairs = _mm512_and_si512(_mm512_srli_epi32(w, 4 * p), nibbles);
      const __m512 even = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(pairs, low)), scale, mins);
      const __m512 odd = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(pairs, 16)), scale, mins);
      const __m512i both = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(odd, even));
      _mm512_storeu_si512(dst + (4 * q + p) * 32, _mm512_permutexvar_epi16(order, both));
    }
  }
}

// bf16(x), rounded to nearest even, then rows m .. rows zero: out [rows, k]; k a multiple of 16
inline void to_bf16(const float* x, int64_t m, int64_t rows, int64_t k, uint16_t* out) {
  for (int64_t i = 0; i < m * k; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i))));
  std::memset(out + m * k, 0, (rows - m) * k * 2);
}
#endif

}  // namespace llm
