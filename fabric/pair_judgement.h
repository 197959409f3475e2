#pragma once
// Naming the slow node or the slow link from a pairwise bandwidth matrix (docs/sweep.md,
// "Reading the matrix"). A node is judged against the pairs that do not include it, never against
// all pairs: at 3 nodes a slow node touches 4 of the 6 directed pairs and would drag the median
// of all of them down with it.
#include <algorithm>
#include <string>
#include <vector>

namespace tp {

// bandwidth[a][b]: GB/s from node a to node b, measured for that pair; a negative value (the
// diagonal, or a pair not measured) takes no part.
using PairMatrix = std::vector<std::vector<double>>;

struct NodeFlag {
  int node = 0;
  std::string direction;      // "send" (its row) or "receive" (its column)
  double median_gbps = 0;     // over its pairs in that direction (upper middle value)
  double reference_gbps = 0;  // the median over the pairs that do not include it
  bool fail = false;          // below fail_fraction of the reference, not only flag_fraction
};

struct LinkFlag {
  int from = 0, to = 0;
  double gbps = 0;
  double reference_gbps = 0;  // the median over the pairs that include neither node
  bool fail = false;
};

struct PairJudgement {
  std::vector<NodeFlag> nodes;
  std::vector<LinkFlag> links;  // slow pairs whose nodes are otherwise fine
  std::string note;             // why nothing could be judged, or ""
};

// Flags a node whose median bandwidth in a direction (the upper middle value for an even count:
// more than half its pairs must be slow, so one slow link does not make a node slow) is below
// `flag_fraction` of the median over the pairs that do not include it, and a pair below
// `flag_fraction` of the median over the pairs that include neither of its nodes when neither node
// is flagged. Fewer than 3 nodes: a note, no flags (there is no majority to compare against).
PairJudgement judge_pairs(const PairMatrix& bandwidth, double flag_fraction, double fail_fraction);

// How far apart the pairs of healthy nodes are: the median and the median absolute deviation of
// the measured pairs whose nodes are both unsuspected. Its relative value is the noise a flag
// must clear (docs/sweep.md, "Confirming a flag").
struct PairSpread {
  double median_gbps = -1;
  double mad_gbps = 0;
  int pairs = 0;
  double relative() const { return median_gbps > 0 ? mad_gbps / median_gbps : 0.0; }
};
PairSpread spread_of(const PairMatrix& bandwidth, const std::vector<bool>& suspected);

// The lines a confirmed suspect is held against (docs/sweep.md, "The rule"). `noise` is the
// relative spread of the healthy pairs or the chance error of the trial's two medians, whichever is
// larger. Flagged below (flag_fraction - noise) of the control; failed below (fail_fraction -
// noise), or below fail_floor whatever the noise: a noise as large as fail_fraction would
// otherwise take the FAIL line to zero, and a node at a few percent of its control would only
// WARN. Above noise_bound() the noise rule's FAIL line is under the floor: the measurement is too
// unreliable for the noise rule to fail anything, which the report names as its own finding.
struct PairLines {
  double flag_fraction = 0.8, fail_fraction = 0.5, fail_floor = 0.1;
  double noise_bound() const { return fail_fraction - fail_floor; }
  double fail_line(double noise) const { return std::max(fail_fraction - noise, fail_floor); }
};

// What a suspect's confirmation decides: its figure against its control's, each the median of
// transfers alternated one for one; else transient (the first pass's figure was a moment, not the
// node or link).
enum class Confirmed { flagged, failed, transient };
Confirmed confirm(double suspect_gbps, double control_gbps, double noise, const PairLines& lines);
const char* confirmed_name(Confirmed outcome);  // "flag", "fail", "transient"

// "3.6 MB/s" or "95 GB/s": a bandwidth a person reads at a glance.
std::string rate_text(double gbps);

}  // namespace tp
