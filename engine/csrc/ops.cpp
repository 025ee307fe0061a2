// The `llm` operator namespace: what engine/kernels.py loads and engine/model.py calls.
#include <torch/library.h>

#include "common.h"

namespace llm {
at::Tensor q4_linear(const at::Tensor& x, const at::Tensor& packed, int64_t n);
at::Tensor q8_linear(const at::Tensor& x, const at::Tensor& packed, const at::Tensor& scales);
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps);
at::Tensor add_rms_norm(at::Tensor& x, const at::Tensor& residual, const at::Tensor& w, double eps);
at::Tensor silu_mul(const at::Tensor& gu);
at::Tensor rope_store(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& ssin, at::Tensor& kc,
                      at::Tensor& vc, const at::Tensor& slots, int64_t hq, int64_t hkv);
at::Tensor paged_decode_attention(const at::Tensor& q, const at::Tensor& kc, const at::Tensor& vc,
                                  const at::Tensor& tables, const at::Tensor& lens);

// Which code paths this build has (engine/kernels.py reports it).
std::string isa() { return LLM_AVX512 ? "avx512-vnni" : "scalar"; }
}  // namespace llm

TORCH_LIBRARY(llm, m) {
  m.def("isa() -> str", &llm::isa);
  m.def("q4_linear(Tensor x, Tensor packed, int n) -> Tensor");
  m.def("q8_linear(Tensor x, Tensor packed, Tensor scales) -> Tensor");
  m.def("rms_norm(Tensor x, Tensor weight, float eps) -> Tensor");
  m.def("add_rms_norm(Tensor(a!) x, Tensor residual, Tensor weight, float eps) -> Tensor");
  m.def("silu_mul(Tensor gate_up) -> Tensor");
  m.def(
      "rope_store(Tensor qkv, Tensor cos, Tensor signed_sin, Tensor(a!) k_cache, Tensor(b!) v_cache, "
      "Tensor slots, int num_heads, int num_kv_heads) -> Tensor");
  m.def("paged_decode_attention(Tensor q, Tensor k_cache, Tensor v_cache, Tensor tables, Tensor lens) -> Tensor");
}

TORCH_LIBRARY_IMPL(llm, CPU, m) {
  m.impl("q4_linear", &llm::q4_linear);
  m.impl("q8_linear", &llm::q8_linear);
  m.impl("rms_norm", &llm::rms_norm);
  m.impl("add_rms_norm", &llm::add_rms_norm);
  m.impl("silu_mul", &llm::silu_mul);
  m.impl("rope_store", &llm::rope_store);
  m.impl("paged_decode_attention", &llm::paged_decode_attention);
}
