// The AMX path of the int4 linear layer (amx_linear.cpp), built where -march=native has AMX tiles
// with bf16 and used where the kernel also grants this process the tile state.
#pragma once

#include "common.h"

#if LLM_AVX512 && defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BF16__)
#define LLM_AMX 1
#else
#define LLM_AMX 0
#endif

namespace llm {

// Rows from which q4_linear takes the AMX path (default kAmxMinRows): below, the VNNI path reads the
// packed codes once and wins (measured on a 2-core Sapphire Rapids: the AMX path pays its
// dequantization per call). Settable for measurements and tests; a huge value turns the path off.
constexpr int64_t kAmxMinRows = 16;
int64_t amx_min_rows();
void set_amx_min_rows(int64_t rows);

// Built with AMX, and the kernel let this process use the tiles (asked once, on first use).
bool amx_usable();

// Loads the tile configuration every AMX path here uses: all 8 tiles 16 rows of 64 bytes.
void tiles_16x64();

// A compiler barrier before tile loads of memory just written: GCC 12's _tile_loadd does not tell the
// optimizer it reads memory, so stores seen by nothing else could be dropped as dead (they survive
// today only because a _tile_stored, which does, follows them).
inline void tiles_read_memory() { asm volatile("" ::: "memory"); }

// y [m, n] = x [m, k] @ W^T, W the q4 tiles `packed` (quant_linear.cpp); needs amx_usable().
void q4_linear_amx(const float* x, int64_t m, int64_t k, const uint8_t* packed, int64_t n, float* y);

// y [m, n / 2] = silu(x @ G^T) * (x @ U^T), the packed tiles [G | U] a gate_up projection's (n / 2 a
// multiple of 16): the pairs are (gate tile i, up tile i) and the product is made as each pair's
// tiles leave the accumulators, so neither the [m, n] projection nor its second pass through memory
// exists. The same bits as silu_mul(q4_linear_amx(...)); needs amx_usable().
void q4_gate_up_silu_amx(const float* x, int64_t m, int64_t k, const uint8_t* packed, int64_t n, float* y);

}  // namespace llm
