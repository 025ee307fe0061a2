// The AVX2 path of the int4 linear layer for many rows (fma_linear.cpp), built where -march=native
// has AVX2 and FMA but not AVX-512 (AMD Zen 2 / 3, Intel before Skylake-SP): there the integer path
// (quant_linear.cpp) forms 16 products an instruction with vpmaddwd and spends as many again on
// sums, nibble unpacking and broadcasts per 8 rows; fp32 FMAs against weights dequantized once per
// call make 8 products an instruction with nothing else in the loop.
#pragma once

#include "common.h"

namespace llm {

// Rows from which q4_linear takes this path (below it the integer path reads the packed codes once
// and wins); settable for measurements and tests, a huge value turns the path off.
constexpr int64_t kFmaMinRows = 24;  // 2-core Zen 3: int 97-135 GFLOP/s against 110-123 at 24 rows, 128-135 against 99-116 at 16
int64_t fma_min_rows();
void set_fma_min_rows(int64_t rows);

// Built with AVX2 and FMA, without AVX-512 (whose VNNI, BF16 and AMX paths serve those hosts).
bool fma_usable();

// y [m, n] = x [m, k] @ W^T, W the q4 tiles `packed` (quant_linear.cpp), W = code * scale + min in
// fp32 and every product summed in fp32, in k order; needs fma_usable().
void q4_linear_fma(const float* x, int64_t m, int64_t k, const uint8_t* packed, int64_t n, float* y);

}  // namespace llm
