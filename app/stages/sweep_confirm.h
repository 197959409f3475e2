#pragma once
// Which findings of the pairwise pass's first pass are measured again, against which control, and
// what their confirmation decides (docs/sweep.md, "Confirming a flag"). Runs on rank 0; the
// measurement itself is fabric/pair_trials.h.
#include <cstdint>
#include <vector>

#include "app/stages/sweep_report.h"
#include "fabric/pair_trials.h"

namespace tp {

// Every rail's suspects as confirmations to measure (appended to rail.confirmations), and their
// trials in world ranks, in the same order: a node in a direction below sweep.flag_fraction of
// its reference, a link below it between unsuspected nodes, and a one-way pair below
// record.min_pair_gbps. Also sets each rail's spread of unsuspected pairs.
// `floor_bytes`: the fewest a suspect's transfer moves. The trials are ordered worst first (the
// lowest first-pass figure against its reference), and only the first `max_trials` are planned:
// the others are marked capped.
std::vector<PairTrial> plan_confirmations(PairwiseRecord& record, uint64_t floor_bytes,
                                          size_t max_trials = SIZE_MAX);

// The trials' transfers, gathered from their receivers, into the confirmations, each decided.
// `trials_run`: how many of the planned trials ran before the time cap ended them; the others are
// marked capped.
void record_confirmations(PairwiseRecord& record, const std::vector<TrialTransfer>& measured,
                          const PairLines& lines, size_t trials_run = SIZE_MAX);

// The trials of every flag and fail, to be measured a second time, the failures first and then
// the lowest against its control; at most `max_trials`, the others marked again_capped.
std::vector<PairTrial> plan_second_trials(PairwiseRecord& record, size_t max_trials = SIZE_MAX);

// The second trials' transfers: a flag stands only if its second trial flags it too; one whose
// second trial did not run (`trials_run`) stands on its first.
void record_second_trials(PairwiseRecord& record, const std::vector<TrialTransfer>& measured,
                          const PairLines& lines, size_t trials_run = SIZE_MAX);

// How many trials the caps leave: sweep.confirm_max less `already` run.
size_t trials_left(const PairwiseRecord& record, size_t already);
// How many first trials the cap allows: half of sweep.confirm_max (rounded up), so a flag's
// second trial, whose milder outcome decides, is never crowded out by more suspects.
size_t first_trials_allowed(const PairwiseRecord& record);

}  // namespace tp
