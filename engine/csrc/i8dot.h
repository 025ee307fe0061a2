// The int4 linear layer with int8 activations (i8dot_linear.cpp): x rounded to int8 per group of 32
// channels, the codes multiplied on AVX-512 VNNI byte dot products (VPDPBUSD, 64 multiply-adds an
// instruction where the int16 path's VPDPWSSD and AVX-512 BF16's VDPBF16PS do 32): 1.5-1.7x their
// speed on 2 Zen 4 cores at 8-64 rows, 1.3x at 512.
//
// Only by choice, never by q4_linear's own dispatch: the rounding (max|x| / 254 of each group) is
// about 5x the error of bf16 activations, and on SmolLM2 it moves greedy choices (int4 prompts
// keeping their first 32 greedy tokens: 23 of 24 with the int16 path, 14 of 24 with this one in
// every many-row step). engine/quant.py uses it for an lm_head whose best candidates are rescored
// exactly, where the rounding cannot move a greedy choice.
#pragma once

#include "common.h"

namespace llm {

// Built with AVX-512 VNNI.
bool i8dot_usable();

// y [m, n] = x [m, k] @ W^T, W the q4 tiles `packed` (quant_linear.cpp); needs i8dot_usable().
void q4_linear_i8dot(const float* x, int64_t m, int64_t k, const uint8_t* packed, int64_t n, float* y);

}  // namespace llm
