#pragma once
// Which findings of the pairwise pass's first pass are measured again, against which control, and
// what their confirmation decides (docs/sweep.md, "Confirming a flag"). Runs on rank 0; the
// measurement itself is fabric/pair_trials.h.
#include <vector>

#include "app/stages/sweep_report.h"
#include "fabric/pair_trials.h"

namespace tp {

// Every rail's suspects as confirmations to measure (appended to rail.confirmations), and their
// trials in world ranks, in the same order: a node in a direction below sweep.flag_fraction of
// its reference, a link below it between unsuspected nodes, and a one-way pair below
// record.min_pair_gbps. Also sets each rail's spread of unsuspected pairs.
// `floor_bytes`: the fewest a suspect's transfer moves.
std::vector<PairTrial> plan_confirmations(PairwiseRecord& record, uint64_t floor_bytes);

// The trials' transfers, gathered from their receivers, into the confirmations, each decided.
void record_confirmations(PairwiseRecord& record, const std::vector<TrialTransfer>& measured,
                          const PairLines& lines);

// The trials of every flag and fail, to be measured a second time, in order.
std::vector<PairTrial> plan_second_trials(const PairwiseRecord& record);

// The second trials' transfers: a flag stands only if its second trial flags it too.
void record_second_trials(PairwiseRecord& record, const std::vector<TrialTransfer>& measured,
                          const PairLines& lines);

}  // namespace tp
