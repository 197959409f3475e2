#pragma once
// The polling wait every non-blocking collective wait goes through: ask, nap, ask again, and give
// up at a deadline. Header-only, so the GPU library's NCCL waits and the unit tests' fake
// collectives run the same loop.
#include <chrono>
#include <thread>

namespace tp {

// Returns once `done()` is true. When `seconds` pass first, calls `expired()`, which must not
// return (it aborts and throws). `nap` zero yields the core instead of sleeping.
template <class Done, class Expired>
void poll_until_deadline(Done&& done, double seconds, Expired&& expired,
                         std::chrono::microseconds nap) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(seconds));
  for (;;) {
    if (done()) return;
    if (Clock::now() > deadline) expired();
    if (nap.count() > 0)
      std::this_thread::sleep_for(nap);
    else
      std::this_thread::yield();
  }
}

}  // namespace tp
