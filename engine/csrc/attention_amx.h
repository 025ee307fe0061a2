// Attention's scores over a bf16 cache on AMX tiles, for every row where the tiles are granted:
// decoding rows one at a time and a prefill chunk's rows together, so that a row's bits never depend
// on how its prompt was chunked or what else is in the step.
//
// The query rows are the tile rows: each head of the group twice, its high bf16 part, then its low
// part (split_queries: q * scale = high + low, as the vector paths split it); a tile row holds 16
// pairs of dims, so dims 0-31 and 32-63 are two tiles. The keys are the other operand: W positions
// of one kv head transposed into pairs, kt[P * W + j] = key j's pair P (attention_bf16.h's blocked
// path builds the same). A score is C[high row] + C[low row] of one accumulator tile, each made by two
// TDPBF16PS (dims 0-31, then 32-63). Every element of a tile product depends only on its own row of
// queries and its own column of keys, so a row's scores are the same whichever rows share its tiles.
//
// Against the vector paths (about 12 VDPBF16PS a position for a group of 3 heads, a row at a time, or
// with the keys shared by a chunk's rows), a tile product makes 16 x 16 scores' halves in one
// instruction. What is left per W positions: the keys' transpose (shared by a unit's rows), two tile
// loads and a store a tile of 16 query rows, and the high + low sums.
#pragma once

#include "amx.h"
#include "attention_bf16.h"

#if LLM_AMX && LLM_BF16
namespace llm {
namespace attn {

// The longest context among each tile's rows (16 tile rows, `per` of them a query row): the
// positions a tile's products must cover. Reused by each thread's next call.
inline const std::vector<int64_t>& tile_reach(int64_t n, int64_t per, const int64_t* ctxs) {
  thread_local std::vector<int64_t> reach;
  reach.assign((n * per + 15) / 16, 0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t t = r * per / 16; t <= ((r + 1) * per - 1) / 16; ++t) reach[t] = std::max(reach[t], ctxs[r]);
  return reach;
}

// scores[(r * G + g) * ld + p] for rows r < n (query group q0 + r * qstride, context ctxs[r]) and
// positions p < ctxs[r], of one kv head, as scores_rows_d64_bf16 lays them out. Positions from
// ctxs[r] to the next multiple of W get values that mean nothing. Needs bs % W == 0 and the tile
// configuration of amx.h (tiles_16x64) on this thread.
template <int G>
void scores_rows_amx(const float* q0, int64_t qstride, int64_t n, const int64_t* ctxs, const uint16_t* kp,
                     const uint16_t* vp, const int64_t* table, int64_t bs, int64_t hkv, int64_t kvh, float scale,
                     float* scores, int64_t ld) {
  constexpr int64_t kPer = 2 * G;  // tile rows a query row: each head's high part, then its low part
  const int64_t rows = n * kPer, tiles = (rows + 15) / 16;
  thread_local AlignedVector<uint32_t> qa;  // [2 dim halves][tiles * 16 rows][16 pairs]
  qa.assign(2 * tiles * 16 * 16, 0u);
  for (int64_t r = 0; r < n; ++r) {
    __m512i qb[4 * G];
    split_queries<G>(q0 + r * qstride, scale, qb);
    for (int g = 0; g < G; ++g)
      for (int part = 0; part < 2; ++part)
        for (int h = 0; h < 2; ++h)
          _mm512_store_si512(qa.data() + (h * tiles * 16 + r * kPer + 2 * g + part) * 16, qb[4 * g + 2 * part + h]);
  }
  const std::vector<int64_t>& reach = tile_reach(n, kPer, ctxs);
  const int64_t most = *std::max_element(reach.begin(), reach.end());
  alignas(64) uint32_t kt[32 * simd::W];
  alignas(64) float c[16 * 16];
  const auto at = [&](const uint16_t* cache, int64_t p) {
    return cache + ((table[p / bs] * bs + p % bs) * hkv + kvh) * D64;
  };
  for (int64_t p0 = 0; p0 < most; p0 += simd::W) {
    // into L2 ahead, as the vector paths do: the next W keys, and these W positions' values for the
    // values pass (a decode step's context comes from DRAM through its block table)
    for (int64_t p = 0; p < simd::W; ++p) {
      if (p0 + simd::W < most) prefetch_row<uint16_t, _MM_HINT_T1>(reinterpret_cast<const char*>(at(kp, p0 + simd::W + p)));
      prefetch_row<uint16_t, _MM_HINT_T1>(reinterpret_cast<const char*>(at(vp, p0 + p)));
    }
    transpose_key_pairs(at(kp, p0), hkv * D64, kt);
    tiles_read_memory();  // kt, and qa on the first pass
    _tile_loadd(2, kt, 64);
    _tile_loadd(3, kt + 16 * simd::W, 64);
    for (int64_t t = 0; t < tiles; ++t) {
      if (reach[t] <= p0) continue;
      _tile_zero(4);
      _tile_loadd(0, qa.data() + t * 16 * 16, 64);
      _tile_loadd(1, qa.data() + (tiles + t) * 16 * 16, 64);
      _tile_dpbf16ps(4, 0, 2);
      _tile_dpbf16ps(4, 1, 3);
      _tile_stored(4, c, 64);
      for (int64_t i = t * 16; i < std::min(rows, t * 16 + 16); i += 2) {
        const int64_t r = i / kPer, g = i % kPer / 2, at = i - t * 16;
        if (ctxs[r] <= p0) continue;
        simd::store(scores + (r * G + g) * ld + p0, simd::add(simd::load(c + at * 16), simd::load(c + (at + 1) * 16)));
      }
    }
  }
}

// A tile-product's 4 accumulators (tiles 4-7) += A tile 0 times the B tiles at b, b + 256, ... (uint32).
inline void values_chunk(const uint32_t* b) {
  _tile_loadd(1, b, 64);
  _tile_dpbf16ps(4, 0, 1);
  _tile_loadd(2, b + 256, 64);
  _tile_dpbf16ps(5, 0, 2);
  _tile_loadd(3, b + 512, 64);
  _tile_dpbf16ps(6, 0, 3);
  _tile_loadd(1, b + 768, 64);
  _tile_dpbf16ps(7, 0, 1);
}

// The values pass of rows r < n of one kv head on AMX tiles: os + r * ostride gets the group's G
// heads' outputs, from the softmax weights at scores[(r * G + g) * ld + p], p < ctxs[r].
//
// The tile rows are the scores': each head's weights twice, as a high and a low bf16 part, in pairs
// of positions (zero past a row's context). The other operand is 32 positions' value rows made pairs
// of positions, (v[p][d], v[p + 1][d]), with VPUNPCKLWD/HWD as values_d64_bf16 makes them (zero rows
// past the longest context): four tiles of 16 dims each, whose dims come in each 128 bits' order and
// are put back in order at the end. An output is the high rows' sum plus the low rows'.
template <int G>
void values_rows_amx(const float* scores, int64_t ld, int64_t n, const int64_t* ctxs, const uint16_t* vp,
                     const int64_t* table, int64_t bs, int64_t hkv, int64_t kvh, float* os, int64_t ostride) {
  constexpr int64_t kPer = 2 * G;
  const int64_t rows = n * kPer, tiles = (rows + 15) / 16;
  const int64_t most = *std::max_element(ctxs, ctxs + n), chunks = (most + 31) / 32, pairs = chunks * 16;
  thread_local AlignedVector<uint32_t> wa;  // [tiles * 16 rows][pairs]
  thread_local AlignedVector<uint32_t> vb;  // [chunks][4 dim groups][16 position pairs][16 dims]
  wa.assign(tiles * 16 * pairs, 0u);
  for (int64_t r = 0; r < n; ++r) {
    for (int g = 0; g < G; ++g) {
      const float* w = scores + (r * G + g) * ld;
      uint32_t* high = wa.data() + (r * kPer + 2 * g) * pairs;
      const auto part = [&](int64_t at) {
        const int64_t left = std::clamp<int64_t>(ctxs[r] - at, 0, 16);
        return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << left) - 1), w + at);
      };
      for (int64_t p = 0; p < ctxs[r]; p += 32) {
        __m512i hi, lo;
        split_bf16(part(p), part(p + 16), hi, lo);
        _mm512_storeu_si512(high + p / 2, hi);
        _mm512_storeu_si512(high + pairs + p / 2, lo);
      }
    }
  }
  vb.resize(chunks * 4 * 16 * 16);
  const __m512i none = _mm512_setzero_si512(), exponent = _mm512_set1_epi16(0x7F80);
  const int64_t least = *std::min_element(ctxs, ctxs + n);
  __mmask32 non_finite = 0;  // a value past some row's context is Inf or NaN
  for (int64_t c = 0; c < chunks; ++c)
    for (int64_t k = 0; k < 16; ++k) {
      const int64_t p = 32 * c + 2 * k;
      const auto row = [&](int64_t at) { return vp + ((table[at / bs] * bs + at % bs) * hkv + kvh) * D64; };
      const bool a = p < most, b = p + 1 < most;
      const __m512i a0 = a ? load_row(row(p)) : none, a1 = a ? load_row(row(p) + 32) : none;
      const __m512i b0 = b ? load_row(row(p + 1)) : none, b1 = b ? load_row(row(p + 1) + 32) : none;
      if (p + 1 >= least && n > 1)
        for (const __m512i x : {a0, a1, b0, b1})
          non_finite |= _mm512_cmpeq_epi16_mask(_mm512_and_si512(x, exponent), exponent);
      uint32_t* out = vb.data() + (c * 4 * 16 + k) * 16;
      _mm512_store_si512(out, _mm512_unpacklo_epi16(a0, b0));
      _mm512_store_si512(out + 256, _mm512_unpackhi_epi16(a0, b0));
      _mm512_store_si512(out + 512, _mm512_unpacklo_epi16(a1, b1));
      _mm512_store_si512(out + 768, _mm512_unpackhi_epi16(a1, b1));
    }
  // A row's zero weights meet the other rows' values, and 0 x Inf is NaN: where such a value exists
  // (a model whose activations overflowed), each row is made alone, as a decoding row is, so it
  // gets its own bits and no earlier row of a chunk is poisoned by a later one.
  if (non_finite) {
    for (int64_t r = 0; r < n; ++r)
      values_rows_amx<G>(scores + r * G * ld, ld, 1, ctxs + r, vp, table, bs, hkv, kvh, os + r * ostride, ostride);
    return;
  }
  const std::vector<int64_t>& reach = tile_reach(n, kPer, ctxs);  // after the fallback: its calls reuse it
  tiles_read_memory();  // wa and vb
  // C tile j's lane 4L + m is dim 8L + m of dims 32h .. (j = 2h) or 8L + 4 + m (j = 2h + 1), m < 4
  const __m512i first = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
  const __m512i second = _mm512_set_epi32(31, 30, 29, 28, 15, 14, 13, 12, 27, 26, 25, 24, 11, 10, 9, 8);
  alignas(64) float cb[4][16 * 16];
  for (int64_t t = 0; t < tiles; ++t) {
    _tile_zero(4);
    _tile_zero(5);
    _tile_zero(6);
    _tile_zero(7);
    for (int64_t c = 0; c * 32 < reach[t]; ++c) {
      _tile_loadd(0, wa.data() + t * 16 * pairs + c * 16, pairs * 4);
      values_chunk(vb.data() + c * 4 * 256);
    }
    _tile_stored(4, cb[0], 64);
    _tile_stored(5, cb[1], 64);
    _tile_stored(6, cb[2], 64);
    _tile_stored(7, cb[3], 64);
    for (int64_t i = t * 16; i < std::min(rows, t * 16 + 16); i += 2) {
      const int64_t r = i / kPer, g = i % kPer / 2, at = i - t * 16;
      float* out = os + r * ostride + g * D64;
      for (int h = 0; h < 2; ++h) {
        const __m512 x = simd::add(simd::load(cb[2 * h] + at * 16), simd::load(cb[2 * h] + (at + 1) * 16));
        const __m512 y = simd::add(simd::load(cb[2 * h + 1] + at * 16), simd::load(cb[2 * h + 1] + (at + 1) * 16));
        simd::store(out + 32 * h, _mm512_permutex2var_ps(x, first, y));
        simd::store(out + 32 * h + 16, _mm512_permutex2var_ps(x, second, y));
      }
    }
  }
}

inline void values_rows_amx(int64_t groupsz, const float* scores, int64_t ld, int64_t n, const int64_t* ctxs,
                            const uint16_t* vp, const int64_t* table, int64_t bs, int64_t hkv, int64_t kvh, float* os,
                            int64_t ostride) {
  switch (groupsz) {
    case 1: values_rows_amx<1>(scores, ld, n, ctxs, vp, table, bs, hkv, kvh, os, ostride); break;
    case 2: values_rows_amx<2>(scores, ld, n, ctxs, vp, table, bs, hkv, kvh, os, ostride); break;
    case 3: values_rows_amx<3>(scores, ld, n, ctxs, vp, table, bs, hkv, kvh, os, ostride); break;
    default: values_rows_amx<4>(scores, ld, n, ctxs, vp, table, bs, hkv, kvh, os, ostride); break;
  }
}

inline void scores_rows_amx(int64_t groupsz, const float* q0, int64_t qstride, int64_t n, const int64_t* ctxs,
                            const uint16_t* kp, const uint16_t* vp, const int64_t* table, int64_t bs, int64_t hkv,
                            int64_t kvh, float scale, float* scores, int64_t ld) {
  switch (groupsz) {
    case 1: scores_rows_amx<1>(q0, qstride, n, ctxs, kp, vp, table, bs, hkv, kvh, scale, scores, ld); break;
    case 2: scores_rows_amx<2>(q0, qstride, n, ctxs, kp, vp, table, bs, hkv, kvh, scale, scores, ld); break;
    case 3: scores_rows_amx<3>(q0, qstride, n, ctxs, kp, vp, table, bs, hkv, kvh, scale, scores, ld); break;
    default: scores_rows_amx<4>(q0, qstride, n, ctxs, kp, vp, table, bs, hkv, kvh, scale, scores, ld); break;
  }
}

}  // namespace attn
}  // namespace llm
#endif
