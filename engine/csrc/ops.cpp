// The `llm` operator namespace: what engine/kernels.py loads and engine/model.py calls.
#include <torch/library.h>

#include "amx.h"
#include "bf16dot.h"
#include "common.h"
#include "fma.h"
#include "i8dot.h"
#include "ops.h"
#include "pool.h"

#include <algorithm>
#include <limits>

namespace llm {

// Which code paths this build has (engine/kernels.py reports it).
std::string isa() {
  const std::string base = LLM_AVX512 ? "avx512-vnni" : LLM_AVX2 ? "avx2" : "scalar";
  return amx_usable() ? base + "+amx" : bf16dot_usable() ? base + "+bf16" : base;
}

namespace {
using Q4Path = void (*)(const float* x, int64_t m, int64_t k, const uint8_t* packed, int64_t n, float* y);

// One of q4_linear's many-row paths alone, whatever the rows: for tests and measurements.
at::Tensor q4_path(Q4Path path, bool usable, const char* name, const at::Tensor& x, const at::Tensor& packed,
                   int64_t n) {
  TORCH_CHECK(usable, name, " is not usable here");
  check_f32_2d(x, "x");
  TORCH_CHECK(x.size(1) % kGroup == 0 && packed.scalar_type() == at::kByte && packed.is_contiguous() &&
                  packed.numel() == (n + kTile - 1) / kTile * (x.size(1) / kGroup) * 320,
              "packed weight does not match ", n, " x ", x.size(1));
  at::Tensor y = at::empty({x.size(0), n}, x.options());
  path(x.data_ptr<float>(), x.size(0), x.size(1), packed.data_ptr<uint8_t>(), n, y.data_ptr<float>());
  return y;
}
}  // namespace

// The AMX path (amx_linear.cpp), the AVX-512 BF16 path (bf16dot_linear.cpp) and the int8-activation
// path (i8dot_linear.cpp)
at::Tensor q4_linear_amx_op(const at::Tensor& x, const at::Tensor& packed, int64_t n) {
  return q4_path(&q4_linear_amx, amx_usable(), "AMX", x, packed, n);
}
at::Tensor q4_linear_bf16dot_op(const at::Tensor& x, const at::Tensor& packed, int64_t n) {
  return q4_path(&q4_linear_bf16dot, bf16dot_usable(), "AVX-512 BF16", x, packed, n);
}
at::Tensor q4_linear_fma_op(const at::Tensor& x, const at::Tensor& packed, int64_t n) {
  return q4_path(&q4_linear_fma, fma_usable(), "AVX2 FMA", x, packed, n);
}
at::Tensor q4_linear_i8dot_op(const at::Tensor& x, const at::Tensor& packed, int64_t n) {
  return q4_path(&q4_linear_i8dot, i8dot_usable(), "AVX-512 VNNI int8", x, packed, n);
}

// A layer that allows int8 activations (engine/quant.py): the int8 path below
// int8_activation_rows() rows, q4_linear from there (AMX tiles). The lm_head shape (49152 x 576) on
// a 2-core Sapphire Rapids, int8 / AMX, ms: 0.92 / 2.29 at 8 rows, 2.95 / 2.61 at 32, 7.25 / 3.55 at
// 64; without AMX the int8 path wins at every size measured (1.3x AVX-512 BF16's at 512 rows).
constexpr int64_t kInt8ActsAmxRows = 32;

int64_t int8_activation_rows() {
  return amx_usable() ? std::max(kInt8ActsAmxRows, amx_min_rows()) : std::numeric_limits<int64_t>::max();
}

at::Tensor q4_linear_int8_acts(const at::Tensor& x, const at::Tensor& packed, int64_t n) {
  return x.size(0) < int8_activation_rows() ? q4_linear_i8dot_op(x, packed, n) : q4_linear(x, packed, n);
}

// silu(gate) * up of a packed int4 gate_up projection [gate | up] (n outputs, returns [m, n / 2]):
// fused on AMX tiles or AVX-512 BF16 dot products where q4_linear would take that path, else
// silu_mul(q4_linear(...)); the same bits either way. A 512-row prefill chunk writes and rereads
// half the bytes: its fp32 [m, n] output is what the AMX tile loop waits on (docs/architecture.md).
at::Tensor q4_gate_up_silu(const at::Tensor& x, const at::Tensor& packed, int64_t n) {
  const int64_t m = x.dim() == 2 ? x.size(0) : 0;
  const bool amx = m >= amx_min_rows() && amx_usable() && n % (2 * kTile) == 0;
  const bool bf16 = !amx && m >= bf16dot_min_rows() && bf16dot_usable() && n % (4 * kTile) == 0;
  if (!amx && !bf16) return silu_mul(q4_linear(x, packed, n));
  check_f32_2d(x, "x");
  TORCH_CHECK(x.size(1) % kGroup == 0 && packed.scalar_type() == at::kByte && packed.is_contiguous() &&
                  packed.numel() == n / kTile * (x.size(1) / kGroup) * 320,
              "packed weight does not match ", n, " x ", x.size(1));
  at::Tensor y = at::empty({m, n / 2}, x.options());
  (amx ? &q4_gate_up_silu_amx : &q4_gate_up_silu_bf16dot)(x.data_ptr<float>(), m, x.size(1),
                                                          packed.data_ptr<uint8_t>(), n, y.data_ptr<float>());
  return y;
}

// Threads of the kernels' own pool (pool.h), the caller included; torch's threads are separate.
void set_num_threads(int64_t threads) { Pool::get().set_threads(static_cast<int>(threads)); }
int64_t get_num_threads() { return Pool::get().threads(); }
}  // namespace llm

TORCH_LIBRARY(llm, m) {
  m.def("isa() -> str", &llm::isa);
  m.def("set_num_threads(int threads) -> ()", &llm::set_num_threads);
  m.def("get_num_threads() -> int", &llm::get_num_threads);
  m.def("q4_linear(Tensor x, Tensor packed, int n) -> Tensor");
  m.def("q4_linear_amx(Tensor x, Tensor packed, int n) -> Tensor");
  m.def("amx_min_rows() -> int", &llm::amx_min_rows);
  m.def("set_amx_min_rows(int rows) -> ()", &llm::set_amx_min_rows);
  m.def("q4_linear_bf16dot(Tensor x, Tensor packed, int n) -> Tensor");
  m.def("bf16dot_min_rows() -> int", &llm::bf16dot_min_rows);
  m.def("set_bf16dot_min_rows(int rows) -> ()", &llm::set_bf16dot_min_rows);
  m.def("q4_linear_fma(Tensor x, Tensor packed, int n) -> Tensor");
  m.def("fma_min_rows() -> int", &llm::fma_min_rows);
  m.def("set_fma_min_rows(int rows) -> ()", &llm::set_fma_min_rows);
  m.def("q4_linear_i8dot(Tensor x, Tensor packed, int n) -> Tensor");
  m.def("q4_linear_int8_acts(Tensor x, Tensor packed, int n) -> Tensor");
  m.def("int8_activation_rows() -> int", &llm::int8_activation_rows);
  m.def("q4_gate_up_silu(Tensor x, Tensor packed, int n) -> Tensor");
  m.def("q8_linear(Tensor x, Tensor packed, int n) -> Tensor");
  m.def("rms_norm(Tensor x, Tensor weight, float eps) -> Tensor");
  m.def("add_rms_norm(Tensor(a!) x, Tensor residual, Tensor weight, float eps) -> Tensor");
  m.def("silu_mul(Tensor gate_up) -> Tensor");
  m.def(
      "rope_store(Tensor qkv, Tensor cos, Tensor signed_sin, Tensor(a!) k_cache, Tensor(b!) v_cache, "
      "Tensor slots, int num_heads, int num_kv_heads) -> Tensor");
  m.def("paged_decode_attention(Tensor q, Tensor k_cache, Tensor v_cache, Tensor tables, Tensor lens) -> Tensor");
  m.def("attention_bf16_dots() -> bool", &llm::attention_bf16_dots);
  m.def("amx_attention() -> bool", &llm::amx_attention);
  m.def("set_amx_attention(bool on) -> ()", &llm::set_amx_attention);
  m.def("argmax_usable(Tensor logits) -> (Tensor, Tensor)");
  m.def("topk_indices(Tensor logits, int k) -> Tensor");
}

TORCH_LIBRARY_IMPL(llm, CPU, m) {
  m.impl("q4_linear", &llm::q4_linear);
  m.impl("q4_linear_amx", &llm::q4_linear_amx_op);
  m.impl("q4_linear_bf16dot", &llm::q4_linear_bf16dot_op);
  m.impl("q4_linear_fma", &llm::q4_linear_fma_op);
  m.impl("q4_linear_i8dot", &llm::q4_linear_i8dot_op);
  m.impl("q4_linear_int8_acts", &llm::q4_linear_int8_acts);
  m.impl("q4_gate_up_silu", &llm::q4_gate_up_silu);
  m.impl("q8_linear", &llm::q8_linear);
  m.impl("rms_norm", &llm::rms_norm);
  m.impl("add_rms_norm", &llm::add_rms_norm);
  m.impl("silu_mul", &llm::silu_mul);
  m.impl("rope_store", &llm::rope_store);
  m.impl("paged_decode_attention", &llm::paged_decode_attention);
  m.impl("argmax_usable", &llm::argmax_usable);
  m.impl("topk_indices", &llm::topk_indices);
}
