// The per-token elementwise work of a decoder layer, fused so that a step calls one kernel where
// eager PyTorch ran several (RMSNorm alone was pow, mean, add, rsqrt, mul, mul), all fp32:
//
//   rms_norm(x, w)          w * x / sqrt(mean(x^2) + eps)                       (Hugging Face's order)
//   add_rms_norm(x, r, w)   x += r (the residual stream, in place), then rms_norm(x, w)
//   silu_mul(gu)            silu(gu[:, :I]) * gu[:, I:]                         (gate | up halves)
#include "common.h"

namespace llm {
namespace {

void norm_row(const float* x, const float* w, float eps, int64_t h, float* out) {
  float ss = 0.0f;
  int64_t i = 0;
#if LLM_AVX512
  __m512 acc = _mm512_setzero_ps();  // 16 partial sums: no serial chain of h additions
  for (; i + 16 <= h; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    acc = _mm512_fmadd_ps(v, v, acc);
  }
  ss = _mm512_reduce_add_ps(acc);
#endif
  for (; i < h; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(h) + eps);
  i = 0;
#if LLM_AVX512
  const __m512 iv = _mm512_set1_ps(inv);
  for (; i + 16 <= h; i += 16)
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_loadu_ps(w + i), _mm512_mul_ps(_mm512_loadu_ps(x + i), iv)));
#endif
  for (; i < h; ++i) out[i] = w[i] * (x[i] * inv);
}

void check_norm(const at::Tensor& x, const at::Tensor& w) {
  check_f32_2d(x, "x");
  TORCH_CHECK(w.dim() == 1 && w.size(0) == x.size(1) && w.scalar_type() == at::kFloat && w.is_contiguous(),
              "weight must be a contiguous float32 vector of the hidden size");
}

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  check_norm(x, w);
  const int64_t t = x.size(0), h = x.size(1);
  at::Tensor out = at::empty_like(x);
  const float *src = x.data_ptr<float>(), *wp = w.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  for (int64_t r = 0; r < t; ++r) norm_row(src + r * h, wp, static_cast<float>(eps), h, dst + r * h);
  return out;
}

at::Tensor add_rms_norm(at::Tensor& x, const at::Tensor& residual, const at::Tensor& w, double eps) {
  check_norm(x, w);
  check_f32_2d(residual, "residual");
  TORCH_CHECK(residual.sizes() == x.sizes(), "residual must have x's shape");
  const int64_t t = x.size(0), h = x.size(1);
  at::Tensor out = at::empty_like(x);
  float* xs = x.data_ptr<float>();
  const float *rs = residual.data_ptr<float>(), *wp = w.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  for (int64_t r = 0; r < t; ++r) {
    float* row = xs + r * h;
    const float* add = rs + r * h;
    for (int64_t i = 0; i < h; ++i) row[i] += add[i];  // (vectorized by the compiler)
    norm_row(row, wp, static_cast<float>(eps), h, dst + r * h);
  }
  return out;
}

at::Tensor silu_mul(const at::Tensor& gu) {
  check_f32_2d(gu, "gate_up");
  TORCH_CHECK(gu.size(1) % 2 == 0, "gate_up must hold two halves");
  const int64_t t = gu.size(0), inter = gu.size(1) / 2;
  at::Tensor out = at::empty({t, inter}, gu.options());
  const float* src = gu.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  for (int64_t r = 0; r < t; ++r) {
    const float *g = src + r * 2 * inter, *u = g + inter;
    float* o = dst + r * inter;
    int64_t i = 0;
#if LLM_AVX512
    const __m512 one = _mm512_set1_ps(1.0f);
    for (; i + 16 <= inter; i += 16) {
      const __m512 gv = _mm512_loadu_ps(g + i);
      const __m512 sig = _mm512_div_ps(one, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), gv))));
      _mm512_storeu_ps(o + i, _mm512_mul_ps(_mm512_mul_ps(gv, sig), _mm512_loadu_ps(u + i)));
    }
#endif
    for (; i < inter; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
  return out;
}

}  // namespace llm
