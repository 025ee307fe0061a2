// The AVX-512 BF16 path of the int4 linear layer (bf16dot_linear.cpp), built where -march=native has
// AVX512_BF16 (AMD Zen 4 and later, Intel Cooper Lake and later); where AMX tiles are usable too,
// their path (amx.h) is taken first.
#pragma once

#include "common.h"

namespace llm {

// Rows from which q4_linear takes this path (default kBf16DotMinRows): below, the VNNI path reads
// the packed codes once and wins, as this path pays its dequantization per call. Settable for
// measurements and tests; a huge value turns the path off.
constexpr int64_t kBf16DotMinRows = 32;
int64_t bf16dot_min_rows();
void set_bf16dot_min_rows(int64_t rows);

// Built with AVX512_BF16.
bool bf16dot_usable();

// y [m, n] = x [m, k] @ W^T, W the q4 tiles `packed` (quant_linear.cpp); needs bf16dot_usable().
void q4_linear_bf16dot(const float* x, int64_t m, int64_t k, const uint8_t* packed, int64_t n, float* y);

// y [m, n / 2] = silu(x @ G^T) * (x @ U^T), the packed tiles [G | U] a gate_up projection's (n a
// multiple of 64): the product is made as the accumulators are stored, the same bits as
// silu_mul(q4_linear_bf16dot(...)); needs bf16dot_usable().
void q4_gate_up_silu_bf16dot(const float* x, int64_t m, int64_t k, const uint8_t* packed, int64_t n, float* y);

}  // namespace llm
