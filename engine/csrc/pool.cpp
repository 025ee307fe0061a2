// The kernels' work-claiming pool (pool.h says why and how).
#include "pool.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

namespace llm {
namespace {

// Raw futexes: libstdc++ 12's std::atomic::wait can miss a notify (fixed in 13).
inline void futex_wait(std::atomic<uint32_t>& word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

inline void futex_wake_all(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins (about 20-40 us) before a helper or the caller sleeps: the kernels of one step follow each
// other within microseconds, and a futex wake-up costs more than that.
constexpr int kSpins = 8000;

}  // namespace

Pool& Pool::get() {
  static Pool pool;
  return pool;
}

Pool::~Pool() { stop_helpers(); }

void Pool::stop_helpers() {
  if (helpers_.empty()) return;
  stopping_.store(true, std::memory_order_seq_cst);
  gen_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(gen_);
  for (auto& t : helpers_) t.join();
  helpers_.clear();
  stopping_.store(false, std::memory_order_seq_cst);
}

void Pool::set_threads(int threads) {
  std::lock_guard<std::mutex> lock(caller_);
  threads = std::max(1, threads);
  if (threads == this->threads()) return;
  stop_helpers();
  // the generation a helper starts from is read here: one that starts running only after a later
  // stop_helpers() bumped gen_ must still see that bump
  const uint32_t seen = gen_.load(std::memory_order_seq_cst);
  for (int i = 1; i < threads; ++i) helpers_.emplace_back([this, seen] { helper_loop(seen); });
}

bool Pool::claim(uint32_t gen, uint32_t chunks, uint32_t* index) {
  uint64_t c = claim_.load(std::memory_order_acquire);
  while (static_cast<uint32_t>(c >> 32) == gen && static_cast<uint32_t>(c) < chunks) {
    if (claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
      *index = static_cast<uint32_t>(c);
      return true;
    }
  }
  return false;
}

void Pool::helper_loop(uint32_t seen) {
  pthread_setname_np(pthread_self(), "llm-pool");  // top -H, /proc/<pid>/task/<tid>/comm
  while (true) {
    uint32_t g = gen_.load(std::memory_order_acquire);
    for (int i = 0; g == seen && i < kSpins; ++i) {
      cpu_relax();
      g = gen_.load(std::memory_order_acquire);
    }
    if (g == seen) {  // nothing new: sleep until the caller publishes a job
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      if (gen_.load(std::memory_order_seq_cst) == seen) futex_wait(gen_, seen);
      sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      continue;
    }
    seen = g;
    if (stopping_.load(std::memory_order_seq_cst)) return;
    // Copy the job the claim counter names; a claim succeeds only while it is still that job.
    const uint32_t job_gen = static_cast<uint32_t>(claim_.load(std::memory_order_acquire) >> 32);
    Job& job = jobs_[job_gen & 1];
    const Fn fn = job.fn.load(std::memory_order_relaxed);
    void* ctx = job.ctx.load(std::memory_order_relaxed);
    const int64_t n = job.n.load(std::memory_order_relaxed), grain = job.grain.load(std::memory_order_relaxed);
    const uint32_t chunks = job.chunks.load(std::memory_order_relaxed);
    uint32_t index;
    while (claim(job_gen, chunks, &index)) {
      const int64_t begin = static_cast<int64_t>(index) * grain;
      fn(ctx, begin, std::min(n, begin + grain));
      const bool last = job.done.fetch_add(1, std::memory_order_seq_cst) + 1 == chunks;
      if (last && caller_sleeping_.load(std::memory_order_seq_cst)) futex_wake_all(job.done);
    }
  }
}

void Pool::run(int64_t n, int64_t grain, Fn fn, void* ctx) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t chunks64 = (n + grain - 1) / grain;
  std::lock_guard<std::mutex> lock(caller_);
  if (helpers_.empty() || chunks64 <= 1) {
    fn(ctx, 0, n);
    return;
  }
  const uint32_t chunks = static_cast<uint32_t>(std::min<int64_t>(chunks64, UINT32_MAX));
  grain = (n + chunks - 1) / chunks;
  const uint32_t job_gen = gen_.load(std::memory_order_relaxed) + 1;  // only callers write gen_
  Job& job = jobs_[job_gen & 1];
  job.fn.store(fn, std::memory_order_relaxed);
  job.ctx.store(ctx, std::memory_order_relaxed);
  job.n.store(n, std::memory_order_relaxed);
  job.grain.store(grain, std::memory_order_relaxed);
  job.chunks.store(chunks, std::memory_order_relaxed);
  job.done.store(0, std::memory_order_relaxed);
  claim_.store(static_cast<uint64_t>(job_gen) << 32, std::memory_order_release);
  gen_.store(job_gen, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake_all(gen_);
  uint32_t index;
  while (claim(job_gen, chunks, &index)) {
    const int64_t begin = static_cast<int64_t>(index) * grain;
    fn(ctx, begin, std::min(n, begin + grain));
    job.done.fetch_add(1, std::memory_order_acq_rel);
  }
  // Only chunks a helper is running are left: spin a little, then sleep until the last one ends.
  uint32_t d = job.done.load(std::memory_order_acquire);
  for (int i = 0; d < chunks && i < kSpins; ++i) {
    cpu_relax();
    d = job.done.load(std::memory_order_acquire);
  }
  while (d < chunks) {
    caller_sleeping_.store(true, std::memory_order_seq_cst);
    d = job.done.load(std::memory_order_seq_cst);
    if (d < chunks) futex_wait(job.done, d);
    caller_sleeping_.store(false, std::memory_order_seq_cst);
    d = job.done.load(std::memory_order_acquire);
  }
}

}  // namespace llm
