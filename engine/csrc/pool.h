// A work-claiming thread pool for the kernels' outer loops (weight tiles, attention heads).
//
// Why not OpenMP's (torch's) team: an OpenMP loop splits its range in fixed shares and waits for
// every thread at its end, so a thread preempted by another process (the frontend, tritonserver;
// the machines have 2 cores) stalls the whole step until it runs again. Here the caller and the
// helpers claim chunks from one counter, the caller included, so work a preempted helper has not
// claimed is done by whoever is running; the caller only ever waits for a chunk already under way,
// and then sleeps (futex), which frees its core for the preempted helper to be moved onto.
//
//   claim_   high 32 bits: the job's generation, low 32 bits: the next chunk to hand out
//   jobs_    two job slots (generation & 1): a helper copies a slot, then claims with a compare-
//            and-swap on claim_ that fails unless the job is still the one it copied
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace llm {

class Pool {
 public:
  using Fn = void (*)(void* ctx, int64_t begin, int64_t end);

  static Pool& get();
  ~Pool();

  // Total threads, the caller included (1: everything runs inline on the caller).
  void set_threads(int threads);
  int threads() const { return static_cast<int>(helpers_.size()) + 1; }

  // Runs fn(ctx, b, e) over [0, n) in chunks of `grain` and returns when every chunk is done.
  void run(int64_t n, int64_t grain, Fn fn, void* ctx);

  template <typename F>
  void for_each(int64_t n, int64_t grain, F&& body) {  // body(begin, end)
    run(n, grain, [](void* c, int64_t b, int64_t e) { (*static_cast<F*>(c))(b, e); }, &body);
  }

 private:
  struct Job {  // atomics: a helper may read a slot the caller is rewriting (its claim then fails)
    std::atomic<Fn> fn{nullptr};
    std::atomic<void*> ctx{nullptr};
    std::atomic<int64_t> n{0}, grain{1};
    std::atomic<uint32_t> chunks{0};
    std::atomic<uint32_t> done{0};
  };

  void helper_loop(uint32_t seen);
  bool claim(uint32_t gen, uint32_t chunks, uint32_t* index);
  void stop_helpers();

  Job jobs_[2];
  std::atomic<uint64_t> claim_{0};
  std::atomic<uint32_t> gen_{0};       // bumped per job: what sleeping helpers wait on
  std::atomic<uint32_t> sleepers_{0};  // helpers asleep on gen_
  std::atomic<bool> caller_sleeping_{false};  // the caller asleep on its job's done count
  std::atomic<bool> stopping_{false};
  std::mutex caller_;  // one caller at a time (the job slots are shared)
  std::vector<std::thread> helpers_;
};

// Work items a row-blocked matmul aims for, at least (2 threads, even sizes), and the fewest rows of
// x a block of one is cut to for that.
constexpr int64_t kMinItems = 16;
constexpr int64_t kMinBlockRows = 24;

// Rows of x one work item of a row-blocked matmul multiplies: at most `max_rows` (so x's block stays
// in L2 while every chunk of weight tiles reads it), and fewer where `m` rows in such blocks would
// give `chunks` chunks of tiles fewer than kMinItems items; each block then costs its chunks'
// dequantization once more.
inline int64_t row_block_rows(int64_t m, int64_t chunks, int64_t max_rows) {
  int64_t blocks = (m + max_rows - 1) / max_rows;
  if (blocks * chunks < kMinItems) blocks = std::max(blocks, std::min((kMinItems + chunks - 1) / chunks, m / kMinBlockRows));
  return (m + blocks - 1) / blocks;
}

}  // namespace llm
