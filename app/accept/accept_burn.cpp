#include "app/accept/accept_burn.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "app/accept/accept_health.h"
#include "common/errors.h"
#include "common/number_text.h"
#include "mpi/gather.h"
#include "node/burn.h"
#include "node/copy_bandwidth.h"
#include "node/gpu_peers.h"

namespace tp {
namespace {

using nlohmann::json;

// A figure judged across the job: its name as the node's own judgement words it, so a GPU the
// node already flagged for it is not flagged twice.
struct JobFigure {
  const char* name;
  const char* unit;
  double BurnFigures::*value;
  bool copy;
  const char* action;
};

constexpr JobFigure kJobFigures[] = {
    {"GEMM", "TFLOP/s", &BurnFigures::gemm_tflops, false,
     "drain the node; burn its GPUs alone to confirm, then check its cooling, power and clocks"},
    {"device memory copy", "GB/s", &BurnFigures::memory_gbps, true,
     "drain the node; check the GPU's memory clocks and ECC, then replace it if it stays slow"},
    {"host-to-device copy", "GB/s", &BurnFigures::h2d_gbps, true,
     "drain the node; check the GPU's PCIe link (lspci -vv), its riser and slot, and the NUMA "
     "placement"},
    {"device-to-host copy", "GB/s", &BurnFigures::d2h_gbps, true,
     "drain the node; check the GPU's PCIe link (lspci -vv), its riser and slot, and the NUMA "
     "placement"}};

BurnFigures& figures_for(NodeBurn& n, int gpu, const std::string& uuid, const std::string& pci) {
  for (BurnFigures& f : n.devices)
    if (f.gpu == gpu) return f;
  n.devices.push_back({gpu, uuid, pci, 0, 0, 0, 0});
  return n.devices.back();
}

NodeBurn measure_node(const std::string& host, const AcceptBurnSettings& s, double seconds) {
  NodeBurn n;
  n.host = host;
  const BurnRecord burn = run_burn(host, burn_options_of(seconds, s.rules));
  const CopyRecord copies = run_copy_bandwidth(
      host, copy_options_of(seconds, s.rules, s.sysfs_root, s.every_pair_nvlink));
  n.backend = burn.backend;
  n.unavailable = burn.unavailable;
  n.burn_findings = burn_findings(host, burn, burn.why_cpu.empty());
  n.copy_findings = copies.findings;
  for (const BurnDevice& d : burn.devices)
    if (d.error.empty())
      figures_for(n, d.gpu, d.uuid, d.pci_address).gemm_tflops =
          std::max(d.figure, d.confirmed) / 1e12;
  for (const CopyDevice& d : copies.devices)
    if (d.error.empty()) {
      BurnFigures& f = figures_for(n, d.gpu, d.uuid, d.pci_address);
      f.memory_gbps = d.device_gbps;
      f.h2d_gbps = d.h2d_gbps;
      f.d2h_gbps = d.d2h_gbps;
    }
  return n;
}

// Every rank: the first rank of each node in `hosts` (every node when `all`) measures it while the
// others wait asleep; a node that has not finished within the deadline ends the run.
std::vector<NodeBurn> measure_nodes(const AcceptBurnSettings& s, const World& world, double seconds,
                                    const std::vector<std::string>& hosts, bool all) {
  NodeBurn mine;
  const std::string& host = world.host_of_rank[size_t(world.rank)];  // test.split_hosts included
  const bool chosen = all || std::find(hosts.begin(), hosts.end(), host) != hosts.end();
  if (world.index_on_host() == 0 && chosen) mine = measure_node(host, s, seconds);
  // The burn, its confirmation and every copy take a few times `seconds`; ten more minutes allow
  // for a GPU that is slow to give its memory back.
  const double limit = 2 * seconds + 600;
  if (!barrier_within(world.comm, limit))
    throw RuntimeError("accept --level=full: the burn did not end on every node within " +
                       readable_number(limit) + " s");
  return gather_records_at_root(world, mine);
}

std::string flag_prefix(const std::string& host, const BurnFigures& f, const char* name) {
  return host + ": GPU " + std::to_string(f.gpu) + (f.uuid.empty() ? "" : " (" + f.uuid + ")") +
         ": " + name + " ";
}

bool node_flagged(const NodeBurn& n, const std::string& prefix, bool copy) {
  for (const HealthFinding& f : copy ? n.copy_findings : n.burn_findings)
    if (f.reason.rfind(prefix, 0) == 0) return true;
  return false;
}

// A figure not measured (a CPU's host copies) is null, never 0.
json figure_or_null(double value) {
  return value > 0 ? json(value) : json(nullptr);
}
double figure_of(const json& j, const char* key) {
  const json& v = j.at(key);
  return v.is_number() ? v.get<double>() : 0;
}

json figures_json(const BurnFigures& f) {
  return {{"gpu", f.gpu},
          {"uuid", f.uuid},
          {"pci_address", f.pci_address},
          {"gemm_tflops", figure_or_null(f.gemm_tflops)},
          {"memory_copy_gbps", figure_or_null(f.memory_gbps)},
          {"h2d_gbps", figure_or_null(f.h2d_gbps)},
          {"d2h_gbps", figure_or_null(f.d2h_gbps)}};
}

NodeHealthRecord node_record(const NodeBurn& n, const JobPeerFlags& job, bool copies) {
  NodeHealthRecord r;
  r.host = n.host;
  r.judged = !n.devices.empty();
  r.why_not = n.unavailable.empty() ? "nothing measured" : n.unavailable;
  r.findings = copies ? n.copy_findings : n.burn_findings;
  for (const auto& [host, finding] : copies ? job.copies : job.burn)
    if (host == n.host) r.findings.push_back(finding);
  return r;
}

json burn_section(const std::vector<NodeBurn>& nodes, const AcceptBurnSettings& s,
                  const std::vector<std::string>& again) {
  json list = json::array();
  for (const NodeBurn& n : nodes) {
    if (n.host.empty()) continue;
    json devices = json::array();
    for (const BurnFigures& f : n.devices) devices.push_back(figures_json(f));
    list.push_back({{"host", n.host},
                    {"backend", n.backend},
                    {"unavailable", n.unavailable.empty() ? json(nullptr) : json(n.unavailable)},
                    {"devices", devices}});
  }
  return {{"seconds", s.burn_s},
          {"compared",
           "each GPU against the best GPU of its node (on the node), then against "
           "the job's median GPU (on rank 0); a CPU figure is recorded, not compared"},
          {"measured_again", again},
          {"nodes", list}};
}

}  // namespace

void to_json(json& j, const NodeBurn& n) {
  json devices = json::array(), burn = json::array(), copies = json::array();
  for (const BurnFigures& f : n.devices) devices.push_back(figures_json(f));
  for (const HealthFinding& f : n.burn_findings) burn.push_back({f.status, f.reason, f.action});
  for (const HealthFinding& f : n.copy_findings) copies.push_back({f.status, f.reason, f.action});
  j = {{"host", n.host},     {"backend", n.backend},  {"unavailable", n.unavailable},
       {"devices", devices}, {"burn_findings", burn}, {"copy_findings", copies}};
}

void from_json(const json& j, NodeBurn& n) {
  n.host = j.at("host").get<std::string>();
  n.backend = j.at("backend").get<std::string>();
  n.unavailable = j.at("unavailable").get<std::string>();
  for (const json& d : j.at("devices"))
    n.devices.push_back({d.at("gpu").get<int>(), d.at("uuid").get<std::string>(),
                         d.at("pci_address").get<std::string>(), figure_of(d, "gemm_tflops"),
                         figure_of(d, "memory_copy_gbps"), figure_of(d, "h2d_gbps"),
                         figure_of(d, "d2h_gbps")});
  for (const json& f : j.at("burn_findings")) n.burn_findings.push_back({f[0], f[1], f[2]});
  for (const json& f : j.at("copy_findings")) n.copy_findings.push_back({f[0], f[1], f[2]});
}

JobPeerFlags judge_job_peers(const std::vector<NodeBurn>& nodes) {
  JobPeerFlags flags;
  for (const JobFigure& figure : kJobFigures) {
    std::vector<GpuFigure> figures;
    std::vector<std::pair<const NodeBurn*, const BurnFigures*>> owner;
    for (const NodeBurn& n : nodes)
      for (const BurnFigures& f : n.devices)
        if (f.gpu >= 0 && f.*figure.value > 0) {
          figures.push_back({n.host, f.gpu, f.uuid, f.*figure.value});
          owner.emplace_back(&n, &f);
        }
    const PeerJudgement j = judge_gpu_peers(figures, PeerRules{}, figure.name, figure.unit);
    for (const PeerFlag& flag : j.flags) {
      if (flag.reference_name != "the job's median GPU") continue;  // the node's own to judge
      const auto [node, device] = owner[flag.index];
      if (node_flagged(*node, flag_prefix(node->host, *device, figure.name), figure.copy)) continue;
      (figure.copy ? flags.copies : flags.burn)
          .emplace_back(node->host, HealthFinding{flag.status, flag.reason, figure.action});
      if (std::find(flags.hosts.begin(), flags.hosts.end(), node->host) == flags.hosts.end())
        flags.hosts.push_back(node->host);
    }
  }
  return flags;
}

void keep_better(std::vector<NodeBurn>& first, const std::vector<NodeBurn>& again) {
  std::map<std::string, const NodeBurn*> by_host;
  for (const NodeBurn& n : again)
    if (!n.host.empty()) by_host[n.host] = &n;
  for (NodeBurn& n : first) {
    const auto found = by_host.find(n.host);
    if (n.host.empty() || found == by_host.end()) continue;
    for (const BurnFigures& second : found->second->devices) {
      BurnFigures& f = figures_for(n, second.gpu, second.uuid, second.pci_address);
      for (const JobFigure& figure : kJobFigures)
        f.*figure.value = std::max(f.*figure.value, second.*figure.value);
    }
  }
}

BurnStage burn_stage(const AcceptBurnSettings& settings, const World& world) {
  if (world.rank == 0)
    spdlog::info("accept: burning {} s on every node (level=full), then its copies",
                 readable_number(settings.burn_s));
  std::vector<NodeBurn> nodes = measure_nodes(settings, world, settings.burn_s, {}, true);
  JobPeerFlags job;
  if (world.rank == 0) job = judge_job_peers(nodes);
  // A GPU below the job's median counts only when a second burn of its node is slow too.
  const std::vector<std::string> again =
      json::parse(broadcast_from_root(world, json(job.hosts).dump()))
          .get<std::vector<std::string>>();
  if (!again.empty()) {
    if (world.rank == 0)
      spdlog::info("accept: {} node(s) below the job's median GPU; burning them again",
                   again.size());
    const auto second =
        measure_nodes(settings, world, std::max(2.0, settings.burn_s / 4), again, false);
    if (world.rank == 0) {
      keep_better(nodes, second);
      job = judge_job_peers(nodes);
    }
  }
  BurnStage stage;
  if (world.rank != 0) return stage;
  std::vector<NodeHealthRecord> burn, copies;
  for (const NodeBurn& n : nodes) {
    if (n.host.empty()) continue;
    burn.push_back(node_record(n, job, false));
    copies.push_back(node_record(n, job, true));
  }
  for (const auto& [name, records, healthy] :
       {std::tuple{"gpu_burn", &burn, "no device's GEMM rate below its peers'"},
        std::tuple{"gpu_copies", &copies, "no device's copy rates below its peers'"}}) {
    HealthStage judged = judge_node_health(name, *records, healthy);
    stage.checks.push_back(judged.check);
    for (auto& finding : judged.findings) stage.findings.push_back(std::move(finding));
  }
  stage.section = burn_section(nodes, settings, again);
  return stage;
}

}  // namespace tp
