// `trainproof node-check`: read the machine, judge it against the host file's [inventory], write
// the report and print NHC's last line (docs/node-check.md). No MPI: it runs where Slurm's health
// check, a prolog or an epilog runs, in a few seconds.
#include "app/node_check_command.h"

#include <cstdlib>
#include <iostream>

#include "app/cli/option_values.h"
#include "app/cli/output_options.h"
#include "app/node_check_load.h"
#include "app/node_check_report.h"
#include "app/report/context.h"
#include "app/report/outputs.h"
#include "app/report/report_text.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/sysinfo.h"
#include "gpu/nccl_version.h"
#include "gpu/nvml.h"

namespace tp {
namespace {

struct NodeCheckConfig {
  std::string level, report_path;
  MachineRoots roots;
  SideOutputs outputs;
  LoadCheckConfig load;
};

NodeCheckConfig node_check_config_from(const Invocation& inv) {
  const po::variables_map& vm = inv.options;
  NodeCheckConfig c;
  c.level = one_of(vm, "level", {"quick", "full"});
  c.load.full = c.level == "full";
  c.load.burn_s = in_range(vm, "health.burn_s", 0, 86400, true);
  c.load.sample_s = in_range(vm, "health.sample_s", 0, 60, true);
  c.load.xid_lookback_s = in_range(vm, "health.xid_lookback_s", 0, 30 * 86400.0, false);
  if (const std::string log = vm["test.kernel_log"].as<std::string>(); !log.empty())
    c.load.kernel_log = log;
  c.load.rules = &inv.inventory;
  c.report_path = vm["report"].as<std::string>();
  check_output_file("--report", c.report_path);
  c.outputs = side_outputs_from(vm, true);
  if (const std::string root = vm["test.sysfs_root"].as<std::string>(); !root.empty())
    c.roots.sysfs = root;
  c.load.sysfs_root = c.roots.sysfs;
  return c;
}

NodeCheckRecord check_node(const Invocation& inv, const NodeCheckConfig& c) {
  NodeCheckRecord r;
  r.started = utc_timestamp();
  r.run_id = run_id_for(inv.options, r.started);
  r.level = c.level;
  r.host_file = inv.inventory_file;
  r.machine = read_machine_facts(c.roots);
  std::vector<std::string> paths;
  for (const MountSpec& m : inv.inventory.mounts) paths.push_back(m.path);
  r.mounts = read_mounts(c.roots.procfs, paths);
  r.driver = read_nvml();
  r.driver.nccl_version = nccl_library_version(r.driver.nccl_unavailable);
  r.inventory = judge_inventory(inv.inventory, r.machine, r.mounts, r.driver);
  r.health = judge_gpu_health(r.machine.host, r.driver);
  if (c.load.full)
    check_under_load(c.load, r);
  else
    check_kernel_log(c.load, r);
  if (const std::string hooks = test_hooks_warning(inv.options); !hooks.empty())
    r.warnings.push_back(hooks);
  return r;
}

}  // namespace

int run_node_check(const Invocation& inv) {
  const NodeCheckConfig config = node_check_config_from(inv);  // usage errors first
  // CUDA numbers devices fastest first unless told otherwise, NVML by PCI bus id: with one
  // numbering, the burn's "GPU 3" is the inventory's GPU 3. A user's own setting stands.
  setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 0);
  nlohmann::json report = node_check_report(check_node(inv, config));
  record_strict(report, config.outputs);
  make_report_text_valid(report);
  write_file_atomically(config.report_path, report.dump(2) + "\n");
  write_side_outputs(report, config.outputs);
  std::cout << node_check_text(report) << std::flush;
  return exit_code_under(report["verdict"], config.outputs);
}

}  // namespace tp
