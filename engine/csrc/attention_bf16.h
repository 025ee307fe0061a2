// Attention over a bf16 KV cache on AVX-512 BF16 dot products (VDPBF16PS: 16 lanes, each adding
// the products of two bf16 pairs to an fp32 sum): half the instructions of widening the cache to
// fp32 and multiplying there, and no widening at all.
//
//   scores   each query, scaled (q * scale in fp32), is rounded to bf16 once; a key row is two
//            vectors of 16 pairs (dims 2i, 2i + 1) and a score is two dot products and hsum's tree,
//            lane i holding pairs i and 16 + i. The blocked path (a prefill chunk's rows, sharing
//            their keys) transposes W keys as pairs, kt[P * W + j] = key j's pair P, and makes the
//            same leaves and the same tree (attention_rows.h), so every row gets the bits it gets
//            alone.
//   values   the softmax weights, fp32 as before, are split as the query is, into two bf16 parts a
//            pair of positions at a time (a context of odd length ends in a weight of 0 against a
//            value row of 0s), and each pair of value rows meets both parts; two value rows
//            interleave into pairs, (v[p][d], v[p + 1][d]), with VPUNPCKLWD/HWD, which order each
//            128 bits' dims as 0-3 then 4-7: the outputs are put back in order once at the end.
//
// What the rounding costs: the cache's keys and values are bf16 already; a query and a weight keep
// about 16 bits each. Weights rounded to one bf16 part, as FlashAttention rounds them on GPUs, cost
// the quality gate (tests/engine/test_quantized.py, bf16 cache) a prompt of int8's 24 and one of
// int4's on 2 Zen 4 cores (docs/architecture.md).
#pragma once

#include "attention_rows.h"
#include "q4_bf16.h"

#if LLM_BF16
namespace llm {
namespace attn {

// 32 floats (a, then b) as two bf16 parts, x = high + low (low = bf16(x - high)), each 32 bf16 in
// order: pairs of consecutive elements in its 32-bit lanes.
inline void split_bf16(__m512 a, __m512 b, __m512i& high, __m512i& low) {
  const auto widen = [](__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); };
  high = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b, a));
  const __m512 ra = _mm512_sub_ps(a, widen(_mm512_castsi512_si256(high)));
  const __m512 rb = _mm512_sub_ps(b, widen(_mm512_extracti64x4_epi64(high, 1)));
  low = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(rb, ra));
}

// The group's G queries scaled, each as two bf16 parts (split_bf16): qb[4g + h] holds the high
// parts of head g's dims 32h .. 32h + 31, qb[4g + 2 + h] the low parts.
template <int G>
inline void split_queries(const float* qs, float scale, __m512i* qb) {
  const __m512 sv = _mm512_set1_ps(scale);
  for (int g = 0; g < G; ++g)
    for (int h = 0; h < 2; ++h) {
      const float* q = qs + g * D64 + 32 * h;
      split_bf16(_mm512_mul_ps(_mm512_loadu_ps(q), sv), _mm512_mul_ps(_mm512_loadu_ps(q + 16), sv), qb[4 * g + h],
                 qb[4 * g + 2 + h]);
    }
}

inline __m512 dot2(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
}

// acc + the pairs of k against the pair at q, broadcast inside the instruction ({1to16})
inline __m512 dot2_bcast(const uint32_t* q, __m512i k, __m512 acc) {
  asm("vdpbf16ps %1%{1to16%}, %2, %0" : "+v"(acc) : "m"(*q), "v"(k));
  return acc;
}

inline __m512i load_row(const uint16_t* p) { return _mm512_loadu_si512(p); }

// The row path: scores_d64's loop (attention_d64.h), prefetches included, on dot products.
template <int G>
void scores_d64_bf16(const float* qs, const uint16_t* kp, const uint16_t* vp, const int64_t* row, int64_t bs,
                     int64_t hkv, int64_t kvh, int64_t ctx, float scale, float* scores) {
  __m512i qb[4 * G];
  split_queries<G>(qs, scale, qb);
  for (int64_t p0 = 0; p0 < ctx; p0 += bs) {
    const uint16_t* base = kp + (row[p0 / bs] * bs * hkv + kvh) * D64;
    const uint16_t* vbase = vp + (row[p0 / bs] * bs * hkv + kvh) * D64;
    const char* next = p0 + bs < ctx ? reinterpret_cast<const char*>(kp + (row[p0 / bs + 1] * bs * hkv + kvh) * D64) : nullptr;
    for (int64_t p = p0; p < std::min(ctx, p0 + bs); ++p) {
      const uint16_t* k = base + (p - p0) * hkv * D64;
      if (next) prefetch_row<uint16_t, _MM_HINT_T1>(next + (p - p0) * hkv * D64 * 2);
      prefetch_row<uint16_t, _MM_HINT_T1>(reinterpret_cast<const char*>(vbase + (p - p0) * hkv * D64));
      const __m512i k0 = load_row(k), k1 = load_row(k + 32);
      for (int g = 0; g < G; ++g) {
        const __m512 high = dot2(dot2(_mm512_setzero_ps(), qb[4 * g], k0), qb[4 * g + 1], k1);
        scores[g * ctx + p] = simd::hsum(dot2(dot2(high, qb[4 * g + 2], k0), qb[4 * g + 3], k1));
      }
    }
  }
}

template <int G>
struct Bf16Leaves {  // leaf J: each head's pairs J and 16 + J, high parts then low, as in the row path
  const uint32_t* qp;  // [G][64] query pairs: 32 high, 32 low
  const uint32_t* kt;  // [32][W] key pairs
  template <int J>
  Lanes<G> at() const {
    Lanes<G> a;
    const __m512i k0 = _mm512_load_si512(kt + J * simd::W), k1 = _mm512_load_si512(kt + (16 + J) * simd::W);
    for (int g = 0; g < G; ++g) {
      const uint32_t* q = qp + g * 64;
      const __m512 high = dot2_bcast(q + 16 + J, k1, dot2_bcast(q + J, k0, _mm512_setzero_ps()));
      a.v[g] = dot2_bcast(q + 48 + J, k1, dot2_bcast(q + 32 + J, k0, high));
    }
    return a;
  }
};

// kt [32][W] pairs of W keys `stride` elements apart (one kv head's rows of a block), from k.
inline void transpose_key_pairs(const uint16_t* k, int64_t stride, uint32_t* kt) {
  for (int h = 0; h < 2; ++h) {  // pairs 16h .. 16h + 15
    __m512 r[16];
    for (int p = 0; p < 16; ++p) r[p] = _mm512_castsi512_ps(load_row(k + p * stride + 32 * h));
    transpose16(r, reinterpret_cast<float*>(kt + 16 * h * simd::W));
  }
}

// The blocked path: scores_rows_d64 (attention_rows.h) on dot products.
template <int G>
void scores_rows_d64_bf16(const float* q0, int64_t qstride, int64_t n, const int64_t* ctxs, const uint16_t* kp,
                          const int64_t* table, int64_t bs, int64_t hkv, int64_t kvh, float scale, float* scores,
                          int64_t ld) {
  AlignedVector<uint32_t> qp(n * G * 64);
  int64_t most = 0;
  for (int64_t r = 0; r < n; ++r) {
    __m512i qb[4 * G];
    split_queries<G>(q0 + r * qstride, scale, qb);
    for (int i = 0; i < 4 * G; ++i) _mm512_store_si512(qp.data() + (r * G * 4 + i) * 16, qb[i]);
    most = std::max(most, ctxs[r]);
  }
  alignas(64) uint32_t kt[32 * simd::W];
  for (int64_t p0 = 0; p0 < most; p0 += simd::W) {
    transpose_key_pairs(kp + ((table[p0 / bs] * bs + p0 % bs) * hkv + kvh) * D64, hkv * D64, kt);
    for (int64_t r = 0; r < n; ++r) {
      if (ctxs[r] <= p0) continue;
      const Lanes<G> s = node<G, 0, 1>(Bf16Leaves<G>{qp.data() + r * G * 64, kt});
      for (int g = 0; g < G; ++g) simd::store(scores + (r * G + g) * ld + p0, s.v[g]);
    }
  }
}

// The group's outputs: head g's weights are scores[g * ld, g * ld + ctx).
template <int G>
void values_d64_bf16(const float* scores, const uint16_t* vp, const int64_t* row, int64_t bs, int64_t hkv,
                     int64_t kvh, int64_t ctx, int64_t ld, float* os) {
  const int64_t pairs = (ctx + 1) / 2, padded = (pairs + 15) / 16 * 16;
  thread_local AlignedVector<uint32_t> weights;  // [2][G][padded]: the weights as bf16 pairs, high then low parts
  weights.resize(2 * G * padded);
  uint32_t* w = weights.data();
  uint32_t* wl = w + G * padded;
  for (int g = 0; g < G; ++g)
    for (int64_t p = 0; p < 2 * padded; p += 32) {
      const auto part = [&](int64_t at) {
        const int64_t left = std::clamp<int64_t>(ctx - at, 0, 16);
        return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << left) - 1), scores + g * ld + at);
      };
      __m512i high, low;
      split_bf16(part(p), part(p + 16), high, low);
      _mm512_store_si512(w + g * padded + p / 2, high);
      _mm512_store_si512(wl + g * padded + p / 2, low);
    }
  __m512 o[G][4];
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < 4; ++c) o[g][c] = _mm512_setzero_ps();
  const __m512i none = _mm512_setzero_si512();
  for (int64_t p0 = 0; p0 < ctx; p0 += bs) {
    const uint16_t* base = vp + (row[p0 / bs] * bs * hkv + kvh) * D64;
    const char* next = p0 + bs < ctx ? reinterpret_cast<const char*>(vp + (row[p0 / bs + 1] * bs * hkv + kvh) * D64) : nullptr;
    for (int64_t p = p0; p < std::min(ctx, p0 + bs); p += 2) {  // bs is even: a pair lies in one block
      const uint16_t* v = base + (p - p0) * hkv * D64;
      if (next) {
        prefetch_row<uint16_t>(next + (p - p0) * hkv * D64 * 2);
        prefetch_row<uint16_t>(next + (p + 1 - p0) * hkv * D64 * 2);
      }
      const bool both = p + 1 < ctx;
      const __m512i a0 = load_row(v), a1 = load_row(v + 32);
      const __m512i b0 = both ? load_row(v + hkv * D64) : none, b1 = both ? load_row(v + hkv * D64 + 32) : none;
      const __m512i x[4] = {_mm512_unpacklo_epi16(a0, b0), _mm512_unpackhi_epi16(a0, b0),
                            _mm512_unpacklo_epi16(a1, b1), _mm512_unpackhi_epi16(a1, b1)};
      for (int g = 0; g < G; ++g) {  // intrinsics: an asm product here kept the sums in memory
        const __m512i wv = _mm512_set1_epi32(static_cast<int32_t>(w[g * padded + p / 2]));
        const __m512i wlv = _mm512_set1_epi32(static_cast<int32_t>(wl[g * padded + p / 2]));
        for (int c = 0; c < 4; ++c) o[g][c] = dot2(dot2(o[g][c], x[c], wv), x[c], wlv);
      }
    }
  }
  // o[g][2h] lane 4L + m is dim 32h + 8L + m, o[g][2h + 1] lane 4L + m is dim 32h + 8L + 4 + m (m < 4)
  const __m512i first = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
  const __m512i second = _mm512_set_epi32(31, 30, 29, 28, 15, 14, 13, 12, 27, 26, 25, 24, 11, 10, 9, 8);
  for (int g = 0; g < G; ++g)
    for (int h = 0; h < 2; ++h) {
      float* out = os + g * D64 + 32 * h;
      simd::store(out, _mm512_permutex2var_ps(o[g][2 * h], first, o[g][2 * h + 1]));
      simd::store(out + 16, _mm512_permutex2var_ps(o[g][2 * h], second, o[g][2 * h + 1]));
    }
}

// The three entry points as attention_d64.h and attention_rows.h have them, for a bf16 cache.
inline bool scores_fast_bf16(int64_t d, int64_t groupsz, const float* qs, const uint16_t* kp, const uint16_t* vp,
                             const int64_t* row, int64_t bs, int64_t hkv, int64_t kvh, int64_t ctx, float scale,
                             float* scores) {
  if (d != D64 || bs % 2) return false;
  switch (groupsz) {
    case 1: scores_d64_bf16<1>(qs, kp, vp, row, bs, hkv, kvh, ctx, scale, scores); return true;
    case 2: scores_d64_bf16<2>(qs, kp, vp, row, bs, hkv, kvh, ctx, scale, scores); return true;
    case 3: scores_d64_bf16<3>(qs, kp, vp, row, bs, hkv, kvh, ctx, scale, scores); return true;
    case 4: scores_d64_bf16<4>(qs, kp, vp, row, bs, hkv, kvh, ctx, scale, scores); return true;
    default: return false;
  }
}

inline void values_fast_bf16(int64_t groupsz, const float* scores, const uint16_t* vp, const int64_t* row,
                             int64_t bs, int64_t hkv, int64_t kvh, int64_t ctx, int64_t ld, float* os) {
  switch (groupsz) {
    case 1: values_d64_bf16<1>(scores, vp, row, bs, hkv, kvh, ctx, ld, os); break;
    case 2: values_d64_bf16<2>(scores, vp, row, bs, hkv, kvh, ctx, ld, os); break;
    case 3: values_d64_bf16<3>(scores, vp, row, bs, hkv, kvh, ctx, ld, os); break;
    default: values_d64_bf16<4>(scores, vp, row, bs, hkv, kvh, ctx, ld, os); break;
  }
}

inline bool scores_rows_bf16(int64_t groupsz, const float* q0, int64_t qstride, int64_t n, const int64_t* ctxs,
                             const uint16_t* kp, const int64_t* table, int64_t bs, int64_t hkv, int64_t kvh,
                             float scale, float* scores, int64_t ld) {
  switch (groupsz) {
    case 1: scores_rows_d64_bf16<1>(q0, qstride, n, ctxs, kp, table, bs, hkv, kvh, scale, scores, ld); return true;
    case 2: scores_rows_d64_bf16<2>(q0, qstride, n, ctxs, kp, table, bs, hkv, kvh, scale, scores, ld); return true;
    case 3: scores_rows_d64_bf16<3>(q0, qstride, n, ctxs, kp, table, bs, hkv, kvh, scale, scores, ld); return true;
    case 4: scores_rows_d64_bf16<4>(q0, qstride, n, ctxs, kp, table, bs, hkv, kvh, scale, scores, ld); return true;
    default: return false;
  }
}

}  // namespace attn
}  // namespace llm
#endif
