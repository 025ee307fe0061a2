// Weight-only quantized linear layers: y = x @ W^T with W stored as 4-bit or 8-bit codes, a scale and
// a minimum per 32 input channels of each output row (W = code * scale + min).
//
// The activations are quantized on the fly to int16 per group of 32 channels (scale d =
// max|x| / 32767: a relative rounding error near 1e-5, far below bf16's 4e-3, so greedy choices stay
// the float model's), and each group's dot product is an integer one (AVX-512 VNNI vpdpwssd: 32
// multiply-adds an instruction, exact in int32). W is taken as (code - c) * scale + zero, with the
// centre c = 8 (int4) or 128 (int8) and zero = min + c * scale (in fp32), so the rounding errors meet
// centred codes and the group's exact float sum carries the zero term:
//
//   y[n] = sum_g  scale[n,g] * d[g] * sum_{i in g} (code[n,i] - c) * q[i]  +  zero[n,g] * sum_{i in g} x[i]
//
// Packed layouts (engine/quant.py `pack_q4` / `pack_q8` write them), for tile t of 16 output rows r,
// lane r of every 32-bit accumulator being row r (no horizontal sums):
//
//   q4  [T, G, 320] bytes, per group g: 4 blocks of 64 bytes, block b holding k = 8b .. 8b+7 of the
//       group: 32-bit word r = sum_p code[r, 8b+2p] << 4p | code[r, 8b+2p+1] << (16 + 4p), p = 0..3
//       (so (word >> 4p) & 0x000F000F is the int16 pair of k = 8b+2p, 8b+2p+1), then 16 fp16
//       scales and 16 fp16 minimums of the tile's rows (a GGUF Q4_1 source's own fp16 values).
//   q8  [T, G, 576] bytes, per group g: 16 blocks of 32 bytes, block b holding k = 2b, 2b+1:
//       byte 2r + j = code[r, 2b + j] - 128 (signed), then 16 fp16 scales and 16 fp16 minimums of
//       the tile's rows, as in q4.
#include "amx.h"
#include "bf16dot.h"
#include "common.h"
#include "fma.h"
#include "pool.h"
#include "quant_acts.h"
#include "quant_avx2.h"

#include <vector>

namespace llm {
namespace {

#if LLM_AVX512
inline __m512i pair(const int16_t* q) {  // q[0], q[1] in every 32-bit lane
  int32_t v;
  std::memcpy(&v, q, 4);
  return _mm512_set1_epi32(v);
}

// Rows m0 .. m0+MN of x against one tile; out points at y[m0, tile start]. Each row sums into P
// independent chains: vpdpwssd's latency is 4-5 cycles and its rate 2 a cycle, so MN * P near 8
// keeps the units busy without running out of the 32 vector registers.
template <int MN, int P>
void q4_tile(const uint8_t* tile, int64_t groups, const Acts& a, int64_t m0, int64_t k, float* out,
             int64_t n, int64_t valid) {
  __m512 facc[MN];
  for (int m = 0; m < MN; ++m) facc[m] = _mm512_setzero_ps();
  const __m512i nibbles = _mm512_set1_epi32(0x000F000F);
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* blk = tile + g * 320;
    for (int l = 0; l < 320; l += 64) _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetch + l), _MM_HINT_T1);
    __m512i acc[MN][P];
    for (int m = 0; m < MN; ++m)
      for (int p = 0; p < P; ++p) acc[m][p] = _mm512_setzero_si512();
    for (int b = 0; b < 4; ++b) {
      const __m512i w = _mm512_loadu_si512(blk + b * 64);
      const __m512i c[4] = {_mm512_and_si512(w, nibbles), _mm512_and_si512(_mm512_srli_epi32(w, 4), nibbles),
                            _mm512_and_si512(_mm512_srli_epi32(w, 8), nibbles),
                            _mm512_and_si512(_mm512_srli_epi32(w, 12), nibbles)};
      for (int m = 0; m < MN; ++m) {
        const int16_t* q = a.q.data() + (m0 + m) * k + g * kGroup + b * 8;
        for (int p = 0; p < 4; ++p) acc[m][p % P] = _mm512_dpwssd_epi32(acc[m][p % P], c[p], pair(q + 2 * p));
      }
    }
    const __m512 scale = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 256)));
    const __m512 mins = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 288)));
    const __m512 zeros = _mm512_fmadd_ps(_mm512_set1_ps(8.0f), scale, mins);  // in fp32: exact
    for (int m = 0; m < MN; ++m) {  // centred codes: sum (code - 8) * q = sum code * q - 8 sum q
      const int64_t ag = (m0 + m) * groups + g;
      __m512i dot = acc[m][0];
      for (int p = 1; p < P; ++p) dot = _mm512_add_epi32(dot, acc[m][p]);
      const __m512i centred = _mm512_sub_epi32(dot, _mm512_set1_epi32(8 * a.qsum[ag]));
      const __m512 sd = _mm512_mul_ps(scale, _mm512_set1_ps(a.d[ag]));
      facc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(centred), sd, facc[m]);
      facc[m] = _mm512_fmadd_ps(zeros, _mm512_set1_ps(a.sum[ag]), facc[m]);
    }
  }
  const __mmask16 mask = valid >= kTile ? 0xFFFF : static_cast<__mmask16>((1u << valid) - 1);
  for (int m = 0; m < MN; ++m) _mm512_mask_storeu_ps(out + m * n, mask, facc[m]);
}

template <int MN, int P>
void q8_tile(const uint8_t* tile, int64_t groups, const Acts& a, int64_t m0, int64_t k, float* out,
             int64_t n, int64_t valid) {
  __m512 facc[MN];
  for (int m = 0; m < MN; ++m) facc[m] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* blk = tile + g * kQ8Group;
    for (int l = 0; l < kQ8Group; l += 64) _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetch + l), _MM_HINT_T1);
    __m512i acc[MN][P];  // P chains a row, as in q4_tile
    for (int m = 0; m < MN; ++m)
      for (int p = 0; p < P; ++p) acc[m][p] = _mm512_setzero_si512();
    for (int b = 0; b < 16; ++b) {
      const __m512i w = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + b * 32)));
      for (int m = 0; m < MN; ++m)
        acc[m][b % P] = _mm512_dpwssd_epi32(acc[m][b % P], w, pair(a.q.data() + (m0 + m) * k + g * kGroup + b * 2));
    }
    const __m512 scale = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 512)));
    const __m512 mins = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 544)));
    const __m512 zeros = _mm512_fmadd_ps(_mm512_set1_ps(128.0f), scale, mins);  // in fp32: exact
    for (int m = 0; m < MN; ++m) {  // the codes are stored centred: no qsum term
      const int64_t ag = (m0 + m) * groups + g;
      __m512i dot = acc[m][0];
      for (int p = 1; p < P; ++p) dot = _mm512_add_epi32(dot, acc[m][p]);
      const __m512 sd = _mm512_mul_ps(scale, _mm512_set1_ps(a.d[ag]));
      facc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sd, facc[m]);
      facc[m] = _mm512_fmadd_ps(zeros, _mm512_set1_ps(a.sum[ag]), facc[m]);
    }
  }
  const __mmask16 mask = valid >= kTile ? 0xFFFF : static_cast<__mmask16>((1u << valid) - 1);
  for (int m = 0; m < MN; ++m) _mm512_mask_storeu_ps(out + m * n, mask, facc[m]);
}
#endif

// The same sums, one row and one code at a time.
void q4_tile_scalar(const uint8_t* tile, int64_t groups, const Acts& a, int64_t row, int64_t k,
                    float* out, int64_t valid) {
  for (int64_t r = 0; r < valid; ++r) {
    float y = 0.0f;
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t* blk = tile + g * 320;
      const int16_t* q = a.q.data() + row * k + g * kGroup;
      int32_t dot = 0;
      for (int b = 0; b < 4; ++b) {
        uint32_t word;
        std::memcpy(&word, blk + b * 64 + r * 4, 4);
        for (int p = 0; p < 4; ++p) {
          dot += (static_cast<int32_t>((word >> (4 * p)) & 0xF) - 8) * q[b * 8 + 2 * p];
          dot += (static_cast<int32_t>((word >> (16 + 4 * p)) & 0xF) - 8) * q[b * 8 + 2 * p + 1];
        }
      }
      const at::Half* meta = reinterpret_cast<const at::Half*>(blk + 256);
      const int64_t ag = row * groups + g;
      const float scale = static_cast<float>(meta[r]), zero = 8.0f * scale + static_cast<float>(meta[16 + r]);
      y += scale * a.d[ag] * static_cast<float>(dot) + zero * a.sum[ag];
    }
    out[r] = y;
  }
}

void q8_tile_scalar(const uint8_t* tile, int64_t groups, const Acts& a, int64_t row, int64_t k,
                    float* out, int64_t valid) {
  for (int64_t r = 0; r < valid; ++r) {
    float y = 0.0f;
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t* blk = tile + g * kQ8Group;
      const int8_t* codes = reinterpret_cast<const int8_t*>(blk);
      const int16_t* q = a.q.data() + row * k + g * kGroup;
      int32_t dot = 0;
      for (int b = 0; b < 16; ++b)
        for (int j = 0; j < 2; ++j) dot += static_cast<int32_t>(codes[b * 32 + r * 2 + j]) * q[b * 2 + j];
      const at::Half* meta = reinterpret_cast<const at::Half*>(blk + 512);
      const int64_t ag = row * groups + g;
      const float scale = static_cast<float>(meta[r]), zero = 128.0f * scale + static_cast<float>(meta[16 + r]);
      y += scale * a.d[ag] * static_cast<float>(dot) + zero * a.sum[ag];
    }
    out[r] = y;
  }
}

enum class Scheme { kInt4, kInt8 };

at::Tensor quantized_linear(Scheme scheme, const at::Tensor& x, const at::Tensor& packed, int64_t n) {
  check_f32_2d(x, "x");
  const int64_t m = x.size(0), k = x.size(1), tiles = (n + kTile - 1) / kTile, groups = k / kGroup;
  const int64_t tile_bytes = groups * (scheme == Scheme::kInt4 ? 320 : kQ8Group);
  TORCH_CHECK(k % kGroup == 0, "in_features must be a multiple of ", kGroup);
  TORCH_CHECK(packed.scalar_type() == at::kByte && packed.is_contiguous() &&
                  packed.numel() == tiles * tile_bytes,
              "packed weight does not match ", n, " x ", k);
  at::Tensor y = at::empty({m, n}, x.options());
  if (scheme == Scheme::kInt4 && m >= amx_min_rows() && amx_usable()) {
    q4_linear_amx(x.data_ptr<float>(), m, k, packed.data_ptr<uint8_t>(), n, y.data_ptr<float>());
    return y;
  }
  if (scheme == Scheme::kInt4 && m >= bf16dot_min_rows() && bf16dot_usable()) {
    q4_linear_bf16dot(x.data_ptr<float>(), m, k, packed.data_ptr<uint8_t>(), n, y.data_ptr<float>());
    return y;
  }
  if (scheme == Scheme::kInt4 && m >= fma_min_rows() && fma_usable()) {
    q4_linear_fma(x.data_ptr<float>(), m, k, packed.data_ptr<uint8_t>(), n, y.data_ptr<float>());
    return y;
  }
  const Acts a = quantize_acts(x.data_ptr<float>(), m, k);
  const uint8_t* w = packed.data_ptr<uint8_t>();
  float* out = y.data_ptr<float>();
  // chunks of tiles: about 16 KiB of weights each, the work a preempted thread may hold up
  const int64_t grain = std::max<int64_t>(1, 16384 / tile_bytes);
  Pool::get().for_each(tiles, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const uint8_t* tile = w + t * tile_bytes;
      const int64_t n0 = t * kTile, valid = std::min(kTile, n - n0);
#if LLM_AVX512
      int64_t m0 = 0;
      auto rows = [&]<int MN, int P>() {
        if (scheme == Scheme::kInt4) q4_tile<MN, P>(tile, groups, a, m0, k, out + m0 * n + n0, n, valid);
        else q8_tile<MN, P>(tile, groups, a, m0, k, out + m0 * n + n0, n, valid);
        m0 += MN;
      };
      while (m0 + 8 <= m) rows.template operator()<8, 1>();
      if (m0 + 4 <= m) rows.template operator()<4, 2>();
      if (m0 + 2 <= m) rows.template operator()<2, 2>();
      if (m0 < m) rows.template operator()<1, 4>();
#elif LLM_AVX2
      int64_t m0 = 0;
      auto rows = [&]<int MN>() {
        if (scheme == Scheme::kInt4) q4_tile2<MN>(tile, groups, a, m0, k, out + m0 * n + n0, n, valid);
        else q8_tile2<MN>(tile, groups, a, m0, k, out + m0 * n + n0, n, valid);
        m0 += MN;
      };
      while (m0 + 4 <= m) rows.template operator()<4>();
      if (m0 + 2 <= m) rows.template operator()<2>();
      if (m0 < m) rows.template operator()<1>();
#else
      for (int64_t row = 0; row < m; ++row) {
        if (scheme == Scheme::kInt4) q4_tile_scalar(tile, groups, a, row, k, out + row * n + n0, valid);
        else q8_tile_scalar(tile, groups, a, row, k, out + row * n + n0, valid);
      }
#endif
    }
  });
  return y;
}

}  // namespace

at::Tensor q4_linear(const at::Tensor& x, const at::Tensor& packed, int64_t n) {
  return quantized_linear(Scheme::kInt4, x, packed, n);
}

at::Tensor q8_linear(const at::Tensor& x, const at::Tensor& packed, int64_t n) {
  return quantized_linear(Scheme::kInt8, x, packed, n);
}

}  // namespace llm
