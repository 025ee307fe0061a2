// One pass over each row of a step's logits [S, vocab] (fp32) where eager PyTorch made several:
//
//   argmax_usable(logits) -> (argmax [S] int64, usable [S] bool)
//       usable: no NaN, no +inf, at least one finite value (engine/sampler.py's definition);
//       argmax: the first index of the row's largest value (torch.argmax's tie rule) for usable rows
//   topk_indices(logits, k) -> [S, k] int64
//       the indices of the k largest values of each row, largest first (NaN never counts)
#include "common.h"
#include "pool.h"

#include <limits>
#include <vector>

namespace llm {
namespace {

struct RowStat {
  int64_t argmax = 0;
  bool usable = false;
};

RowStat row_stat(const float* x, int64_t v) {
  const float inf = std::numeric_limits<float>::infinity();
  float best = -inf;
  int64_t at = 0;
  bool bad = false, finite = false;
  int64_t i = 0;
#if LLM_AVX512
  __m512 bv = _mm512_set1_ps(-inf);
  __m512i bi = _mm512_setzero_si512(), idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i step = _mm512_set1_epi32(16);
  const __m512 pinf = _mm512_set1_ps(inf);
  __mmask16 badm = 0, finm = 0;
  for (; i + 16 <= v && v <= INT32_MAX; i += 16) {
    const __m512 x16 = _mm512_loadu_ps(x + i);
    badm |= _mm512_cmp_ps_mask(x16, x16, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(x16, pinf, _CMP_EQ_OQ);
    finm |= _mm512_cmp_ps_mask(_mm512_abs_ps(x16), pinf, _CMP_LT_OQ);
    const __mmask16 gt = _mm512_cmp_ps_mask(x16, bv, _CMP_GT_OQ);  // strictly: the first index wins
    bv = _mm512_mask_blend_ps(gt, bv, x16);
    bi = _mm512_mask_blend_epi32(gt, bi, idx);
    idx = _mm512_add_epi32(idx, step);
  }
  bad = badm != 0;
  finite = finm != 0;
  alignas(64) float lanes[16];
  alignas(64) int32_t lane_idx[16];
  _mm512_store_ps(lanes, bv);
  _mm512_store_si512(lane_idx, bi);
  for (int l = 0; l < 16; ++l)
    if (lanes[l] > best || (lanes[l] == best && lane_idx[l] < at)) {
      best = lanes[l];
      at = lane_idx[l];
    }
#endif
  for (; i < v; ++i) {
    const float xi = x[i];
    if (std::isnan(xi) || xi == inf) bad = true;
    if (std::isfinite(xi)) finite = true;
    if (xi > best) {
      best = xi;
      at = i;
    }
  }
  return RowStat{at, !bad && finite};
}

// The k largest of a row, by one pass with a sorted buffer (smallest first); a chunk of 16 is only
// looked into when one of its values beats the buffer's smallest.
void row_topk(const float* x, int64_t v, int64_t k, int64_t* out) {
  std::vector<float> val(k, -std::numeric_limits<float>::infinity());
  std::vector<int64_t> at(k, -1);
  auto insert = [&](float xv, int64_t i) {
    if (!(xv > val[0])) return;  // also refuses NaN
    int64_t j = 0;
    while (j + 1 < k && val[j + 1] < xv) {
      val[j] = val[j + 1];
      at[j] = at[j + 1];
      ++j;
    }
    val[j] = xv;
    at[j] = i;
  };
  int64_t i = 0;
#if LLM_AVX512
  for (; i + 16 <= v; i += 16) {
    const __m512 x16 = _mm512_loadu_ps(x + i);
    __mmask16 over = _mm512_cmp_ps_mask(x16, _mm512_set1_ps(val[0]), _CMP_GT_OQ);
    while (over) {
      const int l = __builtin_ctz(over);
      insert(x[i + l], i + l);
      over &= over - 1;
    }
  }
#endif
  for (; i < v; ++i) insert(x[i], i);
  int64_t filled = 0;  // rows with fewer than k comparable values: the rest is index 0
  for (int64_t j = k - 1; j >= 0; --j) out[filled++] = at[j] < 0 ? 0 : at[j];
}

void check_logits(const at::Tensor& logits) {
  TORCH_CHECK(logits.dim() == 2 && logits.scalar_type() == at::kFloat && logits.is_contiguous() &&
                  logits.size(1) > 0,
              "logits must be a contiguous, non-empty [S, vocab] float32 tensor");
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> argmax_usable(const at::Tensor& logits) {
  check_logits(logits);
  const int64_t s = logits.size(0), v = logits.size(1);
  at::Tensor argmax = at::empty({s}, logits.options().dtype(at::kLong));
  at::Tensor usable = at::empty({s}, logits.options().dtype(at::kBool));
  const float* x = logits.data_ptr<float>();
  int64_t* am = argmax.data_ptr<int64_t>();
  bool* ok = usable.data_ptr<bool>();
  Pool::get().for_each(s, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const RowStat st = row_stat(x + r * v, v);
      am[r] = st.argmax;
      ok[r] = st.usable;
    }
  });
  return {argmax, usable};
}

at::Tensor topk_indices(const at::Tensor& logits, int64_t k) {
  check_logits(logits);
  TORCH_CHECK(k >= 1 && k <= 64 && k <= logits.size(1), "k must be in [1, min(64, vocab)]");
  const int64_t s = logits.size(0), v = logits.size(1);
  at::Tensor out = at::empty({s, k}, logits.options().dtype(at::kLong));
  const float* x = logits.data_ptr<float>();
  int64_t* o = out.data_ptr<int64_t>();
  Pool::get().for_each(s, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) row_topk(x + r * v, v, k, o + r * k);
  });
  return out;
}

}  // namespace llm
