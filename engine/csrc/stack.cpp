// The decoder layers of one step in one call (engine/model.py `_forward_fused` takes it when the
// KV cache is the paged one): the same kernels in the same order as the per-layer Python loop, so
// the same bits, without the ~12 Python calls and dispatcher round trips a layer costs (about
// 7 us each: 2.5-3 ms of a 7-8 ms single-sequence decode step on 2 cores).
//
//   projections  4 a layer (qkv, o, gate_up, down), each a weight and a kind:
//                kDense fp32 [N, K] (at::linear), kQ4 / kQ8 packed tiles (quant_linear.cpp),
//                kQ4Int8 packed q4 tiles allowed int8 activations (ops.cpp q4_linear_int8_acts)
//   norms        2 a layer (input, post-attention) and the final norm: 2L + 1
//   caches       one K and one V cache a layer, [num_blocks, block_size, Hkv, D]
//   x            the residual stream [T, hidden], updated in place; returns the final normed h
//   keep         the rows whose final h the step needs (those it samples), or none: all. The last
//                layer stores every row's key and value, then runs only these rows: the other
//                rows' attention, o projection and MLP there feed nothing (a prefill chunk of n
//                tokens samples at most its last one, so this skips 84% of a layer's matmuls for
//                n - 1 rows: about 2.8% of a 30-layer prefill's)
#include <torch/library.h>

#include "ops.h"

namespace llm {

namespace {
enum Kind : int64_t { kDense = 0, kQ4 = 1, kQ8 = 2, kQ4Int8 = 3 };

at::Tensor project(const at::Tensor& x, const at::Tensor& w, int64_t kind, int64_t n) {
  switch (kind) {
    case kDense: return at::linear(x, w);
    case kQ4: return q4_linear(x, w, n);
    case kQ8: return q8_linear(x, w, n);
    case kQ4Int8: return q4_linear_int8_acts(x, w, n);
    default: TORCH_CHECK(false, "unknown projection kind ", kind);
  }
}
}  // namespace

at::Tensor decoder_stack(at::Tensor& x, at::TensorList weights, at::IntArrayRef kinds, at::IntArrayRef outs,
                         at::TensorList norms, at::TensorList k_caches, at::TensorList v_caches,
                         const at::Tensor& slots, const at::Tensor& tables, const at::Tensor& lens,
                         const at::Tensor& cos, const at::Tensor& ssin, int64_t hq, int64_t hkv, double eps,
                         const c10::optional<at::Tensor>& keep) {
  const int64_t layers = static_cast<int64_t>(k_caches.size());
  TORCH_CHECK(layers > 0 && static_cast<int64_t>(v_caches.size()) == layers &&
                  static_cast<int64_t>(weights.size()) == 4 * layers &&
                  static_cast<int64_t>(kinds.size()) == 4 * layers && static_cast<int64_t>(outs.size()) == 4 * layers &&
                  static_cast<int64_t>(norms.size()) == 2 * layers + 1,
              "decoder_stack: 4 projections, 2 norms and a K and V cache a layer, and a final norm");
  if (keep.has_value())
    TORCH_CHECK(keep->dim() == 1 && keep->scalar_type() == at::kLong, "keep must be an int64 vector of rows");
  int64_t t = x.size(0);
  at::Tensor h = rms_norm(x, norms[0], eps);
  at::Tensor residual = x, tab = tables, len = lens;
  for (int64_t i = 0; i < layers; ++i) {
    const int64_t p = 4 * i;
    at::Tensor kc = k_caches[i], vc = v_caches[i];
    at::Tensor q = rope_store(project(h, weights[p], kinds[p], outs[p]), cos, ssin, kc, vc, slots, hq, hkv);
    if (i == layers - 1 && keep.has_value()) {  // every row's key and value stored: only kept rows on
      t = keep->size(0);
      if (t == 0) return at::empty({0, x.size(1)}, x.options());
      q = q.index_select(0, *keep);
      residual = x.index_select(0, *keep);
      tab = tables.index_select(0, *keep);
      len = lens.index_select(0, *keep);
    }
    const at::Tensor a = paged_decode_attention(q, kc, vc, tab, len);  // [T, Hq, D]
    h = add_rms_norm(residual, project(a.view({t, -1}), weights[p + 1], kinds[p + 1], outs[p + 1]), norms[2 * i + 1], eps);
    const at::Tensor up = kinds[p + 2] == kQ4 ? q4_gate_up_silu(h, weights[p + 2], outs[p + 2])
                                               : silu_mul(project(h, weights[p + 2], kinds[p + 2], outs[p + 2]));
    h = add_rms_norm(residual, project(up, weights[p + 3], kinds[p + 3], outs[p + 3]), norms[2 * i + 2], eps);
  }
  return h;
}

}  // namespace llm

TORCH_LIBRARY_FRAGMENT(llm, m) {
  m.def(
      "decoder_stack(Tensor(a!) x, Tensor[] weights, int[] kinds, int[] outs, Tensor[] norms, "
      "Tensor(b!)[] k_caches, Tensor(c!)[] v_caches, Tensor slots, Tensor tables, Tensor lens, Tensor cos, "
      "Tensor signed_sin, int num_heads, int num_kv_heads, float eps, Tensor? keep=None) -> Tensor");
}

TORCH_LIBRARY_IMPL(llm, CPU, m) { m.impl("decoder_stack", &llm::decoder_stack); }
