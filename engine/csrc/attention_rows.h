// The scores of several query rows that share one block table (the tokens of a prefill chunk, row i
// seeing its own context length), W positions at a time against one transposed copy of the keys.
//
// Row by row (attention_d64.h), a score costs C64 vector products and a horizontal sum: the sum
// is a few shuffles and adds on one lane's worth of result, a pass over the chunk's context per
// row. Here each W positions' keys of one kv head are widened and transposed once, kt[d * W + p],
// for all the rows; a row's W scores are then C64 * W products with its query broadcast, and the
// sums run down the vector lanes: no shuffles.
//
// The same bits as the row-by-row path: lane j of that path's accumulator is the chain
// q[j] k[j] + q[W + j] k[W + j] + ... (a product, then fused multiply-adds, in c order), and the
// horizontal sum adds lanes j and j + W/2, then j and j + W/4, ..., then 0 and 1 (simd::hsum: GCC's
// _mm512_reduce_add_ps); `node` below makes each leaf j the same chain and adds the leaves in that
// tree, for W positions at once. A chunk's rows may be split in any groups, or none: each score is the
// same (tests/engine/test_kernels.py checks every row against its own call).
//
// AVX-512 only: on AVX2 the same tree for 8 lanes keeps the bits and fits the registers, but measured
// no faster than the row path on 2 Zen 4 cores (docs/benchmarks.md, 2026-12-06).
#pragma once

#include "attention_d64.h"

#if LLM_AVX512
namespace llm {
namespace attn {

template <int G>
struct Lanes {  // one vector of W positions' values for each of the group's G query heads
  simd::V v[G];
};

// Leaf j of the sum tree for positions p0 .. p0 + W: each head's chain over the C64 column blocks.
// q * k and q * k + acc with the scalar q broadcast from memory inside the instruction ({1to16}):
// GCC otherwise issues a broadcast of its own for each of the leaves' 64 x G products.
inline __m512 mul_bcast(const float* q, __m512 k) {
  __m512 r;
  asm("vmulps %1%{1to16%}, %2, %0" : "=v"(r) : "m"(*q), "v"(k));
  return r;
}
inline __m512 fmadd_bcast(const float* q, __m512 k, __m512 acc) {
  asm("vfmadd231ps %1%{1to16%}, %2, %0" : "+v"(acc) : "m"(*q), "v"(k));
  return acc;
}

template <int G, int J>
inline Lanes<G> leaf(const float* qs, const float* kt) {
  Lanes<G> a;
  const simd::V k0 = simd::load(kt + J * simd::W);
  for (int g = 0; g < G; ++g) a.v[g] = mul_bcast(qs + g * D64 + J, k0);
  for (int64_t c = 1; c < C64; ++c) {
    const simd::V k = simd::load(kt + (c * simd::W + J) * simd::W);
    for (int g = 0; g < G; ++g) a.v[g] = fmadd_bcast(qs + g * D64 + c * simd::W + J, k, a.v[g]);
  }
  return a;
}

template <int G>
struct F32Leaves {  // the leaves from fp32 queries and widened, transposed keys
  const float* qs;
  const float* kt;
  template <int J>
  Lanes<G> at() const { return leaf<G, J>(qs, kt); }
};

// The sum of leaves J, J + H, J + 2H, ... in hsum's tree: (J, J + W/2) first, up to H == 1 (all W).
template <int G, int J, int H, class Leaves>
inline Lanes<G> node(const Leaves& leaves) {
  Lanes<G> a, b;
  if constexpr (2 * H == simd::W) {
    a = leaves.template at<J>();
    b = leaves.template at<J + H>();
  } else {
    a = node<G, J, 2 * H>(leaves);
    b = node<G, J + H, 2 * H>(leaves);
  }
  for (int g = 0; g < G; ++g) a.v[g] = simd::add(a.v[g], b.v[g]);
  return a;
}

// out[e * 16 + p] = element e of r[p]: a 16 x 16 transpose of 32-bit elements.
inline void transpose16(__m512 r[16], float* out) {
  __m512 t[16];
  for (int p = 0; p < 16; p += 2) {  // per 128 bits: (r0[0], r1[0], r0[1], r1[1]) and elements 2, 3
    t[p] = _mm512_unpacklo_ps(r[p], r[p + 1]);
    t[p + 1] = _mm512_unpackhi_ps(r[p], r[p + 1]);
  }
  for (int p = 0; p < 16; p += 4) {  // u[p + e]: element e (of each 128 bits) of rows p .. p + 3
    const auto lo = [&](int a, int b) { return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[a]), _mm512_castps_pd(t[b]))); };
    const auto hi = [&](int a, int b) { return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[a]), _mm512_castps_pd(t[b]))); };
    r[p] = lo(p, p + 2);
    r[p + 1] = hi(p, p + 2);
    r[p + 2] = lo(p + 1, p + 3);
    r[p + 3] = hi(p + 1, p + 3);
  }
  for (int e = 0; e < 4; ++e) {  // element 4L + e lies in 128 bits L of r[e], r[4 + e], r[8 + e], r[12 + e]
    const __m512 a = _mm512_shuffle_f32x4(r[e], r[4 + e], 0x88), b = _mm512_shuffle_f32x4(r[e], r[4 + e], 0xdd);
    const __m512 x = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0x88), y = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0xdd);
    _mm512_store_ps(out + e * 16, _mm512_shuffle_f32x4(a, x, 0x88));
    _mm512_store_ps(out + (4 + e) * 16, _mm512_shuffle_f32x4(b, y, 0x88));
    _mm512_store_ps(out + (8 + e) * 16, _mm512_shuffle_f32x4(a, x, 0xdd));
    _mm512_store_ps(out + (12 + e) * 16, _mm512_shuffle_f32x4(b, y, 0xdd));
  }
}

// kt[d * W + p] = key p's element d, for W keys `stride` elements apart (one kv head's rows of a block).
template <typename T>
inline void transpose_keys(const T* k, int64_t stride, float* kt) {
  for (int64_t c = 0; c < C64; ++c) {  // a 16 x 16 transpose for each 16 columns
    __m512 r[16];
    for (int p = 0; p < 16; ++p) r[p] = simd::load(k + p * stride + c * 16);
    transpose16(r, kt + c * 16 * 16);
  }
}

// scores[(r * G + g) * ld + p] for rows r < n (query group q0 + r * qstride, context ctxs[r]) and
// positions p < ctxs[r], of one kv head: the scaled dot products decode_impl's row path makes.
// Positions from ctxs[r] to the next multiple of W get values that mean nothing (ld covers them).
// Needs bs % W == 0, so that W positions from a multiple of W lie in one block.
template <int G, typename T>
void scores_rows_d64(const float* q0, int64_t qstride, int64_t n, const int64_t* ctxs, const T* kp,
                     const int64_t* table, int64_t bs, int64_t hkv, int64_t kvh, float scale, float* scores,
                     int64_t ld) {
  AlignedVector<float> qs(n * G * D64);  // scaled as the row path scales them: q * scale
  int64_t most = 0;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < G * D64; ++i) qs[r * G * D64 + i] = q0[r * qstride + i] * scale;
    most = std::max(most, ctxs[r]);
  }
  alignas(64) float kt[D64 * simd::W];
  for (int64_t p0 = 0; p0 < most; p0 += simd::W) {
    transpose_keys(kp + ((table[p0 / bs] * bs + p0 % bs) * hkv + kvh) * D64, hkv * D64, kt);
    for (int64_t r = 0; r < n; ++r) {
      if (ctxs[r] <= p0) continue;
      const Lanes<G> s = node<G, 0, 1>(F32Leaves<G>{qs.data() + r * G * D64, kt});
      for (int g = 0; g < G; ++g) simd::store(scores + (r * G + g) * ld + p0, s.v[g]);
    }
  }
}

// True when the group size has the blocked path (then scores[...] as above).
template <typename T>
bool scores_rows(int64_t groupsz, const float* q0, int64_t qstride, int64_t n, const int64_t* ctxs, const T* kp,
                 const int64_t* table, int64_t bs, int64_t hkv, int64_t kvh, float scale, float* scores, int64_t ld) {
  switch (groupsz) {
    case 1: scores_rows_d64<1>(q0, qstride, n, ctxs, kp, table, bs, hkv, kvh, scale, scores, ld); return true;
    case 2: scores_rows_d64<2>(q0, qstride, n, ctxs, kp, table, bs, hkv, kvh, scale, scores, ld); return true;
    case 3: scores_rows_d64<3>(q0, qstride, n, ctxs, kp, table, bs, hkv, kvh, scale, scores, ld); return true;
    case 4: scores_rows_d64<4>(q0, qstride, n, ctxs, kp, table, bs, hkv, kvh, scale, scores, ld); return true;
    default: return false;
  }
}

}  // namespace attn
}  // namespace llm
#endif
