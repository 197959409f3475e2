#include "train/step_loop.h"

#include <spdlog/spdlog.h>
#include <chrono>

#include "train/bucket_plan.h"

namespace tp {

std::vector<double> flatten(const std::vector<StepTiming>& timings) {
  std::vector<double> values;
  values.reserve(timings.size() * kStepTimingFields);
  for (const auto& t : timings)
    values.insert(values.end(), {t.data, t.compute, t.comm, t.comm_exposed, t.optimizer,
                                 t.checkpoint, t.step, t.arrival});
  return values;
}

std::vector<StepTiming> unflatten(const double* v, size_t steps) {
  std::vector<StepTiming> timings(steps);
  for (size_t i = 0; i < steps; ++i, v += kStepTimingFields)
    timings[i] = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
  return timings;
}

StepLoop::StepLoop(const TrainConfig& config, int rank, ComputeBackend& backend,
                   Collective& collective, BatchSource& source, FaultInjector& faults,
                   Heartbeat& heartbeat, const AlignedClock& clock)
    : config_(config),
      rank_(rank),
      backend_(backend),
      collective_(collective),
      source_(source),
      faults_(faults),
      heartbeat_(heartbeat),
      clock_(clock),
      buckets_(plan_buckets(config.model.layers, size_t(config.model.hidden) * config.model.hidden,
                            config.bucket_mb)) {}

TrainResult StepLoop::run(int64_t first_step, CheckpointHook checkpoint, StopHook stop) {
  TrainResult result;
  result.last_step = first_step - 1;
  const int64_t log_every =
      config_.log_every > 0 ? config_.log_every : std::max<int64_t>(1, config_.steps / 10);
  if (config_.overlap) backend_.set_progress_hook([this] { collective_.progress(); });
  for (int64_t s = first_step; s <= config_.steps; ++s) {
    const StepTiming timing = step(s, checkpoint);
    ++result.steps_run;
    result.last_step = s;
    // Warm-up counts from this process's first step: a resumed run warms up again.
    if (s - first_step >= config_.warmup_steps) {
      result.measured.push_back(timing);
      result.bucket_seconds.push_back(last_bucket_seconds_);
      result.measured_steps.push_back(s);
      result.step_start.push_back(last_step_start_);
      result.bucket_intervals.push_back(last_bucket_intervals_);
    }
    if (rank_ == 0 && (s % log_every == 0 || s == config_.steps))
      spdlog::info(
          "step {}/{}{}: step {:.2f} ms, data {:.2f} ms, compute {:.2f} ms, comm {:.2f} ms "
          "(exposed {:.2f} ms), optimizer {:.2f} ms",
          s, config_.steps, s - first_step < config_.warmup_steps ? " (warm-up)" : "",
          timing.step * 1e3, timing.data * 1e3, timing.compute * 1e3, timing.comm * 1e3,
          timing.comm_exposed * 1e3, timing.optimizer * 1e3);
    if (stop && stop(s)) break;
  }
  backend_.set_progress_hook(nullptr);
  heartbeat_.beat(result.last_step, "done");
  if (config_.test.perturb_state_rank == rank_) backend_.perturb_state_for_test();
  result.digest = backend_.state_digest();
  return result;
}

void StepLoop::enter(int64_t step, Phase phase) {
  heartbeat_.beat(step, phase_name(phase));
  faults_.at(step, phase);
}

StepTiming StepLoop::step(int64_t s, const CheckpointHook& checkpoint) {
  auto clock = backend_.make_phase_clock();
  StepTiming t;
  last_step_start_ = clock_.now();
  clock->mark(Mark::step_begin);

  enter(s, Phase::data);
  source_.next(s, batch_);
  backend_.load_batch(batch_.view());
  clock->mark(Mark::data_ready);

  enter(s, Phase::compute);
  backend_.forward();
  size_t next_bucket = 0;
  for (int layer = config_.model.layers - 1; layer >= 0; --layer) {
    backend_.backward_layer(layer);
    if (!config_.overlap || buckets_[next_bucket].lowest_layer != layer) continue;
    // A collective orders itself after the compute already issued, so the host waits for the
    // device only once per step: to stamp the arrival at the first collective truthfully.
    if (next_bucket == 0) {
      backend_.synchronize();
      t.arrival = clock_.now();
    }
    const Bucket& b = buckets_[next_bucket++];
    // Where posting may wait for a peer (NCCL's enqueue), a rank stuck there is in comm.
    const bool may_wait = collective_.posting_waits_for_peers();
    if (may_wait) heartbeat_.beat(s, phase_name(Phase::comm));
    collective_.start_allreduce_sum(backend_.gradients() + b.offset, b.count);
    if (may_wait) heartbeat_.beat(s, phase_name(Phase::compute));
  }
  clock->mark(Mark::compute_end);

  enter(s, Phase::comm);
  if (!config_.overlap) {
    // Every bucket is posted at once and waited for once: no host round trip per bucket.
    backend_.synchronize();
    t.arrival = clock_.now();
    heartbeat_.beat(s, phase_name(Phase::comm));  // the device's compute is not comm's time
    for (const Bucket& b : buckets_)
      collective_.start_allreduce_sum(backend_.gradients() + b.offset, b.count);
  }
  collective_.wait_all();
  clock->mark(Mark::comm_done);

  enter(s, Phase::optimizer);
  backend_.optimizer_step(s);
  clock->mark(Mark::optimizer_end);
  heartbeat_.beat(s, "checkpoint");  // the step's state is complete; a checkpoint may follow
  const double before_checkpoint = clock_.local_now();
  const bool checkpointed = checkpoint && checkpoint(s);
  const double checkpoint_s = checkpointed ? clock_.local_now() - before_checkpoint : 0.0;
  // Resolving the marks waits for the step's last device work (a no-op on the CPU).

  t.data = clock->seconds_between(Mark::step_begin, Mark::data_ready);
  t.compute = clock->seconds_between(Mark::data_ready, Mark::compute_end);
  t.comm_exposed = clock->seconds_between(Mark::compute_end, Mark::comm_done);
  t.optimizer = clock->seconds_between(Mark::comm_done, Mark::optimizer_end);
  t.checkpoint = checkpoint_s;
  t.step = clock->seconds_between(Mark::step_begin, Mark::optimizer_end) + checkpoint_s;
  take_comm_timing(t);
  return t;
}

void StepLoop::take_comm_timing(StepTiming& t) {
  const CommTiming comm = collective_.take_comm_timing();
  t.comm = busy_seconds(comm.buckets);
  // The device's view, where there is one, leaves out the host's polling.
  if (comm.exposed) t.comm_exposed = *comm.exposed;
  last_bucket_seconds_.clear();
  last_bucket_intervals_.clear();
  if (comm.buckets.empty()) return;
  // The backends time buckets on clocks of their own (the host's, or CUDA events on the NCCL
  // stream): the trace places the first bucket's start at the arrival, the others after it.
  const double origin = comm.buckets.front().start, arrival = t.arrival - last_step_start_;
  for (const BucketTime& b : comm.buckets) {
    last_bucket_seconds_.push_back(b.end - b.start);
    last_bucket_intervals_.push_back({arrival + b.start - origin, arrival + b.end - origin});
  }
}

}  // namespace tp
