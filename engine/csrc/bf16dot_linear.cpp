// The int4 linear layer on AVX-512 BF16 dot products (VDPBF16PS), for steps of many rows on CPUs
// without AMX tiles: prefill chunks and large decode batches. Same result as the AMX path
// (amx_linear.cpp) up to the order of fp32 sums: y = x @ W^T, x rounded to bf16, W = code * scale +
// min per group of 32 input channels rounded to bf16, products summed in fp32.
//
// Why: the VNNI path (quant_linear.cpp) unpacks the codes for every 8 rows of x and pays a float
// epilogue per group of 32 channels and row; here each chunk of four 16-row weight tiles is
// dequantized once per call into a small buffer (q4_bf16.h draws its layout), and the inner loop is
// nothing but dot products: per pair of k, one broadcast of x's two bf16 values per row against the
// four tiles' 64-byte rows.
//
//   acc[r][t] (16 fp32 lanes = 16 output rows of tile t) += sum_{i in pair kp} x[r, i] * W[tile t row, i]
//
// Each chunk of work is four weight tiles (64 output channels) against a block of rows of x, so a
// dequantized chunk is used by up to kRowBlock rows. For a gate_up projection
// (q4_gate_up_silu_bf16dot) a chunk is gate tiles 2c, 2c + 1 and the up tiles of the same outputs,
// and silu(gate) * up is stored as the accumulators are: [m, n / 2], no [m, n] pass through memory.
#include "bf16dot.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "pool.h"
#include "q4_bf16.h"

namespace llm {

namespace {
std::atomic<int64_t> min_rows{kBf16DotMinRows};
}  // namespace

int64_t bf16dot_min_rows() { return min_rows.load(std::memory_order_relaxed); }
void set_bf16dot_min_rows(int64_t rows) { min_rows.store(std::max<int64_t>(1, rows), std::memory_order_relaxed); }

#if LLM_BF16
namespace {

struct Job {
  const uint16_t* x;  // bf16 [m, k]
  const uint8_t* packed;
  float* y;  // [m, n], or [m, n / 2] when `gate_up`
  int64_t m, k, n, tiles, tile_bytes;
  int64_t quads, block_rows;  // chunks of tiles (kTiles or kNarrowTiles); rows of x a block multiplies
  bool gate_up;  // chunk c: gate tiles 2c, 2c + 1 and up tiles tiles / 2 + 2c, + 1 (see above)
};

// Rows a block of work multiplies at most: x's block (at most 240 x 1536 x 2 bytes = 720 KiB) stays
// in L2 while every chunk of tiles reads it. A many-row step (a prefill of thousands of tokens) is
// cut into equal blocks, each chunk of tiles dequantized again for each (a few percent of the dot
// products); a step with few chunks of tiles (576 outputs: 9) is cut into two blocks at least, so
// the pool's threads get work of even sizes.
constexpr int64_t kRowBlock = 240;

constexpr int64_t kTiles = 4;  // weight tiles a chunk of work dequantizes together: 64 outputs
// ... or 2 (32 outputs), where chunks of 4 would leave too few items for the threads: a decode batch
// against 576 or 960 outputs cut its rows in two instead, and each half dequantized every chunk
// again (64 rows: 300-317 GFLOP/s against gate_up's 353, which needs no cut).
constexpr int64_t kNarrowTiles = 2;
// Groups ahead of the one being dequantized whose packed bytes are prefetched into L2: a chunk's
// weights come from memory (a step reads every layer once), and its first loads stalled the
// dequantization (the 4 projections of 30 layers at 64 rows, 2 Zen 4 cores, best of 20, three
// alternating runs: 39.9-40.6 -> 37.9-38.1 ms; 32 rows 24.7-25.4 -> 22.6-25.2; 512 within noise;
// 2 and 8 groups ahead no better).
constexpr int64_t kAhead = 4;

// Rows r0 .. r0 + MN of x against the dequantized tiles b (groups x NT x 1 KiB): y columns c0 ..
// c0 + 16 NT, clipped to n. MN = 6, NT = 4: 24 accumulators, 4 weight rows and a broadcast within
// the 32 registers, 6 broadcasts and 4 loads for 24 dot products (MN = 12, NT = 2: 12 and 2).
template <int MN, int NT>
void rows_x_tiles(const Job& j, const uint16_t* b, int64_t r0, int64_t c0) {
  __m512 acc[MN][NT];
  for (int r = 0; r < MN; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  const int64_t groups = j.k / kGroup;
  const uint16_t* x = j.x + r0 * j.k;
  for (int64_t g = 0; g < groups; ++g) {
    const uint16_t* bg = b + g * NT * 512;  // tile t's 16 pairs of k at bg + t * 512
    for (int kp = 0; kp < 16; ++kp) {
      __m512bh w[NT];
      for (int t = 0; t < NT; ++t) w[t] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(bg + t * 512 + kp * 32));
      for (int r = 0; r < MN; ++r) {
        int32_t pair;  // x[r, 2kp], x[r, 2kp + 1] of this group
        std::memcpy(&pair, x + r * j.k + g * kGroup + 2 * kp, 4);
        const __m512bh a = reinterpret_cast<__m512bh>(_mm512_set1_epi32(pair));
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], w[t], a);
      }
    }
  }
  if (j.gate_up) {  // c0: the chunk's first gate column, also its first output column
    for (int r = 0; r < MN; ++r)
      for (int t = 0; t < NT / 2; ++t)
        simd::store(j.y + (r0 + r) * (j.n / 2) + c0 + t * kTile, simd::silu_times(acc[r][t], acc[r][t + NT / 2]));
    return;
  }
  for (int t = 0; t < NT; ++t) {
    const int64_t col = c0 + t * kTile;
    if (col >= j.n) break;
    const __mmask16 mask = col + kTile <= j.n ? 0xFFFF : static_cast<__mmask16>((1u << (j.n - col)) - 1);
    for (int r = 0; r < MN; ++r) _mm512_mask_storeu_ps(j.y + (r0 + r) * j.n + col, mask, acc[r][t]);
  }
}

// Work items [begin, end): item i is block i / quads of rows against chunk i % quads of NT tiles
template <int NT>
void run_items(const Job& j, int64_t begin, int64_t end) {
  const int64_t groups = j.k / kGroup;
  AlignedVector<uint16_t> b(groups * NT * kPairBytes / 2);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t quad = item % j.quads, r_begin = item / j.quads * j.block_rows;
    const int64_t r_end = std::min(j.m, r_begin + j.block_rows);
    const int64_t t0 = NT * quad, nt = j.gate_up ? NT : std::min<int64_t>(NT, j.tiles - t0);
    const int64_t g0 = j.gate_up ? NT / 2 * quad : t0;  // the chunk's first (gate) tile
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t t = 0; t < NT; ++t) {
        uint16_t* dst = b.data() + (g * NT + t) * 512;
        const int64_t src = !j.gate_up || t < NT / 2 ? g0 + t : j.tiles / 2 + g0 + t - NT / 2;
        if (t < nt) {
          const uint8_t* blk = j.packed + src * j.tile_bytes + g * 320;
          if (g + kAhead < groups)
            for (int l = 0; l < 320; l += 64) _mm_prefetch(reinterpret_cast<const char*>(blk + kAhead * 320 + l), _MM_HINT_T1);
          dequant_group(blk, dst);
        }
        else std::memset(dst, 0, kPairBytes);  // past the last tile: zeros, never stored
      }
    int64_t r0 = r_begin;
    const int64_t c0 = g0 * kTile;
    constexpr int kRows = NT == kTiles ? 6 : 12;  // 24 accumulators
    // The rows left over in blocks of 8 and 4 before pairs: a decode batch of 64 ends in 4 rows,
    // which as two blocks of 2 (4 or 8 accumulators, too few to hide the dot products' latency)
    // cost 6-11% of a 576- or 960-output projection (min of 4 runs on 2 Zen 4 cores: o 0.124 ->
    // 0.115 ms, qkv 0.201 -> 0.189, down 0.330 -> 0.297; at 40 rows 9-17%).
    for (; r0 + kRows <= r_end; r0 += kRows) rows_x_tiles<kRows, NT>(j, b.data(), r0, c0);
    if constexpr (NT == kNarrowTiles) {
      if (r0 + 8 <= r_end) rows_x_tiles<8, NT>(j, b.data(), r0, c0), r0 += 8;
    }
    if (r0 + 4 <= r_end) rows_x_tiles<4, NT>(j, b.data(), r0, c0), r0 += 4;
    for (; r0 + 2 <= r_end; r0 += 2) rows_x_tiles<2, NT>(j, b.data(), r0, c0);
    for (; r0 < r_end; ++r0) rows_x_tiles<1, NT>(j, b.data(), r0, c0);
  }
}

}  // namespace

bool bf16dot_usable() { return true; }

namespace {
void run(const float* x, int64_t m, int64_t k, const uint8_t* packed, int64_t n, float* y, bool gate_up) {
  const int64_t tiles = (n + kTile - 1) / kTile;
  AlignedVector<uint16_t> xb(m * k);
  // rows in chunks of about 64 KiB of x
  Pool::get().for_each(m, std::max<int64_t>(1, 16384 / k), [&](int64_t begin, int64_t end) {
    to_bf16(x + begin * k, end - begin, end - begin, k, xb.data() + begin * k);
  });
  const int64_t blocks = (m + kRowBlock - 1) / kRowBlock;
  const bool narrow = !gate_up && blocks * ((tiles + kTiles - 1) / kTiles) < kMinItems;
  const int64_t width = narrow ? kNarrowTiles : kTiles, quads = (tiles + width - 1) / width;
  const int64_t block_rows = row_block_rows(m, quads, kRowBlock);
  const Job job{xb.data(), packed, y, m, k, n, tiles, k / kGroup * 320, quads, block_rows, gate_up};
  Pool::get().for_each((m + block_rows - 1) / block_rows * quads, 1, [&](int64_t begin, int64_t end) {
    if (narrow) run_items<kNarrowTiles>(job, begin, end);
    else run_items<kTiles>(job, begin, end);
  });
}
}  // namespace

void q4_linear_bf16dot(const float* x, int64_t m, int64_t k, const uint8_t* packed, int64_t n, float* y) {
  run(x, m, k, packed, n, y, false);
}

void q4_gate_up_silu_bf16dot(const float* x, int64_t m, int64_t k, const uint8_t* packed, int64_t n, float* y) {
  TORCH_CHECK(n % (kTiles * kTile) == 0, "a fused gate_up needs n a multiple of ", kTiles * kTile);
  run(x, m, k, packed, n, y, true);
}

#else

bool bf16dot_usable() { return false; }

void q4_linear_bf16dot(const float*, int64_t, int64_t, const uint8_t*, int64_t, float*) {
  TORCH_CHECK(false, "this build of the kernels has no AVX-512 BF16 path");
}

void q4_gate_up_silu_bf16dot(const float*, int64_t, int64_t, const uint8_t*, int64_t, float*) {
  TORCH_CHECK(false, "this build of the kernels has no AVX-512 BF16 path");
}

#endif

}  // namespace llm
