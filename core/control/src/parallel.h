// A bounded fan-out for the deploy path (docs/decisions/0120): compose, render, check and sign
// every node's declaration on a few threads instead of one. Internal to mesh-control.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace mesh::control::detail {

/// How many threads a deploy's per-node work uses: the control plane's `workers`, at most the
/// machine's cores, at least 1.
inline std::size_t fan_out_threads(std::size_t workers) noexcept {
  const std::size_t cores = std::max<unsigned>(1, std::thread::hardware_concurrency());
  return std::clamp<std::size_t>(workers, 1, cores);
}

/// Calls f(i) once for every i in [0, n), on up to `threads` threads: the caller's and
/// threads - 1 started for the call (joined before it returns). Indices are taken in chunks of
/// 16 in increasing order; which thread runs which is unspecified, so f must only touch what
/// belongs to its index (results go into a slot per index) and must not throw. Below 64 items,
/// or with threads <= 1, everything runs on the caller's thread. When a thread cannot be
/// started, the others (at least the caller) do its share.
template <class F>
void parallel_for(std::size_t n, std::size_t threads, const F& f) {
  constexpr std::size_t kChunk = 16;
  if (threads <= 1 || n < 64) {
    for (std::size_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  auto run = [&] {
    for (;;) {
      const std::size_t from = next.fetch_add(kChunk, std::memory_order_relaxed);
      if (from >= n) return;
      const std::size_t to = std::min(n, from + kChunk);
      for (std::size_t i = from; i < to; ++i) f(i);
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (std::size_t t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(run);
    } catch (...) {
      break;
    }
  }
  run();
  for (auto& t : pool) t.join();
}

}  // namespace mesh::control::detail
