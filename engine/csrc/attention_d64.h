// Decode attention's fast path for the common shape (head dim 64, up to 4 query heads per kv head):
// one query row against its sequence's keys and values in the paged cache (engine/csrc/attention.cpp).
#pragma once

#include "common.h"

#include <algorithm>

namespace llm {
namespace attn {

#if LLM_SIMD
// The common shape (head dim 64, up to 4 query heads per kv head), with each head's query and
// output held in registers across the context: a key or value row is loaded (and widened from
// bf16) once for the whole group, and no output row goes through memory per position. AVX2's 16
// registers cannot hold a group's queries and outputs (3 heads x 8 vectors each): there the
// queries are read from L1 as the products' memory operands, and the outputs are made a few
// vectors of the head dim at a time (`Cols`), each pass over the context reading only those
// columns of each value row.
constexpr int64_t D64 = 64, C64 = D64 / simd::W;

// One head's row (D64 values) into the caches: L1 by default, or L2 (_MM_HINT_T1), which on a
// 2-core Zen 4 lets more of the scores pass's misses be in flight at once (below).
template <typename T, _mm_hint Hint = _MM_HINT_T0>
inline void prefetch_row(const char* row) {
  for (int64_t line = 0; line < D64 * static_cast<int64_t>(sizeof(T)); line += 64) _mm_prefetch(row + line, Hint);
}

template <int G, typename T>
void scores_d64(const float* qs, const T* kp, const T* vp, const int64_t* row, int64_t bs, int64_t hkv,
                int64_t kvh, int64_t ctx, float scale, float* scores) {
#if LLM_AVX2
  alignas(32) float qsc[G * D64];  // the group's queries, scaled: read by the products below
  for (int64_t i = 0; i < G * D64; ++i) qsc[i] = qs[i] * scale;
  const auto query = [&](int g, int64_t c) { return simd::load(qsc + g * D64 + c * simd::W); };
#else
  simd::V qv[G][C64];
  for (int g = 0; g < G; ++g)
    for (int64_t c = 0; c < C64; ++c) qv[g][c] = simd::mul(simd::load(qs + g * D64 + c * simd::W), simd::set1(scale));
  const auto query = [&](int g, int64_t c) { return qv[g][c]; };
#endif
  for (int64_t p0 = 0; p0 < ctx; p0 += bs) {  // block by block: no division per position
    const T* base = kp + (row[p0 / bs] * bs * hkv + kvh) * D64;
    const T* vbase = vp + (row[p0 / bs] * bs * hkv + kvh) * D64;
    const char* next = p0 + bs < ctx ? reinterpret_cast<const char*>(kp + (row[p0 / bs + 1] * bs * hkv + kvh) * D64) : nullptr;
    for (int64_t p = p0; p < std::min(ctx, p0 + bs); ++p) {
      const T* k = base + (p - p0) * hkv * D64;
      // The next block's key row and this position's value row (for the pass after the softmax,
      // which then reads from cache: 30 layers at batch 64 and 192 positions from DRAM, 17-18.5 ->
      // 14-16 ms on Sapphire Rapids), both into L2: L1's few miss buffers held the prefetches back
      // (the same on 2 Zen 4 cores, best of 3 alternating runs: 16.1-17.9 -> 12.6-13.2 ms).
      if (next) prefetch_row<T, _MM_HINT_T1>(next + (p - p0) * hkv * D64 * sizeof(T));
      prefetch_row<T, _MM_HINT_T1>(reinterpret_cast<const char*>(vbase + (p - p0) * hkv * D64));
      simd::V kv[C64];
      for (int64_t c = 0; c < C64; ++c) kv[c] = simd::load(k + c * simd::W);
      for (int g = 0; g < G; ++g) {
        simd::V acc = simd::mul(query(g, 0), kv[0]);
        for (int64_t c = 1; c < C64; ++c) acc = simd::fmadd(query(g, c), kv[c], acc);
        scores[g * ctx + p] = simd::hsum(acc);
      }
    }
  }
}

// Columns c0 .. c0 + Cols of the group's outputs (each a sum over the context in position order,
// however many columns a pass makes). Head g's weights are scores[g * ld, g * ld + ctx).
template <int G, int Cols, typename T>
void weighted_values_cols(const float* scores, const T* vp, const int64_t* row, int64_t bs, int64_t hkv,
                          int64_t kvh, int64_t ctx, int64_t ld, int64_t c0, float* os) {
  simd::V o[G][Cols];
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < Cols; ++c) o[g][c] = simd::zero();
  for (int64_t p0 = 0; p0 < ctx; p0 += bs) {
    const T* base = vp + (row[p0 / bs] * bs * hkv + kvh) * D64 + c0 * simd::W;
    const char* next = p0 + bs < ctx ? reinterpret_cast<const char*>(vp + (row[p0 / bs + 1] * bs * hkv + kvh) * D64) : nullptr;
    for (int64_t p = p0; p < std::min(ctx, p0 + bs); ++p) {
      const T* v = base + (p - p0) * hkv * D64;
      if (next && c0 == 0) prefetch_row<T>(next + (p - p0) * hkv * D64 * sizeof(T));
      simd::V vv[Cols];
      for (int c = 0; c < Cols; ++c) vv[c] = simd::load(v + c * simd::W);
      for (int g = 0; g < G; ++g) {
        const simd::V w = simd::set1(scores[g * ld + p]);
        for (int c = 0; c < Cols; ++c) o[g][c] = simd::fmadd(w, vv[c], o[g][c]);
      }
    }
  }
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < Cols; ++c) simd::store(os + g * D64 + (c0 + c) * simd::W, o[g][c]);
}

template <int G, typename T>
void weighted_values_d64(const float* scores, const T* vp, const int64_t* row, int64_t bs, int64_t hkv,
                         int64_t kvh, int64_t ctx, int64_t ld, float* os) {
  // accumulators a pass: every column on AVX-512 (G x 4 of 32 registers), at most 8 of AVX2's 16
  constexpr int Cols = LLM_AVX512 ? static_cast<int>(C64) : (G == 1 ? 8 : G == 2 ? 4 : 2);
  for (int64_t c0 = 0; c0 < C64; c0 += Cols) weighted_values_cols<G, Cols>(scores, vp, row, bs, hkv, kvh, ctx, ld, c0, os);
}

// True when the fast path ran the group's scores (then `values` runs its output the same way).
template <typename T>
bool scores_fast(int64_t d, int64_t groupsz, const float* qs, const T* kp, const T* vp, const int64_t* row,
                 int64_t bs, int64_t hkv, int64_t kvh, int64_t ctx, float scale, float* scores) {
  if (d != D64) return false;
  switch (groupsz) {
    case 1: scores_d64<1>(qs, kp, vp, row, bs, hkv, kvh, ctx, scale, scores); return true;
    case 2: scores_d64<2>(qs, kp, vp, row, bs, hkv, kvh, ctx, scale, scores); return true;
    case 3: scores_d64<3>(qs, kp, vp, row, bs, hkv, kvh, ctx, scale, scores); return true;
    case 4: scores_d64<4>(qs, kp, vp, row, bs, hkv, kvh, ctx, scale, scores); return true;
    default: return false;
  }
}

template <typename T>
void values_fast(int64_t groupsz, const float* scores, const T* vp, const int64_t* row, int64_t bs, int64_t hkv,
                 int64_t kvh, int64_t ctx, int64_t ld, float* os) {
  switch (groupsz) {
    case 1: weighted_values_d64<1>(scores, vp, row, bs, hkv, kvh, ctx, ld, os); break;
    case 2: weighted_values_d64<2>(scores, vp, row, bs, hkv, kvh, ctx, ld, os); break;
    case 3: weighted_values_d64<3>(scores, vp, row, bs, hkv, kvh, ctx, ld, os); break;
    default: weighted_values_d64<4>(scores, vp, row, bs, hkv, kvh, ctx, ld, os); break;
  }
}
#endif

}  // namespace attn
}  // namespace llm
