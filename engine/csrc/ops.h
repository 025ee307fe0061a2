// The kernels' tensor-level entry points, defined across engine/csrc: ops.cpp registers them as the
// `llm` operators, stack.cpp calls them layer after layer.
#pragma once

#include <tuple>

#include "common.h"

namespace llm {
at::Tensor q4_linear(const at::Tensor& x, const at::Tensor& packed, int64_t n);
at::Tensor q8_linear(const at::Tensor& x, const at::Tensor& packed, int64_t n);
at::Tensor q4_gate_up_silu(const at::Tensor& x, const at::Tensor& packed, int64_t n);
at::Tensor q4_linear_i8dot_op(const at::Tensor& x, const at::Tensor& packed, int64_t n);
at::Tensor q4_linear_int8_acts(const at::Tensor& x, const at::Tensor& packed, int64_t n);
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps);
at::Tensor add_rms_norm(at::Tensor& x, const at::Tensor& residual, const at::Tensor& w, double eps);
at::Tensor silu_mul(const at::Tensor& gu);
at::Tensor rope_store(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& ssin, at::Tensor& kc,
                      at::Tensor& vc, const at::Tensor& slots, int64_t hq, int64_t hkv);
at::Tensor paged_decode_attention(const at::Tensor& q, const at::Tensor& kc, const at::Tensor& vc,
                                  const at::Tensor& tables, const at::Tensor& lens);
bool attention_bf16_dots();  // a bf16 cache's attention runs on AVX-512 BF16 dot products (attention_bf16.h)
// A bf16 cache's attention scores run on AMX tiles (attention_amx.h); settable for measurements.
bool amx_attention();
void set_amx_attention(bool on);
std::tuple<at::Tensor, at::Tensor> argmax_usable(const at::Tensor& logits);
at::Tensor topk_indices(const at::Tensor& logits, int64_t k);
}  // namespace llm
