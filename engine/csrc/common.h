// Shared helpers of the engine's CPU kernels (engine/kernels.py builds and loads them).
//
// Every kernel has a vector path, AVX-512 (with VNNI) or else AVX2 (with FMA and F16C), compiled
// for what the build machine's -march=native has, and a portable scalar path computing the same
// quantities, so the library builds and is correct on any x86-64 or ARM host; engine/kernels.py
// reports which one was built. `simd::` below is the float vector both vector paths share.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#define LLM_AVX512 1
#define LLM_AVX2 0
#include <immintrin.h>
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define LLM_AVX512 0
#define LLM_AVX2 1
#include <immintrin.h>
#else
#define LLM_AVX512 0
#define LLM_AVX2 0
#endif
#define LLM_SIMD (LLM_AVX512 || LLM_AVX2)

namespace llm {

constexpr int64_t kTile = 16;   // output rows per weight tile (one AVX-512 register of fp32)
constexpr int64_t kGroup = 32;  // input channels per activation quantization group

// A cache-line aligned allocation for the kernels' scratch buffers: std::vector's memory is only
// 16-byte aligned (a large one sits 16 bytes into its pages), and a vector or tile load of 64 bytes
// that straddles two lines is split. Measured on a 2-core Sapphire Rapids: an AMX tile load from L1
// costs 44 cycles unaligned against 8 aligned, and the int4 tile loop runs 2.6x faster aligned.
template <typename T>
struct LineAligned {
  using value_type = T;
  LineAligned() = default;
  template <typename U>
  LineAligned(const LineAligned<U>&) {}
  T* allocate(std::size_t n) {
    const std::size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { std::free(p); }
  // A vector sized without a value holds indeterminate elements, not zeros: every buffer is written
  // before it is read (the scratch of a matmul call or an attention chunk), and zeroing it was 2% of
  // a decode step's time (memset, measured on a 2-core Zen 4 at batch 64). Pass a value to fill.
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <typename U>
  bool operator==(const LineAligned<U>&) const { return true; }
};
template <typename T>
using AlignedVector = std::vector<T, LineAligned<T>>;

// One layer's KV cache pair: [blocks, block_size, Hkv, D], float32 or bfloat16, as attention and
// rope_store read and write it.
inline void check_cache(const at::Tensor& kc, const at::Tensor& vc) {
  TORCH_CHECK(kc.dim() == 4 && kc.is_contiguous() && vc.is_contiguous() && kc.sizes() == vc.sizes() &&
                  kc.scalar_type() == vc.scalar_type() &&
                  (kc.scalar_type() == at::kFloat || kc.scalar_type() == at::kBFloat16),
              "k/v caches must be contiguous [blocks, block_size, Hkv, D] float32 or bfloat16 tensors");
}

inline void check_f32_2d(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.dim() == 2 && t.scalar_type() == at::kFloat && t.is_contiguous(), name,
              " must be a contiguous 2-d float32 tensor");
}

#if LLM_SIMD
namespace simd {
// e^x = 2^n e^r, x = n ln2 + r, |r| <= ln2 / 2, e^r by a degree-6 polynomial (relative error
// about 2e-7). x is clamped to [-87, 88] first: softmax and SiLU want 0 (2^-126 here) below.
constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693145751953125f, kLn2Lo = 1.428606765330187045e-06f;

#if LLM_AVX512
constexpr int64_t W = 16;  // lanes
using V = __m512;
inline V load(const float* p) { return _mm512_loadu_ps(p); }
inline V load(const at::BFloat16* p) {  // bf16 is the high half of an fp32
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
}
inline void store(float* p, V v) { _mm512_storeu_ps(p, v); }
inline V set1(float x) { return _mm512_set1_ps(x); }
inline V zero() { return _mm512_setzero_ps(); }
inline V add(V a, V b) { return _mm512_add_ps(a, b); }
inline V sub(V a, V b) { return _mm512_sub_ps(a, b); }
inline V mul(V a, V b) { return _mm512_mul_ps(a, b); }
inline V div(V a, V b) { return _mm512_div_ps(a, b); }
inline V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline V fnmadd(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
inline V min(V a, V b) { return _mm512_min_ps(a, b); }
inline V max(V a, V b) { return _mm512_max_ps(a, b); }
inline V round(V a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline V pow2(V p, V n) { return _mm512_scalef_ps(p, n); }  // p * 2^n
inline float hsum(V v) { return _mm512_reduce_add_ps(v); }
inline float hmax(V v) { return _mm512_reduce_max_ps(v); }
#else
constexpr int64_t W = 8;
using V = __m256;
inline V load(const float* p) { return _mm256_loadu_ps(p); }
inline V load(const at::BFloat16* p) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
}
inline void store(float* p, V v) { _mm256_storeu_ps(p, v); }
inline V set1(float x) { return _mm256_set1_ps(x); }
inline V zero() { return _mm256_setzero_ps(); }
inline V add(V a, V b) { return _mm256_add_ps(a, b); }
inline V sub(V a, V b) { return _mm256_sub_ps(a, b); }
inline V mul(V a, V b) { return _mm256_mul_ps(a, b); }
inline V div(V a, V b) { return _mm256_div_ps(a, b); }
inline V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline V fnmadd(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
inline V min(V a, V b) { return _mm256_min_ps(a, b); }
inline V max(V a, V b) { return _mm256_max_ps(a, b); }
inline V round(V a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline V pow2(V p, V n) {  // n integral in [-126, 127] (exp's clamp): 2^n built in the exponent bits
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
inline float hsum(V v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
inline float hmax(V v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}
#endif

inline V exp(V x) {
  x = min(max(x, set1(-87.0f)), set1(88.0f));
  const V n = round(mul(x, set1(kLog2e)));
  V r = fnmadd(n, set1(kLn2Hi), x);
  r = fnmadd(n, set1(kLn2Lo), r);
  V p = set1(1.0f / 720.0f);
  p = fmadd(p, r, set1(1.0f / 120.0f));
  p = fmadd(p, r, set1(1.0f / 24.0f));
  p = fmadd(p, r, set1(1.0f / 6.0f));
  p = fmadd(p, r, set1(0.5f));
  p = fmadd(p, r, set1(1.0f));
  p = fmadd(p, r, set1(1.0f));
  return pow2(p, n);
}
// silu(g) * u = g / (1 + e^-g) * u: silu_mul (elementwise.cpp) and the AMX gate_up epilogue
// (amx_linear.cpp) both compute it here, so they give the same bits
inline V silu_times(V g, V u) {
  const V one = set1(1.0f);
  return mul(mul(g, div(one, add(one, exp(sub(zero(), g))))), u);
}
}  // namespace simd
#endif

}  // namespace llm
