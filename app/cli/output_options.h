#pragma once
// The files a subcommand that judges (train, sweep, accept, drill, report merge) writes beside its
// report, and --strict (docs/report.md, "Outputs for CI and monitoring"); app/report/outputs.h
// writes them.
#include <boost/program_options.hpp>
#include <string>

namespace tp {

struct SideOutputs {
  std::string junit, metrics;  // "" when not asked for
  bool strict = false;
};

// The options as given. With `check_files`, UsageError (exit 2) naming the option when a file
// cannot be written or is the report itself: checked before anything runs, as --report is.
SideOutputs side_outputs_from(const boost::program_options::variables_map& options,
                              bool check_files);

}  // namespace tp
