#pragma once
// The parts of `trainproof drill` that decide things from evidence on disk, kept apart from the
// process handling so they can be unit-tested: how far a failed run got, what a corrupt fault
// does to a checkpoint, how a child's command line is rebuilt, and how the evidence files are read.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/cli/cli.h"
#include "train/faults.h"
#include "train/heartbeat.h"

namespace tp {

// The last step whose state every rank had completed, from the ranks' last heartbeats: a rank
// that beat "checkpoint" or "done" in step S completed S; one in an earlier phase of S completed
// S-1. nullopt when no rank had begun a step.
std::optional<int64_t> last_completed_step(const std::vector<HeartbeatRecord>& heartbeats);

// How many ranks left a heartbeat in `dir` (the world size of the run that used it).
int heartbeat_ranks(const std::string& dir);

// Applies a corrupt fault to the checkpoint in `folder`: rank `fault.rank`'s file (or the shared
// file) gets a flipped byte in its middle, is truncated to half, or is deleted. Returns the file
// it damaged; throws RuntimeError when the folder has no such file.
std::string corrupt_checkpoint(const std::string& folder, const FaultSpec& fault);

// The options a drill forwards to every run: each option that has a value other than its
// default, as --name=value words, except those the drill sets itself.
std::vector<std::string> forwarded_options(const po::variables_map& options);

// The JSON in `path`; null when the file is missing or does not parse (a launch that died may
// have left neither).
nlohmann::json read_json_file(const std::string& path);

// The last `lines` lines of a text file, each ending in a newline; empty when it cannot be read.
std::string last_lines(const std::string& path, size_t lines);
// What a failed launch's output says of why, for a drill problem: up to `most` lines that name a
// cause (a rank's crash line or runtime error, srun's "task N: Segmentation fault", Open MPI's
// "Signal:" line), in their order, else the last line. Without it a launcher's closing words
// ("srun: Force Terminated StepId=1.2") hid the rank that failed first.
std::string telling_lines(const std::string& path, size_t most = 3);

// Quotes a word for /bin/sh.
std::string shell_quote(const std::string& word);

}  // namespace tp
