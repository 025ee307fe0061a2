// The int4 linear layer on AMX tiles (Intel Sapphire Rapids and later), for steps of many rows:
// prefill chunks and large decode batches. Same result as q4_linear (quant_linear.cpp) up to bf16
// rounding: y = x @ W^T with W = code * scale + min per group of 32 input channels.
//
// Why: AMX multiplies a 16 x 32 bf16 tile by a 32 x 16 one in one instruction (TDPBF16PS, 8192
// multiply-adds), where the VNNI path does 32 a vector instruction. The codes are dequantized to bf16
// once per call and per 16 output rows into a small buffer, in exactly the layout the instruction
// reads, so no dense copy of the weight is kept and every row of x reuses the dequantized tile.
//
//   x      fp32 [M, K]    -> bf16 [M16, K], rows padded to 16 with zeros
//   W tile 16 output rows, group g -> B [16 pairs of k][16 rows][2] bf16 (the VNNI pair layout:
//                            row kp holds W[n][2kp], W[n][2kp+1] for n = 0..15: 64 bytes)
//   C      fp32 16 x 16 per (16 rows of x, 16 output rows), summed over the K / 32 groups
//
// Tiles: C 0-3 (2 x 2 blocks of 16 x 16), A 4-5, B 6-7; each chunk of work is two weight tiles
// (32 output channels) against every row of x, so a dequantized pair is used M / 16 times.
#include "amx.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "pool.h"
#include "q4_bf16.h"

namespace llm {

namespace {
std::atomic<int64_t> min_rows{kAmxMinRows};
}  // namespace

int64_t amx_min_rows() { return min_rows.load(std::memory_order_relaxed); }
void set_amx_min_rows(int64_t rows) { min_rows.store(std::max<int64_t>(1, rows), std::memory_order_relaxed); }

#if LLM_AMX
namespace {

// Parts (a group of one tile: 320 packed bytes) ahead of the one being dequantized whose bytes are
// prefetched into L2: 30 layers' projections at 64 rows on 2 Sapphire Rapids cores, medians of 30,
// three alternating runs: 22.6-24.8 -> 19.5-20.4 ms; 512 rows 91.2-91.9 -> 85.9-88.5 ms.
constexpr int64_t kAhead = 4;

constexpr int kArchReqXcompPerm = 0x1023;  // arch_prctl: ask for an extended state component
constexpr int kXfeatureXtiledata = 18;     // the AMX tile data

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

void load_tile_config() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  // ldtilecfg as asm that names cfg as its memory input: GCC 12's _tile_loadconfig does not tell the
  // optimizer it reads cfg, and once this function stood alone (tiles_16x64) the stores of colsb and
  // rows were dropped as dead, ldtilecfg read garbage and faulted.
  asm volatile("ldtilecfg %0" : : "m"(cfg));
}

// C tile t -> y rows [r0, r0 + 16) x columns [c0, c0 + 16), clipped to m x n. (The tile intrinsics
// take their register as a literal, hence the switch.)
inline void tile_store(int t, void* dst, int64_t stride) {
  switch (t) {
    case 0: _tile_stored(0, dst, stride); break;
    case 1: _tile_stored(1, dst, stride); break;
    case 2: _tile_stored(2, dst, stride); break;
    default: _tile_stored(3, dst, stride); break;
  }
}

inline void store_tile(int t, float* y, int64_t m, int64_t n, int64_t r0, int64_t c0) {
  if (r0 >= m || c0 >= n) return;
  if (r0 + 16 <= m && c0 + 16 <= n) {
    tile_store(t, y + r0 * n + c0, n * 4);
    return;
  }
  alignas(64) float tmp[16 * 16];
  tile_store(t, tmp, 64);
  const __mmask16 mask = c0 + 16 <= n ? 0xFFFF : static_cast<__mmask16>((1u << (n - c0)) - 1);
  for (int64_t r = 0; r < 16 && r0 + r < m; ++r) _mm512_mask_storeu_ps(y + (r0 + r) * n + c0, mask, _mm512_load_ps(tmp + r * 16));
}

struct Job {
  const uint16_t* x;  // bf16 [m16, k]
  const uint8_t* packed;
  float* y;  // [m, n], or [m, n / 2] when `gate_up`
  int64_t m, m16, k, n, tiles, tile_bytes;
  bool gate_up;  // pair i is (gate tile i, up tile tiles / 2 + i), written as silu(gate) * up
};

// y rows [r0, r0 + 32) x 16 columns from c0 (clipped to m): silu(gate) * up of C tiles 0 / 1 (rows
// r0..) and 2 / 3 (rows r0 + 16..), the two halves of a gate_up pair
void store_silu(float* y, int64_t m, int64_t width, int64_t r0, int64_t c0, bool two) {
  alignas(64) float c[4][16 * 16];
  _tile_stored(0, c[0], 64);
  _tile_stored(1, c[1], 64);
  if (two) {
    _tile_stored(2, c[2], 64);
    _tile_stored(3, c[3], 64);
  }
  for (int64_t r = 0; r < 32 && r0 + r < m && (r < 16 || two); ++r) {
    const float *g = c[r < 16 ? 0 : 2] + (r % 16) * 16, *u = c[r < 16 ? 1 : 3] + (r % 16) * 16;
    simd::store(y + (r0 + r) * width + c0, simd::silu_times(simd::load(g), simd::load(u)));
  }
}

// Part i of 2 x groups of a pair's dequantization: tile i / groups, group i % groups. Its packed
// bytes, or null where the pair has no such tile (an odd last tile's second half).
const uint8_t* part_bytes(const Job& j, int64_t pair, int64_t i) {
  const int64_t groups = j.k / kGroup, t = i / groups, g = i % groups;
  const int64_t t0 = j.gate_up ? pair : 2 * pair, nt = j.gate_up ? 2 : std::min<int64_t>(2, j.tiles - t0);
  const int64_t step = j.gate_up ? j.tiles / 2 : 1;  // from the pair's first tile to its second
  return t < nt ? j.packed + (t0 + t * step) * j.tile_bytes + g * 320 : nullptr;
}

// Part i of a pair's dequantization into buf (a missing tile's half is zeros: B tile 7 multiplies
// them, and its columns are clipped). The part kAhead parts on, in this pair or the chunk's next
// (below `end`), is prefetched into L2: the weights come from memory (a step reads every layer once),
// and the dequantization's first loads stalled on them.
void dequant_part(const Job& j, int64_t pair, int64_t i, uint16_t* buf, int64_t end) {
  const int64_t groups = j.k / kGroup, parts = 2 * groups, ahead = i + kAhead;
  const int64_t pp = pair + ahead / parts;
  if (const uint8_t* p = pp < end ? part_bytes(j, pp, ahead % parts) : nullptr)
    for (int l = 0; l < 320; l += 64) _mm_prefetch(reinterpret_cast<const char*>(p + l), _MM_HINT_T1);
  if (const uint8_t* blk = part_bytes(j, pair, i)) dequant_group(blk, buf + (i % groups * 2 + i / groups) * 512);
  else std::memset(buf + (i % groups * 2 + 1) * 512, 0, kPairBytes);
}

// One chunk: pairs of weight tiles [begin, end) against every row. The next pair is dequantized
// (on the vector units) in slices between this pair's tile products (on the AMX unit), so the two
// overlap: one core, 64 x 576 rows against 3072 outputs 0.41-0.43 -> 0.34 ms, 32 rows 0.29 -> 0.26,
// 512 rows 3% (a standalone loop, 2026-12-05, Sapphire Rapids).
void run_pairs(const Job& j, int64_t begin, int64_t end) {
  const int64_t groups = j.k / kGroup, stride = j.k * 2, parts = 2 * groups;
  const int64_t iters = (j.m16 + 31) / 32 * groups;  // tile steps a pair
  AlignedVector<uint16_t> bufs(2 * groups * 2 * kPairBytes / 2);  // this pair's and the next's
  uint16_t* const buf[2] = {bufs.data(), bufs.data() + groups * kPairBytes};
  load_tile_config();
  for (int64_t i = 0; i < parts; ++i) dequant_part(j, begin, i, buf[0], end);
  for (int64_t pair = begin; pair < end; ++pair) {
    const int64_t t0 = j.gate_up ? pair : 2 * pair;
    const uint16_t* bbuf = buf[(pair - begin) & 1];
    uint16_t* next = pair + 1 < end ? buf[(pair - begin + 1) & 1] : nullptr;
    int64_t done = 0, it = 0;  // the next pair's parts dequantized; tile steps taken
    for (int64_t m0 = 0; m0 < j.m16; m0 += 32) {
      const bool two = m0 + 16 < j.m16;  // a second block of 16 rows
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      tiles_read_memory();  // x's bf16 rows and this pair's dequantized tiles
      for (int64_t g = 0; g < groups; ++g) {
        const uint16_t* b = bbuf + g * 2 * 512;
        const uint16_t* a = j.x + m0 * j.k + g * kGroup;
        _tile_loadd(4, a, stride);
        _tile_loadd(6, b, 64);
        _tile_loadd(7, b + 512, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        if (two) {
          _tile_loadd(5, a + 16 * j.k, stride);
          _tile_dpbf16ps(2, 5, 6);
          _tile_dpbf16ps(3, 5, 7);
        }
        if (next)  // the next pair's share of parts by this step
          for (const int64_t target = (++it * parts + iters - 1) / iters; done < target; ++done)
            dequant_part(j, pair + 1, done, next, end);
      }
      if (j.gate_up) {
        store_silu(j.y, j.m, j.n / 2, m0, pair * kTile, two);
        continue;
      }
      const int64_t c0 = t0 * kTile;
      store_tile(0, j.y, j.m, j.n, m0, c0);
      store_tile(1, j.y, j.m, j.n, m0, c0 + 16);
      if (two) {
        store_tile(2, j.y, j.m, j.n, m0 + 16, c0);
        store_tile(3, j.y, j.m, j.n, m0 + 16, c0 + 16);
      }
    }
  }
  _tile_release();
}

bool request_amx() { return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0; }

}  // namespace

void tiles_16x64() { load_tile_config(); }

bool amx_usable() {
  static const bool granted = request_amx();  // once per process; every thread then may use tiles
  return granted;
}

namespace {
// From kRowSplit rows, each thread multiplies its own block of rows by every pair of weight tiles,
// dequantizing every pair itself (blocks of at most kRowBlock rows, whose bf16 x stays in L2, as
// many as a multiple of the threads, as even as 16-row tiles allow); below, the threads share out
// the pairs. Why: on a 2-core Sapphire Rapids whose cores pass a cache line in about 0.4 us each way
// (12-14 GB/s), the helper's tile loads of x, which the caller had just written, cost more than the
// half of the work they saved (a 64 x 576 qkv projection: 98 us on one thread, 112 on two). Rows
// split, each thread converts and reads only its own rows of x and writes only its rows of y. The
// dequantization is then made once a block, not once a call (about 10 ms of one core a 30-layer
// step), which the tile products of 64 rows and more hide. 30 layers' projections, medians of 12,
// alternating: 64 rows 20.5 -> 18.6 ms, 128 rows 27.6 -> 24.4, 512 rows 77.7 -> 67.2; 32 rows were
// slower split (15.2 -> 16.2 ms), hence not below 64.
//
// Up to kPairSplitMax rows, though, the dequantization outweighs the tile products (a decode step of
// 64 sequences: every weight dequantized on both cores for 32 rows each), so there each thread
// converts x into a bf16 copy of its own (its tile loads never read lines the other core just wrote)
// and takes every row against its share of the pairs, dequantizing each pair once a call. The
// engine alone on 2 Sapphire Rapids cores (2026-12-06), alternating: batch-64 decode steps, medians
// 75.0 / 71.5 / 64.0 / 74.5 / 66.5 / 72.6 -> 58.7 / 64.2 / 63.7 / 62.2 / 59.8 / 83.5 ms; batch 128
// 110 -> 106 ms; the offline load (64 x 128 / 128) 576 / 573 / 561 -> 616 / 661 / 625 tok/s. A
// 128-row prefill step is the same either way (49 / 65 / 64 -> 55 / 68 / 63 ms); 256 and 512 rows
// were slower (107 -> 114, 214-227 -> 240 ms), so rows stay split there.
constexpr int64_t kRowSplit = 64, kRowBlock = 512, kPairSplitMax = 128;

void run(const float* x, int64_t m, int64_t k, const uint8_t* packed, int64_t n, float* y, bool gate_up) {
  const int64_t m16 = (m + 15) / 16 * 16, tiles = (n + kTile - 1) / kTile, pairs = (tiles + 1) / 2;
  const int64_t tile_bytes = k / kGroup * 320, threads = Pool::get().threads();
  if (m >= kRowSplit && m <= kPairSplitMax && threads > 1) {
    Pool::get().for_each(threads, 1, [&](int64_t begin, int64_t end) {
      AlignedVector<uint16_t> own(m16 * k);  // this thread's bf16 x, converted here
      to_bf16(x, m, m16, k, own.data());
      const Job job{own.data(), packed, y, m, m16, k, n, tiles, tile_bytes, gate_up};
      for (int64_t t = begin; t < end; ++t) {
        const int64_t p0 = t * pairs / threads, p1 = (t + 1) * pairs / threads;
        if (p0 < p1) run_pairs(job, p0, p1);
      }
    });
    return;
  }
  AlignedVector<uint16_t> xb(m16 * k);
  if (m >= kRowSplit && threads > 1) {
    const int64_t blocks = threads * ((m16 + threads * kRowBlock - 1) / (threads * kRowBlock));  // even shares
    const int64_t rows = (m16 / 16 + blocks - 1) / blocks * 16;  // a multiple of 16
    Pool::get().for_each(blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const int64_t r0 = b * rows;
        if (r0 >= m) continue;
        const int64_t mb = std::min(rows, m - r0), mb16 = (mb + 15) / 16 * 16;
        to_bf16(x + r0 * k, mb, mb16, k, xb.data() + r0 * k);
        const Job job{xb.data() + r0 * k, packed, y + r0 * (gate_up ? n / 2 : n), mb, mb16, k, n, tiles, tile_bytes, gate_up};
        run_pairs(job, 0, pairs);
      }
    });
    return;
  }
  to_bf16(x, m, m16, k, xb.data());
  const Job job{xb.data(), packed, y, m, m16, k, n, tiles, tile_bytes, gate_up};
  // chunks of up to 4 pairs (128 output channels; the tile configuration is loaded once a chunk),
  // one pair where a layer has few: 576 outputs are 18 pairs, which in fours left one core a
  // third more work than the other
  Pool::get().for_each(pairs, std::clamp<int64_t>(pairs / 16, 1, 4), [&](int64_t begin, int64_t end) { run_pairs(job, begin, end); });
}
}  // namespace

void q4_linear_amx(const float* x, int64_t m, int64_t k, const uint8_t* packed, int64_t n, float* y) {
  run(x, m, k, packed, n, y, false);
}

void q4_gate_up_silu_amx(const float* x, int64_t m, int64_t k, const uint8_t* packed, int64_t n, float* y) {
  run(x, m, k, packed, n, y, true);
}

#else

bool amx_usable() { return false; }
void tiles_16x64() {}

void q4_linear_amx(const float*, int64_t, int64_t, const uint8_t*, int64_t, float*) {
  TORCH_CHECK(false, "this build of the kernels has no AMX path");
}

void q4_gate_up_silu_amx(const float*, int64_t, int64_t, const uint8_t*, int64_t, float*) {
  TORCH_CHECK(false, "this build of the kernels has no AMX path");
}

#endif

}  // namespace llm
