// Rotary embedding with the paged KV write: a step's q heads rotated, its k heads rotated and its v
// heads written into their cache slots (the layout attention.cpp reads).
#include "common.h"
#include "ops.h"
#include "pool.h"

namespace llm {
namespace {

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

}  // namespace llm
