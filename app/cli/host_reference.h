#pragma once
// A host file's [reference] section (docs/acceptance.md, "Reference figures"): what a healthy host
// of its type measures on the workload its [gate] thresholds were set for, and the job shape it was
// measured at. A run does not judge them; they make a host file checkable: its thresholds must
// pass a host at these figures and fail one at 60% of them (tests/unit/test_host_files.cpp).
#include <map>
#include <string>
#include <vector>

#include "node/inventory_spec.h"

namespace tp {

// How a host only 60% as good moves a figure.
enum class ReferenceKind {
  higher_is_better,  // a bandwidth, utilisation, goodput: x 0.6
  lower_is_better,   // a time, or a share of time that a slower part stretches: / 0.6
  share_of_time,     // o = S / (S + T), its S stretched: o / (o + 0.6 (1 - o))
  spread,            // step CV, straggler score, steps lost: no property of speed, kept
  job_shape,         // nodes, ranks_per_node, gpus_per_node: the job the figures were measured at
};

struct ReferenceFigureName {
  std::string name;  // in [reference]: the threshold's name without min_/max_
  ReferenceKind kind;
  std::string threshold;  // the gate threshold it feeds ("min_busbw_gbps"); "" for job_shape
};

// Every figure a [reference] section may state.
const std::vector<ReferenceFigureName>& reference_figure_names();

using HostReference = std::map<std::string, double>;

// Splits a gate file's text into what program_options reads (the [reference] lines blanked, so
// line numbers stay) and its reference figures. UsageError (exit 2) names the file, the line and
// the key for an unknown figure or a value that is not a finite number >= 0.
std::string split_reference_section(const std::string& path, const std::string& text,
                                    HostReference& reference);
// The same, splitting off the [inventory] and [health] sections too (node/inventory_spec.h reads
// their lines; [health] keys as "health.KEY").
std::string split_host_sections(const std::string& path, const std::string& text,
                                HostReference& reference, InventoryLines& inventory);

}  // namespace tp
