// The per-token elementwise work of a decoder layer, fused so that a step calls one kernel where
// eager PyTorch ran several (RMSNorm alone was pow, mean, add, rsqrt, mul, mul), all fp32:
//
//   rms_norm(x, w)          w * x / sqrt(mean(x^2) + eps)                       (Hugging Face's order)
//   add_rms_norm(x, r, w)   x += r (the residual stream, in place), then rms_norm(x, w)
//   silu_mul(gu)            silu(gu[:, :I]) * gu[:, I:]                         (gate | up halves)
#include "common.h"
#include "pool.h"

namespace llm {
namespace {

void norm_row(const float* x, const float* w, float eps, int64_t h, float* out) {
  float ss = 0.0f;
  int64_t i = 0;
#if LLM_SIMD
  simd::V acc = simd::zero();  // W partial sums: no serial chain of h additions
  for (; i + simd::W <= h; i += simd::W) {
    const simd::V v = simd::load(x + i);
    acc = simd::fmadd(v, v, acc);
  }
  ss = simd::hsum(acc);
#endif
  for (; i < h; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(h) + eps);
  i = 0;
#if LLM_SIMD
  const simd::V iv = simd::set1(inv);
  for (; i + simd::W <= h; i += simd::W)
    simd::store(out + i, simd::mul(simd::load(w + i), simd::mul(simd::load(x + i), iv)));
#endif
  for (; i < h; ++i) out[i] = w[i] * (x[i] * inv);
}

void check_norm(const at::Tensor& x, const at::Tensor& w) {
  check_f32_2d(x, "x");
  TORCH_CHECK(w.dim() == 1 && w.size(0) == x.size(1) && w.scalar_type() == at::kFloat && w.is_contiguous(),
              "weight must be a contiguous float32 vector of the hidden size");
}

// Rows per chunk of the pool: about 16 K floats each, so a one-row step (decoding) runs inline.
int64_t row_grain(int64_t row_len) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row_len)); }

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  check_norm(x, w);
  const int64_t t = x.size(0), h = x.size(1);
  at::Tensor out = at::empty_like(x);
  const float *src = x.data_ptr<float>(), *wp = w.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  Pool::get().for_each(t, row_grain(h), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) norm_row(src + r * h, wp, static_cast<float>(eps), h, dst + r * h);
  });
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
  Pool::get().for_each(t, row_grain(h), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* row = xs + r * h;
      const float* add = rs + r * h;
      for (int64_t i = 0; i < h; ++i) row[i] += add[i];  // (vectorized by the compiler)
      norm_row(row, wp, static_cast<float>(eps), h, dst + r * h);
    }
  });
  return out;
}

at::Tensor silu_mul(const at::Tensor& gu) {
  check_f32_2d(gu, "gate_up");
  TORCH_CHECK(gu.size(1) % 2 == 0, "gate_up must hold two halves");
  const int64_t t = gu.size(0), inter = gu.size(1) / 2;
  at::Tensor out = at::empty({t, inter}, gu.options());
  const float* src = gu.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  Pool::get().for_each(t, row_grain(inter), [&](int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const float *g = src + r * 2 * inter, *u = g + inter;
    float* o = dst + r * inter;
    int64_t i = 0;
#if LLM_SIMD
    for (; i + simd::W <= inter; i += simd::W)
      simd::store(o + i, simd::silu_times(simd::load(g + i), simd::load(u + i)));
#endif
    for (; i < inter; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
  });
  return out;
}

}  // namespace llm
