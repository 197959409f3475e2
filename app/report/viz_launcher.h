#pragma once
// `trainproof report plot|html` and `report compare --html` hand the drawing to
// viz/trainproof_viz.py (matplotlib, h5py), which the build puts beside the executable and the
// device bundle carries. This only finds it and runs it (docs/report.md, "Pictures").
#include <string>
#include <vector>

namespace tp {

// The plot script beside this executable: <its folder>/viz/trainproof_viz.py.
std::string viz_script_path();

// This executable's path, for the script to call `trainproof report` back.
std::string executable_path();

// Runs `python3 <script> <args...>` without a shell, waits for it, and returns its exit code.
// UsageError (exit 2) when python3 or the script cannot be found, naming what is missing.
int run_viz_script(const std::vector<std::string>& args);

}  // namespace tp
