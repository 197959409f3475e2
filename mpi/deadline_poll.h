#pragma once
// The polling wait every non-blocking collective wait goes through: ask, nap, ask again, and give
// up once the deadline has passed. Header-only, so the GPU library's NCCL waits and the unit
// tests' fake collectives run the same loop.
#include <chrono>
#include <thread>

namespace tp {

// Returns once `done()` is true. When `passed()` turns true first, calls `expired()`, which must
// not return (it aborts and throws). `nap` zero yields the core instead of sleeping.
template <class Done, class Passed, class Expired>
void poll_until_deadline(Done&& done, Passed&& passed, Expired&& expired,
                         std::chrono::microseconds nap) {
  for (;;) {
    if (done()) return;
    if (passed()) expired();
    if (nap.count() > 0)
      std::this_thread::sleep_for(nap);
    else
      std::this_thread::yield();
  }
}

}  // namespace tp
