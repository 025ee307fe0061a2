// Decode attention that reads keys and values through each sequence's block table in place (no
// gathered copy of its context); rope_store.cpp writes them.
//
//   k_cache, v_cache  [num_blocks, block_size, Hkv, D]   (one layer's; float32 or bfloat16)
//   position p of a sequence lives in block table[p / block_size], slot p % block_size
//   query head h reads kv head h / (Hq / Hkv)   (grouped-query attention, Hugging Face's repeat_kv)
#include "attention_amx.h"
#include "attention_bf16.h"
#include "attention_rows.h"
#include "common.h"
#include "ops.h"
#include "pool.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <type_traits>
#include <vector>

namespace llm {
namespace {

template <typename T>
inline float to_f(T v) {
  return static_cast<float>(v);
}

// A bf16 cache on AVX-512 BF16: the dot-product paths (attention_bf16.h)
template <typename T>
constexpr bool kBf16Dots = LLM_BF16 && std::is_same_v<T, at::BFloat16>;

std::atomic<bool> amx_scores{true};  // set_amx_attention

template <typename T>
inline const uint16_t* raw(const T* p) {
  return reinterpret_cast<const uint16_t*>(p);
}

// Each of a group's heads' scores (head g's at sc + g * ld, `ctx` of them) into softmax weights.
void softmax_heads(float* scores, int64_t ld, int64_t ctx, int64_t groupsz) {
  for (int64_t g = 0; g < groupsz; ++g) {
    float* sc = scores + g * ld;
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
}

struct Shape {
  int64_t hq, hkv, groupsz, d, bs;
  float scale;
};

// One query row's group of heads (kv head kvh) over its `ctx` positions through block table `row`.
template <typename T>
void attend_row(const Shape& s, const float* qs, const T* kp, const T* vp, const int64_t* row, int64_t kvh,
                int64_t ctx, float* os, AlignedVector<float>& scores) {
  const int64_t groupsz = s.groupsz, d = s.d, bs = s.bs, hkv = s.hkv;
  scores.assign(groupsz * ctx, 0.0f);
  bool fast = false;
#if LLM_BF16
  if constexpr (kBf16Dots<T>)
    fast = attn::scores_fast_bf16(d, groupsz, qs, raw(kp), raw(vp), row, bs, hkv, kvh, ctx, s.scale, scores.data());
  else
#endif
#if LLM_SIMD
  fast = attn::scores_fast(d, groupsz, qs, kp, vp, row, bs, hkv, kvh, ctx, s.scale, scores.data());
#endif
  for (int64_t p = 0; p < ctx && !fast; ++p) {
    const T* k = kp + ((row[p / bs] * bs + p % bs) * hkv + kvh) * d;
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
      scores[g * ctx + p] = dot * s.scale;
    }
  }
  softmax_heads(scores.data(), ctx, ctx, groupsz);
#if LLM_BF16
  if constexpr (kBf16Dots<T>)
    if (fast) return attn::values_fast_bf16(groupsz, scores.data(), raw(vp), row, bs, hkv, kvh, ctx, ctx, os);
#endif
#if LLM_SIMD
  if (fast) return attn::values_fast(groupsz, scores.data(), vp, row, bs, hkv, kvh, ctx, ctx, os);
#endif
  std::fill(os, os + groupsz * d, 0.0f);
  for (int64_t p = 0; p < ctx; ++p) {
    const T* v = vp + ((row[p / bs] * bs + p % bs) * hkv + kvh) * d;
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

#if LLM_AVX512
// Rows first .. first + n that share one block table (see the units in decode_impl): their scores
// blocked (attention_rows.h), then each row's softmax and values as attend_row makes them; or, with
// `amx`, the scores and values of all the rows on AMX tiles (attention_amx.h).
template <typename T>
void attend_rows(const Shape& s, const float* qp, const T* kp, const T* vp, const int64_t* table,
                 const int64_t* ctxs, int64_t first, int64_t n, int64_t kvh, float* op, AlignedVector<float>& scores,
                 bool amx) {
  const int64_t g = s.groupsz, d = s.d;
  int64_t most = 0;
  for (int64_t r = 0; r < n; ++r) most = std::max(most, ctxs[r]);
  const int64_t ld = (most + simd::W - 1) / simd::W * simd::W;
  scores.resize(n * g * ld);
  const float* q0 = qp + (first * s.hq + kvh * g) * d;
#if LLM_BF16
  if constexpr (kBf16Dots<T>) {
#if LLM_AMX
    if (amx) attn::scores_rows_amx(g, q0, s.hq * d, n, ctxs, raw(kp), raw(vp), table, s.bs, s.hkv, kvh, s.scale, scores.data(), ld);
    else
#endif
      attn::scores_rows_bf16(g, q0, s.hq * d, n, ctxs, raw(kp), table, s.bs, s.hkv, kvh, s.scale, scores.data(), ld);
  } else
#endif
    attn::scores_rows(g, q0, s.hq * d, n, ctxs, kp, table, s.bs, s.hkv, kvh, s.scale, scores.data(), ld);
#if LLM_AMX && LLM_BF16
  if constexpr (kBf16Dots<T>)
    if (amx) {
      for (int64_t r = 0; r < n; ++r) softmax_heads(scores.data() + r * g * ld, ld, ctxs[r], g);
      float* os = op + (first * s.hq + kvh * g) * d;
      return attn::values_rows_amx(g, scores.data(), ld, n, ctxs, raw(vp), table, s.bs, s.hkv, kvh, os, s.hq * d);
    }
#endif
  for (int64_t r = 0; r < n; ++r) {
    float* sc = scores.data() + r * g * ld;
    float* os = op + ((first + r) * s.hq + kvh * g) * d;
    softmax_heads(sc, ld, ctxs[r], g);
#if LLM_BF16
    if constexpr (kBf16Dots<T>) {
      attn::values_fast_bf16(g, sc, raw(vp), table, s.bs, s.hkv, kvh, ctxs[r], ld, os);
      continue;
    }
#endif
    attn::values_fast(g, sc, vp, table, s.bs, s.hkv, kvh, ctxs[r], ld, os);
  }
}
#endif

// The step's rows in work units: one row, or up to kUnitRows consecutive rows that read the same
// blocks (a prefill chunk's tokens: the same table, each row one position longer), whose scores are
// blocked. A run's units are listed last rows first: those see the most positions, so the pool's
// chunks, claimed in order, start with the longest. Measured on a 2-core Zen 5 (bf16 cache, 9 query
// and 3 kv heads), one layer: a 1,536-token prompt 12.9 -> 8.5 ms, a 128-token chunk after 1,408
// cached 2.07 -> 1.32 ms, a 128-token prompt 0.115 -> 0.084 ms; units of 8, 16 or 64 rows within
// a few percent of 32. A whole 1,536-token prefill, 128-token chunks: 856-880 -> 753-759 ms.
constexpr int64_t kMinRunRows = 4, kUnitRows = 32;

struct Unit {
  int64_t first, rows;
};

std::vector<Unit> work_units(const int64_t* tab, const int64_t* len, int64_t b, int64_t width, int64_t bs,
                             bool blocked) {
  std::vector<Unit> units;
  for (int64_t i = 0; i < b;) {
    int64_t j = i + 1;
    const auto same = [&](int64_t r) {
      return std::memcmp(tab + r * width, tab + i * width, (len[r] + bs - 1) / bs * sizeof(int64_t)) == 0;
    };
    while (blocked && j < b && same(j)) ++j;
    if (j - i < kMinRunRows) {
      for (int64_t r = i; r < j; ++r) units.push_back({r, 1});
    } else {
      const int64_t tiles = (j - i + kUnitRows - 1) / kUnitRows, per = (j - i + tiles - 1) / tiles;
      for (int64_t e = j; e > i; e -= per) units.push_back({std::max(i, e - per), std::min(per, e - i)});
    }
    i = j;
  }
  return units;
}

template <typename T>
void decode_impl(const at::Tensor& q, const at::Tensor& kc, const at::Tensor& vc, const at::Tensor& tables,
                 const at::Tensor& lens, at::Tensor& out) {
  const int64_t b = q.size(0), hq = q.size(1), d = q.size(2), hkv = kc.size(2), width = tables.size(1);
  const Shape s{hq, hkv, hq / hkv, d, kc.size(1), 1.0f / std::sqrt(static_cast<float>(d))};
  const float* qp = q.data_ptr<float>();
  const T *kp = kc.data_ptr<T>(), *vp = vc.data_ptr<T>();
  const int64_t *tab = tables.data_ptr<int64_t>(), *len = lens.data_ptr<int64_t>();
  float* op = out.data_ptr<float>();
  const bool blocked = LLM_AVX512 && d == 64 && s.groupsz <= 4 && s.bs % 16 == 0;
  // A bf16 cache's scores on AMX tiles: every row then goes through attend_rows, one row a unit or more
  const bool amx = kBf16Dots<T> && blocked && amx_attention();
  const std::vector<Unit> units = work_units(tab, len, b, width, s.bs, blocked);
  const int64_t n = static_cast<int64_t>(units.size());
  // From 4 units on, a chunk is one unit's kv heads: their rows interleave in each block, so the
  // lines one head's pass brings into this core's L2 serve the next head's (measured on a 2-core
  // Sapphire Rapids at batch 64 and 192 positions: 0.63 -> 0.52 ms a layer, against one head a chunk,
  // where the two cores each fetched every block). Fewer units keep a head a chunk, so both cores
  // have work.
  Pool::get().for_each(n * hkv, n >= 4 ? hkv : 1, [&](int64_t begin, int64_t end) {
    AlignedVector<float> scores;
    if (amx) tiles_16x64();
    for (int64_t task = begin; task < end; ++task) {
      const Unit u = units[task / hkv];
      const int64_t kvh = task % hkv;
#if LLM_AVX512
      if (u.rows > 1 || amx) {
        attend_rows(s, qp, kp, vp, tab + u.first * width, len + u.first, u.first, u.rows, kvh, op, scores, amx);
        continue;
      }
#endif
      const int64_t off = (u.first * hq + kvh * s.groupsz) * d;  // the group's query heads, [groupsz, D]
      attend_row(s, qp + off, kp, vp, tab + u.first * width, kvh, len[u.first], op + off, scores);
    }
#if LLM_AMX
    if (amx) _tile_release();
#endif
  });
}

}  // namespace

bool attention_bf16_dots() { return LLM_BF16; }

bool amx_attention() { return LLM_AMX && LLM_BF16 && amx_scores.load(std::memory_order_relaxed) && amx_usable(); }
void set_amx_attention(bool on) { amx_scores.store(on, std::memory_order_relaxed); }

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
