#pragma once
// The checkpoint interval that minimises what checkpoints and failures cost together
// (docs/acceptance.md, "Cost"), for a checkpoint that stalls training C seconds and a mean time
// between failures M. A checkpoint after T seconds of training costs C / (T + C) of the time, the
// checkpoint overhead as the report defines it (docs/report.md, "Checkpoint overhead"), so
// Young's first-order interval becomes T = sqrt(2 C M) - C, never shorter than the time a
// checkpoint takes to become durable.
namespace tp {

struct IntervalInputs {
  double stall_s = 0;            // training time one checkpoint costs (the measured stall)
  double time_to_durable_s = 0;  // from the save's start to its commit (async: after the stall)
  double mtbf_s = 0;             // of the whole job: 86400 / (failures per node-day x nodes)
  double step_s = 0;             // the measured step without its checkpoint phase
};

struct IntervalChoice {
  double seconds = 0;
  long long steps = 0;  // at least 1
  // Expected share of wall time lost at that interval: the checkpoint overhead
  // stall / (interval + stall), plus the expected redone work per failure (half the interval
  // plus the time to durable) over the MTBF.
  double lost_fraction = 0;
};

// The interval that minimises stall/(interval + stall) + (interval/2 + time_to_durable)/MTBF.
// Zero inputs (no failures expected, or a free checkpoint) give no interval: steps 0.
IntervalChoice optimal_checkpoint_interval(const IntervalInputs& in);
// The same loss for a given interval (the one the run used), for comparison.
double lost_fraction_at(const IntervalInputs& in, double interval_s);

}  // namespace tp
