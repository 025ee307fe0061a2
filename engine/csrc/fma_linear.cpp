// The int4 linear layer on AVX2 FMAs (fma.h says where and why). Each work item is a chunk of two
// 16-output weight tiles against a block of rows of x: the chunk is dequantized to fp32 once per
// item, [tile][k][16 outputs] (K x 64 bytes a tile: 36-96 KiB, in L2), and the inner loop is a
// 6-row x 16-output microkernel: per k, two weight rows and six broadcasts of x for 12 FMAs, whose
// 12 accumulators, 2 weight rows and a broadcast fill 15 of the 16 registers.
//
//   acc[r][h] (8 fp32 lanes = outputs 8h .. 8h + 7 of the tile) += x[r, i] * W[tile output, i]
#include "fma.h"

#include <algorithm>
#include <atomic>

#include "pool.h"
#include "quant_avx2.h"

namespace llm {

namespace {
std::atomic<int64_t> min_rows{kFmaMinRows};
}  // namespace

int64_t fma_min_rows() { return min_rows.load(std::memory_order_relaxed); }
void set_fma_min_rows(int64_t rows) { min_rows.store(std::max<int64_t>(1, rows), std::memory_order_relaxed); }

#if LLM_AVX2
namespace {

constexpr int64_t kChunkTiles = 2;  // 32 outputs a work item
constexpr int64_t kRowBlock = 120;  // rows of x a work item multiplies at most (20 slabs of 6)

// Group g of one packed q4 tile (blk: its 320 bytes) -> dst [32 k][16 outputs] fp32. Word r of a
// block's 64 bytes is output r; (word >> 4p) & 0x000F000F holds the codes of k = 8b + 2p, + 1.
inline void dequant_group(const uint8_t* blk, float* dst) {
  const __m256i nibbles = _mm256_set1_epi32(0x000F000F), low = _mm256_set1_epi32(0xFFFF);
  for (int h = 0; h < 2; ++h) {  // outputs 8h .. 8h + 7
    const __m256 scale = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 256 + 16 * h)));
    const __m256 mins = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 288 + 16 * h)));
    for (int b = 0; b < 4; ++b) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + b * 64 + 32 * h));
      for (int p = 0; p < 4; ++p) {
        const __m256i pairs = _mm256_and_si256(_mm256_srli_epi32(w, 4 * p), nibbles);
        const __m256 even = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(pairs, low)), scale, mins);
        const __m256 odd = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(pairs, 16)), scale, mins);
        _mm256_store_ps(dst + (8 * b + 2 * p) * kTile + 8 * h, even);
        _mm256_store_ps(dst + (8 * b + 2 * p + 1) * kTile + 8 * h, odd);
      }
    }
  }
}

// Rows x[0 .. MN) (k apart) against one dequantized tile bt [k][16]: y columns col .. col + valid.
template <int MN>
void rows_x_tile(const float* x, int64_t k, const float* bt, float* y, int64_t n, int64_t valid) {
  __m256 acc[MN][2];
  for (int r = 0; r < MN; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k; ++i) {
    const __m256 b0 = _mm256_load_ps(bt + i * kTile), b1 = _mm256_load_ps(bt + i * kTile + 8);
    for (int r = 0; r < MN; ++r) {
      const __m256 a = _mm256_broadcast_ss(x + r * k + i);
      acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
    }
  }
  for (int r = 0; r < MN; ++r) store_rows(y + r * n, acc[r][0], acc[r][1], valid);
}

void rows_x_tile_any(int64_t rows, const float* x, int64_t k, const float* bt, float* y, int64_t n, int64_t valid) {
  switch (rows) {
    case 5: rows_x_tile<5>(x, k, bt, y, n, valid); break;
    case 4: rows_x_tile<4>(x, k, bt, y, n, valid); break;
    case 3: rows_x_tile<3>(x, k, bt, y, n, valid); break;
    case 2: rows_x_tile<2>(x, k, bt, y, n, valid); break;
    default: rows_x_tile<1>(x, k, bt, y, n, valid); break;
  }
}

}  // namespace

bool fma_usable() { return true; }

void q4_linear_fma(const float* x, int64_t m, int64_t k, const uint8_t* packed, int64_t n, float* y) {
  const int64_t tiles = (n + kTile - 1) / kTile, groups = k / kGroup, tile_bytes = groups * 320;
  const int64_t chunks = (tiles + kChunkTiles - 1) / kChunkTiles;
  const int64_t block_rows = row_block_rows(m, chunks, kRowBlock);
  // item i: block i / chunks of rows against chunk i % chunks of tiles
  Pool::get().for_each((m + block_rows - 1) / block_rows * chunks, 1, [&](int64_t begin, int64_t end) {
    AlignedVector<float> b(kChunkTiles * k * kTile);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t0 = item % chunks * kChunkTiles, nt = std::min(kChunkTiles, tiles - t0);
      const int64_t r_begin = item / chunks * block_rows, r_end = std::min(m, r_begin + block_rows);
      for (int64_t t = 0; t < nt; ++t)
        for (int64_t g = 0; g < groups; ++g)
          dequant_group(packed + (t0 + t) * tile_bytes + g * 320, b.data() + (t * k + g * kGroup) * kTile);
      for (int64_t r0 = r_begin; r0 < r_end; r0 += 6) {
        const int64_t rows = std::min<int64_t>(6, r_end - r0);
        for (int64_t t = 0; t < nt; ++t) {
          const int64_t col = (t0 + t) * kTile, valid = std::min(kTile, n - col);
          const float* bt = b.data() + t * k * kTile;
          if (rows == 6) rows_x_tile<6>(x + r0 * k, k, bt, y + r0 * n + col, n, valid);
          else rows_x_tile_any(rows, x + r0 * k, k, bt, y + r0 * n + col, n, valid);
        }
      }
    }
  });
}

#else

bool fma_usable() { return false; }

void q4_linear_fma(const float*, int64_t, int64_t, const uint8_t*, int64_t, float*) {
  TORCH_CHECK(false, "this build of the kernels has no AVX2 FMA path (it has AVX-512, or neither)");
}

#endif

}  // namespace llm
