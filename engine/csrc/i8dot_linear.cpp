// The int4 linear layer with int8 activations, on AVX-512 VNNI byte dot products (VPDPBUSD: 4
// unsigned bytes times 4 signed bytes into each 32-bit lane), for steps of many rows.
//
// x is rounded per row and group of 32 channels to q = round(x / d), d = max|x| / 127 (llama.cpp's
// Q8 activations), keeping each group's exact float sum for the zero term as the int16 path does
// (quant_linear.cpp has the algebra):
//
//   y[n] = sum_g  scale[n,g] * d[g] * sum_{i in g} (code[n,i] - 8) * q[i]  +  zero[n,g] * sum_{i in g} x[i]
//
// The packed q4 codes are used as they are stored. A 64-byte block holds k = 8b .. 8b+7 of a group
// for 16 output rows; masking its bytes' low and high nibbles gives, in each 32-bit lane r,
//
//   w & 0x0F0F0F0F         = codes of k (0, 4, 1, 5)   (bits 0-3, 8-11, 16-19, 24-27 of word r)
//   (w >> 4) & 0x0F0F0F0F  = codes of k (2, 6, 3, 7)
//
// so the activations are stored per 8 channels in that order, [x0 x4 x1 x5 | x2 x6 x3 x7], and each
// half meets its codes in one VPDPBUSD with a broadcast of 4 bytes. Each accumulator starts at
// -8 * sum q, so it ends at the centred dot product, exact in int32.
//
// Rounding: an activation is off by up to d/2 = max|x| / 254 of its group, coarser than the int16
// path (max|x| / 65534) and bf16 (|x| / 512): i8dot.h says where it is used.
#include "i8dot.h"

#include <algorithm>
#include <vector>

#include "pool.h"
#include "quant_acts.h"

namespace llm {

#if LLM_AVX512
namespace {

struct Acts8 {  // x [M, K] as int8 per group of 32, each 8 channels in the order above
  AlignedVector<int8_t> q;     // [M, K]
  std::vector<float> d;        // [M, G] scale of each group
  std::vector<float> sum;      // [M, G] exact sum of x over each group
  std::vector<int32_t> shift;  // [M, G] -8 * sum of q over each group: where each dot product starts
};

// Rows [begin, end) of x into a (sized for all rows)
void quantize_rows(const float* x, int64_t begin, int64_t end, int64_t k, Acts8& a) {
  const int64_t groups = k / kGroup;
  // lane i of the output takes channel order[i] of its 16: [0 4 1 5 2 6 3 7] and the same + 8
  const __m512i order = _mm512_set_epi32(15, 11, 14, 10, 13, 9, 12, 8, 7, 3, 6, 2, 5, 1, 4, 0);
  for (int64_t i = begin * groups; i < end * groups; ++i) {
    const float* src = x + i * kGroup;
    const __m512 lo = _mm512_loadu_ps(src), hi = _mm512_loadu_ps(src + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi)));
    const __m512 inv = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    const __m512i qlo = _mm512_cvtps_epi32(_mm512_mul_ps(lo, inv));  // round to nearest even
    const __m512i qhi = _mm512_cvtps_epi32(_mm512_mul_ps(hi, inv));
    int8_t* q = a.q.data() + i * kGroup;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(_mm512_permutexvar_epi32(order, qlo)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtsepi32_epi8(_mm512_permutexvar_epi32(order, qhi)));
    a.d[i] = amax / 127.0f;
    a.sum[i] = _mm512_reduce_add_ps(_mm512_add_ps(lo, hi));
    a.shift[i] = -8 * _mm512_reduce_add_epi32(_mm512_add_epi32(qlo, qhi));
  }
}

inline __m512i quad(const int8_t* q) {  // q[0 .. 3] in every 32-bit lane
  int32_t v;
  std::memcpy(&v, q, 4);
  return _mm512_set1_epi32(v);
}

// Rows m0 .. m0+MN of x against one tile (out: y[m0, tile start]). A row's 8 byte dot products per
// group alternate between P chains, so MN * P >= 6 hides VPDPBUSD's latency.
template <int MN, int P>
void tile_rows(const uint8_t* tile, int64_t groups, const Acts8& a, int64_t m0, int64_t k, float* out,
               int64_t n, int64_t valid) {
  __m512 facc[MN];
  for (int m = 0; m < MN; ++m) facc[m] = _mm512_setzero_ps();
  const __m512i nibbles = _mm512_set1_epi32(0x0F0F0F0F);
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* blk = tile + g * 320;
    for (int l = 0; l < 320; l += 64) _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetch + l), _MM_HINT_T1);
    __m512i acc[MN][P];
    for (int m = 0; m < MN; ++m) {
      acc[m][0] = _mm512_set1_epi32(a.shift[(m0 + m) * groups + g]);
      for (int p = 1; p < P; ++p) acc[m][p] = _mm512_setzero_si512();
    }
    for (int b = 0; b < 4; ++b) {
      const __m512i w = _mm512_loadu_si512(blk + b * 64);
      const __m512i c[2] = {_mm512_and_si512(w, nibbles), _mm512_and_si512(_mm512_srli_epi32(w, 4), nibbles)};
      for (int m = 0; m < MN; ++m) {
        const int8_t* q = a.q.data() + (m0 + m) * k + g * kGroup + b * 8;
        for (int h = 0; h < 2; ++h) acc[m][(2 * b + h) % P] = _mm512_dpbusd_epi32(acc[m][(2 * b + h) % P], c[h], quad(q + 4 * h));
      }
    }
    const __m512 scale = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 256)));
    const __m512 mins = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 288)));
    const __m512 zeros = _mm512_fmadd_ps(_mm512_set1_ps(8.0f), scale, mins);  // in fp32: exact
    for (int m = 0; m < MN; ++m) {
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

}  // namespace

bool i8dot_usable() { return true; }

void q4_linear_i8dot(const float* x, int64_t m, int64_t k, const uint8_t* packed, int64_t n, float* y) {
  const int64_t groups = k / kGroup, tiles = (n + kTile - 1) / kTile, tile_bytes = groups * 320;
  Acts8 a{AlignedVector<int8_t>(m * k), std::vector<float>(m * groups), std::vector<float>(m * groups),
          std::vector<int32_t>(m * groups)};
  Pool::get().for_each(m, std::max<int64_t>(1, 16384 / k), [&](int64_t begin, int64_t end) {
    quantize_rows(x, begin, end, k, a);
  });
  // chunks of tiles: about 16 KiB of weights each; every chunk multiplies all the rows, each tile
  // read from memory once and then from L1 for each block of 8 rows
  const int64_t grain = std::max<int64_t>(1, 16384 / tile_bytes);
  Pool::get().for_each(tiles, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const uint8_t* tile = packed + t * tile_bytes;
      const int64_t n0 = t * kTile, valid = std::min(kTile, n - n0);
      int64_t m0 = 0;
      auto rows = [&]<int MN, int P>() {
        tile_rows<MN, P>(tile, groups, a, m0, k, y + m0 * n + n0, n, valid);
        m0 += MN;
      };
      while (m0 + 8 <= m) rows.template operator()<8, 1>();
      if (m0 + 4 <= m) rows.template operator()<4, 2>();
      if (m0 + 2 <= m) rows.template operator()<2, 4>();
      if (m0 < m) rows.template operator()<1, 8>();
    }
  });
}

#else

bool i8dot_usable() { return false; }

void q4_linear_i8dot(const float*, int64_t, int64_t, const uint8_t*, int64_t, float*) {
  TORCH_CHECK(false, "this build of the kernels has no AVX-512 VNNI path");
}

#endif

}  // namespace llm
