#include "app/job/checkpoint_interval.h"

#include <algorithm>
#include <cmath>

namespace tp {

double lost_fraction_at(const IntervalInputs& in, double interval_s) {
  if (interval_s <= 0 || in.mtbf_s <= 0) return 0.0;
  return in.stall_s / (interval_s + in.stall_s) +
         (interval_s / 2 + in.time_to_durable_s) / in.mtbf_s;
}

IntervalChoice optimal_checkpoint_interval(const IntervalInputs& in) {
  IntervalChoice choice;
  if (in.mtbf_s <= 0 || in.stall_s <= 0 || in.step_s <= 0) return choice;
  // d/dT (C/(T+C) + T/(2M)) = 0 at T + C = sqrt(2 C M); the time to durable adds a constant.
  choice.seconds =
      std::max(std::sqrt(2.0 * in.stall_s * in.mtbf_s) - in.stall_s, in.time_to_durable_s);
  choice.steps = std::max(1LL, std::llround(choice.seconds / in.step_s));
  choice.seconds = double(choice.steps) * in.step_s;
  choice.lost_fraction = lost_fraction_at(in, choice.seconds);
  return choice;
}

}  // namespace tp
