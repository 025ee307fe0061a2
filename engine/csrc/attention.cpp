// Rotary embedding with the paged KV write, and decode attention that reads keys and values
// through each sequence's block table in place (no gathered copy of its context).
//
//   k_cache, v_cache  [num_blocks, block_size, Hkv, D]   (one layer's; float32 or bfloat16)
//   position p of a sequence lives in block table[p / block_size], slot p % block_size
//   query head h reads kv head h / (Hq / Hkv)   (grouped-query attention, Hugging Face's repeat_kv)
#include "common.h"
#include "pool.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace llm {
namespace {

template <typename T>
inline float to_f(T v) {
  return static_cast<float>(v);
}

template <typename T>
void rope_store_impl(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& ssin, at::Tensor& kc,
                     at::Tensor& vc, const at::Tensor& slots, int64_t hq, int64_t hkv, at::Tensor& q) {
  const int64_t t = qkv.size(0), d = cos.size(1), half = d / 2, width = qkv.size(1);
  const float *src = qkv.data_ptr<float>(), *c = cos.data_ptr<float>(), *s = ssin.data_ptr<float>();
  const int64_t* slot = slots.data_ptr<int64_t>();
  T *kp = kc.data_ptr<T>(), *vp = vc.data_ptr<T>();
  float* qp = q.data_ptr<float>();
  // tokens in chunks of the pool (each writes only its own slots): a decode step's few run inline
  Pool::get().for_each(t, 32, [&](int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const float *row = src + i * width, *ci = c + i * d, *si = s + i * d;
    // x * cos + roll(x, D/2) * signed_sin, head by head: q heads, then k heads
    float rotated[512];  // one head: D <= 512 (checked)
    for (int64_t h = 0; h < hq + hkv; ++h) {
      const float* x = row + h * d;
      float* dst = h < hq ? qp + (i * hq + h) * d : rotated;
      for (int64_t j = 0; j < half; ++j) dst[j] = x[j] * ci[j] + x[j + half] * si[j];  // (vectorized)
      for (int64_t j = half; j < d; ++j) dst[j] = x[j] * ci[j] + x[j - half] * si[j];
      if (h >= hq) {
        T* kd = kp + (slot[i] * hkv + (h - hq)) * d;
        for (int64_t j = 0; j < d; ++j) kd[j] = static_cast<T>(rotated[j]);
      }
    }
    const float* v = row + (hq + hkv) * d;
    T* vd = vp + slot[i] * hkv * d;
    for (int64_t j = 0; j < hkv * d; ++j) vd[j] = static_cast<T>(v[j]);
  }
  });
}

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
// however many columns a pass makes).
template <int G, int Cols, typename T>
void weighted_values_cols(const float* scores, const T* vp, const int64_t* row, int64_t bs, int64_t hkv,
                          int64_t kvh, int64_t ctx, int64_t c0, float* os) {
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
        const simd::V w = simd::set1(scores[g * ctx + p]);
        for (int c = 0; c < Cols; ++c) o[g][c] = simd::fmadd(w, vv[c], o[g][c]);
      }
    }
  }
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < Cols; ++c) simd::store(os + g * D64 + (c0 + c) * simd::W, o[g][c]);
}

template <int G, typename T>
void weighted_values_d64(const float* scores, const T* vp, const int64_t* row, int64_t bs, int64_t hkv,
                         int64_t kvh, int64_t ctx, float* os) {
  // accumulators a pass: every column on AVX-512 (G x 4 of 32 registers), at most 8 of AVX2's 16
  constexpr int Cols = LLM_AVX512 ? static_cast<int>(C64) : (G == 1 ? 8 : G == 2 ? 4 : 2);
  for (int64_t c0 = 0; c0 < C64; c0 += Cols) weighted_values_cols<G, Cols>(scores, vp, row, bs, hkv, kvh, ctx, c0, os);
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
                 int64_t kvh, int64_t ctx, float* os) {
  switch (groupsz) {
    case 1: weighted_values_d64<1>(scores, vp, row, bs, hkv, kvh, ctx, os); break;
    case 2: weighted_values_d64<2>(scores, vp, row, bs, hkv, kvh, ctx, os); break;
    case 3: weighted_values_d64<3>(scores, vp, row, bs, hkv, kvh, ctx, os); break;
    default: weighted_values_d64<4>(scores, vp, row, bs, hkv, kvh, ctx, os); break;
  }
}
#endif

template <typename T>
void decode_impl(const at::Tensor& q, const at::Tensor& kc, const at::Tensor& vc, const at::Tensor& tables,
                 const at::Tensor& lens, at::Tensor& out) {
  const int64_t b = q.size(0), hq = q.size(1), d = q.size(2), bs = kc.size(1), hkv = kc.size(2);
  const int64_t groupsz = hq / hkv, width = tables.size(1);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const float* qp = q.data_ptr<float>();
  const T *kp = kc.data_ptr<T>(), *vp = vc.data_ptr<T>();
  const int64_t *tab = tables.data_ptr<int64_t>(), *len = lens.data_ptr<int64_t>();
  float* op = out.data_ptr<float>();
  // From 4 sequences on, a chunk is one sequence's kv heads: their rows interleave in each block, so
  // the lines one head's pass brings into this core's L2 serve the next head's (measured on a 2-core
  // Sapphire Rapids at batch 64 and 192 positions: 0.63 -> 0.52 ms a layer, against one head a chunk,
  // where the two cores each fetched every block). Fewer sequences keep a head a chunk, so both
  // cores have work.
  Pool::get().for_each(b * hkv, b >= 4 ? hkv : 1, [&](int64_t begin, int64_t end) {
    AlignedVector<float> scores;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t seq = task / hkv, kvh = task % hkv, ctx = len[seq];
      const float* qs = qp + (seq * hq + kvh * groupsz) * d;  // the group's query heads, [groupsz, D]
      scores.assign(groupsz * ctx, 0.0f);
      const int64_t* row = tab + seq * width;  // the sequence's block table
      bool fast = false;
#if LLM_SIMD
      fast = scores_fast(d, groupsz, qs, kp, vp, row, bs, hkv, kvh, ctx, scale, scores.data());
#endif
      for (int64_t p = 0; p < ctx && !fast; ++p) {
        const int64_t slot = tab[seq * width + p / bs] * bs + p % bs;
        const T* k = kp + (slot * hkv + kvh) * d;
        for (int64_t g = 0; g < groupsz; ++g) {
          const float* qv = qs + g * d;
          float dot = 0.0f;
          int64_t j = 0;
#if LLM_SIMD
          simd::V acc = simd::zero();
          for (; j + simd::W <= d; j += simd::W) acc = simd::fmadd(simd::load(qv + j), simd::load(k + j), acc);
          dot = simd::hsum(acc);
#endif
          for (; j < d; ++j) dot += qv[j] * to_f(k[j]);
          scores[g * ctx + p] = dot * scale;
        }
      }
      for (int64_t g = 0; g < groupsz; ++g) {  // softmax over the context
        float* sc = scores.data() + g * ctx;
        float mx = -std::numeric_limits<float>::infinity(), sum = 0.0f;
        int64_t p = 0;
#if LLM_SIMD
        // the maximum a vector at a time: a scalar max is one dependent instruction a position
        // (a quarter of decode attention's time at 192 positions, Sapphire Rapids)
        simd::V mvec = simd::set1(mx);
        for (; p + simd::W <= ctx; p += simd::W) mvec = simd::max(mvec, simd::load(sc + p));
        mx = simd::hmax(mvec);
#endif
        for (; p < ctx; ++p) mx = std::max(mx, sc[p]);
        p = 0;
#if LLM_SIMD
        const simd::V mv = simd::set1(mx);
        simd::V sv = simd::zero();
        for (; p + simd::W <= ctx; p += simd::W) {
          const simd::V e = simd::exp(simd::sub(simd::load(sc + p), mv));
          simd::store(sc + p, e);
          sv = simd::add(sv, e);
        }
        sum = simd::hsum(sv);
#endif
        for (; p < ctx; ++p) sum += (sc[p] = std::exp(sc[p] - mx));
        const float inv = 1.0f / sum;
        for (int64_t p = 0; p < ctx; ++p) sc[p] *= inv;
      }
      float* os = op + (seq * hq + kvh * groupsz) * d;
#if LLM_SIMD
      if (fast) {
        values_fast(groupsz, scores.data(), vp, row, bs, hkv, kvh, ctx, os);
        continue;
      }
#endif
      std::fill(os, os + groupsz * d, 0.0f);
      for (int64_t p = 0; p < ctx; ++p) {
        const int64_t slot = tab[seq * width + p / bs] * bs + p % bs;
        const T* v = vp + (slot * hkv + kvh) * d;
        for (int64_t g = 0; g < groupsz; ++g) {
          const float w = scores[g * ctx + p];
          float* o = os + g * d;
          int64_t j = 0;
#if LLM_SIMD
          const simd::V wv = simd::set1(w);
          for (; j + simd::W <= d; j += simd::W) simd::store(o + j, simd::fmadd(wv, simd::load(v + j), simd::load(o + j)));
#endif
          for (; j < d; ++j) o[j] += w * to_f(v[j]);
        }
      }
    }
  });
}

void check_cache(const at::Tensor& kc, const at::Tensor& vc) {
  TORCH_CHECK(kc.dim() == 4 && kc.is_contiguous() && vc.is_contiguous() && kc.sizes() == vc.sizes() &&
                  kc.scalar_type() == vc.scalar_type() &&
                  (kc.scalar_type() == at::kFloat || kc.scalar_type() == at::kBFloat16),
              "k/v caches must be contiguous [blocks, block_size, Hkv, D] float32 or bfloat16 tensors");
}

}  // namespace

at::Tensor rope_store(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& ssin, at::Tensor& kc,
                      at::Tensor& vc, const at::Tensor& slots, int64_t hq, int64_t hkv) {
  check_f32_2d(qkv, "qkv");
  check_f32_2d(cos, "cos");
  check_f32_2d(ssin, "signed_sin");
  check_cache(kc, vc);
  const int64_t t = qkv.size(0), d = cos.size(1);
  TORCH_CHECK(cos.size(0) == t && ssin.sizes() == cos.sizes() && qkv.size(1) == (hq + 2 * hkv) * d &&
                  kc.size(2) == hkv && kc.size(3) == d && d % 2 == 0 && d <= 512,
              "rope_store: shapes do not agree");
  TORCH_CHECK(slots.dim() == 1 && slots.size(0) == t && slots.scalar_type() == at::kLong && slots.is_contiguous(),
              "slots must be a contiguous int64 vector, one per token");
  at::Tensor q = at::empty({t, hq, d}, qkv.options());
  if (kc.scalar_type() == at::kFloat) rope_store_impl<float>(qkv, cos, ssin, kc, vc, slots, hq, hkv, q);
  else rope_store_impl<at::BFloat16>(qkv, cos, ssin, kc, vc, slots, hq, hkv, q);
  return q;
}

at::Tensor paged_decode_attention(const at::Tensor& q, const at::Tensor& kc, const at::Tensor& vc,
                                  const at::Tensor& tables, const at::Tensor& lens) {
  TORCH_CHECK(q.dim() == 3 && q.scalar_type() == at::kFloat && q.is_contiguous(),
              "q must be a contiguous [B, Hq, D] float32 tensor");
  check_cache(kc, vc);
  TORCH_CHECK(kc.size(3) == q.size(2) && q.size(1) % kc.size(2) == 0, "q and the caches do not agree");
  TORCH_CHECK(tables.dim() == 2 && tables.size(0) == q.size(0) && tables.scalar_type() == at::kLong &&
                  tables.is_contiguous() && lens.dim() == 1 && lens.size(0) == q.size(0) &&
                  lens.scalar_type() == at::kLong && lens.is_contiguous(),
              "tables [B, W] and lens [B] must be contiguous int64 tensors");
  const int64_t* len = lens.data_ptr<int64_t>();
  for (int64_t i = 0; i < q.size(0); ++i)
    TORCH_CHECK(len[i] >= 1 && len[i] <= tables.size(1) * kc.size(1), "a context length exceeds its table");
  at::Tensor out = at::empty_like(q);
  if (kc.scalar_type() == at::kFloat) decode_impl<float>(q, kc, vc, tables, lens, out);
  else decode_impl<at::BFloat16>(q, kc, vc, tables, lens, out);
  return out;
}

}  // namespace llm
