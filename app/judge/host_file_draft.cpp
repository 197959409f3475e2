#include "app/judge/host_file_draft.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "app/cli/host_reference.h"
#include "app/judge/gate_config.h"
#include "app/judge/gate_judge.h"
#include "app/report/gate.h"
#include "common/errors.h"
#include "common/number_text.h"

namespace tp {
namespace {

using nlohmann::json;

// The worst golden figure of one reference name, and the file it came from.
struct Worst {
  double value = 0;
  std::string from;
};

bool higher_is_better(const ReferenceFigureName& f) {
  return f.threshold.rfind("min_", 0) == 0;
}

// A figure with one threshold of its own: not the job's shape, nor a per-unit one (_per_gpu).
bool drafted(const ReferenceFigureName& f) {
  return !f.threshold.empty() && f.threshold.find("_per_") == std::string::npos;
}

// The stages a report ran: an acceptance run's attempts, else each section it has; and the drill,
// whose section report merge adds to an acceptance run's.
StageAttempts stages_in(const json& report) {
  StageAttempts ran;
  if (const auto a = report.find("accept"); a != report.end() && a->contains("attempts"))
    for (const json& attempt : (*a)["attempts"])
      ran[attempt.value("stage", "")] = attempt.value("attempt", 1);
  const std::pair<const char*, const char*> sections[] = {{"sweep", "sweep"},
                                                          {"pairwise", "sweep"},
                                                          {"train", "train"},
                                                          {"restore", "restore"},
                                                          {"drill", "drill"}};
  for (const auto& [stage, key] : sections)
    if ((!report.contains("accept") || key == std::string("drill")) && report.contains(key))
      ran.try_emplace(stage, 1);
  return ran;
}

// The largest in-place row of the operations the gate holds to busbw, that every report ran.
int64_t busbw_bytes_of(const std::vector<GoldenReport>& golden) {
  int64_t bytes = 0;
  for (const GoldenReport& g : golden) {
    const auto sweep = g.report.find("sweep");
    if (sweep == g.report.end() || !sweep->contains("results")) continue;
    int64_t largest = 0;
    for (const json& row : (*sweep)["results"])
      if (row.value("in_place", false) && row.value("op", "") == "allreduce")
        largest = std::max(largest, row.value("bytes", int64_t(0)));
    if (largest > 0) bytes = bytes == 0 ? largest : std::min(bytes, largest);
  }
  return bytes > 0 ? bytes : int64_t(64) << 20;
}

// Every figure the gate reads from `report`, by reference name (busbw: its slowest operation).
std::map<std::string, double> figures_of(const json& report, int64_t busbw_bytes) {
  std::map<std::string, double> figures;
  const json checks =
      judge_thresholds(every_gate_threshold(busbw_bytes), report, stages_in(report));
  for (const ReferenceFigureName& f : reference_figure_names()) {
    if (!drafted(f)) continue;
    for (const json& c : checks) {
      const std::string name = c.value("name", "");
      if (name != f.threshold && name.rfind(f.threshold + ".", 0) != 0) continue;
      if (!c.contains("value") || !c["value"].is_number()) continue;
      const double v = c["value"].get<double>();
      const auto [at, made] = figures.try_emplace(f.name, v);
      if (!made)
        at->second = higher_is_better(f) ? std::min(at->second, v) : std::max(at->second, v);
    }
  }
  return figures;
}

double limit_at(const ReferenceFigureName& f, double reference, double share) {
  if (f.kind == ReferenceKind::share_of_time)
    return reference / (reference + share * (1 - reference));
  return higher_is_better(f) ? reference * share : reference / share;
}

// "%.3g" and no more: a limit is a decision, not a measurement.
std::string limit_text(double value) {
  if (value == 0) return "0";
  const double digits = std::pow(10.0, 2 - std::floor(std::log10(std::fabs(value))));
  return exact_number(std::round(value * digits) / digits);
}

struct JobShape {
  int nodes = 0, ranks_per_node = 0, gpus_per_node = 0;
  bool operator==(const JobShape&) const = default;
};

JobShape shape_of(const json& report) {
  JobShape s;
  const json& ranks = report.value("ranks", json::array());
  std::map<std::string, int> per_host, gpus_per_host;
  for (const json& r : ranks) {
    ++per_host[r.value("host", "")];
    gpus_per_host[r.value("host", "")] += r.contains("gpu") && r["gpu"].is_object();
  }
  s.nodes = int(per_host.size());
  for (const auto& [host, n] : per_host) s.ranks_per_node = std::max(s.ranks_per_node, n);
  for (const auto& [host, n] : gpus_per_host) s.gpus_per_node = std::max(s.gpus_per_node, n);
  return s;
}

// One run's work and shape, the same in every measuring report.
struct Work {
  std::string hash, hash_from;
  JobShape shape;
  std::string shape_from;
};

void check_same_work(Work& work, const GoldenReport& g) {
  const std::string hash = g.report.value("context", json::object()).value("scenario_hash", "");
  if (work.hash_from.empty()) {
    work = {hash, g.path, shape_of(g.report), g.path};
    return;
  }
  if (hash != work.hash)
    throw UsageError("report hostfile: " + g.path + " ran scenario " + hash + " and " +
                     work.hash_from + " ran " + work.hash +
                     ": golden runs of one host file run the same work");
  if (!(shape_of(g.report) == work.shape))
    throw UsageError("report hostfile: " + g.path +
                     " ran another job shape (nodes, ranks per node) than " + work.shape_from +
                     ": [reference] states one");
}

// A number field of a report's object, -1 when absent or not a number.
double number_or_none(const json& j, const char* key) {
  const auto found = j.find(key);
  return found != j.end() && found->is_number() ? found->get<double>() : -1;
}

// What every node-check report agrees on, and the smallest of what varies.
class InventoryDraft {
 public:
  void add(const GoldenReport& g) {
    const json& nc = g.report.at("node_check");
    const json& machine = nc.value("machine", json::object());
    const json& driver = nc.value("driver", json::object());
    const json gpus = driver.value("gpus", json::array());
    const json ports = machine.value("rdma_ports", json::array());
    same("gpus",
         std::to_string(std::max(gpus.size(), machine.value("pci_gpus", json::array()).size())),
         g.path);
    if (!gpus.empty()) add_gpus(gpus, driver, g.path);
    same("nics", std::to_string(ports.size()), g.path);
    for (const json& p : ports) {
      same("nic_link_layer", p.value("link_layer", ""), g.path);
      if (const double rate = number_or_none(p, "rate_gbps"); rate >= 0)
        least("min_nic_rate_gbps", rate);
      const json pcie = p.value("pcie", json::object());
      least_int("nic_pcie_gen", int(number_or_none(pcie, "max_gen")));
      least_int("nic_pcie_width", int(number_or_none(pcie, "max_width")));
      all_true_ &= p.value("state", "") == "ACTIVE" && p.value("phys_state", "") == "LinkUp";
    }
    least_int("min_cpus", int(number_or_none(machine, "cpus")));
    // The memory the kernel reports moves by a little with firmware and boot settings.
    if (const double memory = number_or_none(machine, "memory_gb"); memory > 0)
      least("min_host_memory_gb", std::floor(memory * 0.95));
    least_int("min_network_interfaces", int(machine.value("interfaces_up", json::array()).size()));
    files_ += (files_.empty() ? "" : ", ") + g.path;
    ++reports_;
  }

  std::string text() const {
    if (reports_ == 0) return "";
    std::string out = "\n[inventory]\n# What " + std::to_string(reports_) +
                      " node-check report(s) found (" + files_ +
                      "): counts and models as every one found them, sizes and rates the "
                      "smallest found, versions the golden nodes' own as minimums.\n";
    for (const auto& [key, value] : same_)
      if (!(key == "nic_link_layer" && value.empty())) out += key + " = " + value + "\n";
    for (const auto& [key, value] : least_) out += key + " = " + exact_number(value) + "\n";
    if (same_.count("nics") && same_.at("nics") != "0")
      out += std::string("ib_ports_active = ") + (all_true_ ? "true" : "false") + "\n";
    return out;
  }

 private:
  void add_gpus(const json& gpus, const json& driver, const std::string& path) {
    same("gpu_name", gpus[0].value("name", ""), path);
    char id[16];
    std::snprintf(id, sizeof id, "0x%04x",
                  unsigned(std::max(0.0, number_or_none(gpus[0], "device_id"))));
    same("gpu_device_id", id, path);
    std::set<std::string> firmware;
    for (const json& g : gpus) {
      if (const double memory = number_or_none(g, "memory_gb"); memory > 0)
        least("min_gpu_memory_gb", std::floor(memory));
      least_int("nvlinks_per_gpu", int(number_or_none(g, "nvlinks_up")));
      least_int("gpu_pcie_gen", int(number_or_none(g, "max_pcie_gen")));
      least_int("gpu_pcie_width", int(number_or_none(g, "max_pcie_width")));
      for (const char* mode : {"ecc", "mig", "persistence"})
        if (const double on = number_or_none(g, mode); on >= 0)
          same(mode, on > 0 ? "on" : "off", path);
      firmware.insert(g.value("vbios", ""));
    }
    if (firmware.size() == 1) same("same_gpu_firmware", "true", path);
    for (const auto& [key, field] : {std::pair{"min_driver_version", "driver_version"},
                                     {"min_cuda_driver_version", "cuda_driver_version"},
                                     {"min_nccl_version", "nccl_version"}})
      if (const auto v = driver.find(field);
          v != driver.end() && v->is_string() && !v->get<std::string>().empty())
        lowest_version(key, v->get<std::string>());
  }

  // A count or a model every node of the type must share.
  void same(const std::string& key, const std::string& value, const std::string& path) {
    const auto [at, made] = same_.try_emplace(key, value);
    if (!made && at->second != value)
      throw UsageError("report hostfile: " + path + " found " + key + " " + value + " where " +
                       files_ + " found " + at->second +
                       ": golden nodes of one host type have the same parts");
  }
  void least(const std::string& key, double value) {
    const auto [at, made] = least_.try_emplace(key, value);
    if (!made) at->second = std::min(at->second, value);
  }
  void least_int(const std::string& key, int value) {
    if (value >= 0) least(key, value);
  }
  void lowest_version(const std::string& key, const std::string& version) {
    const auto [at, made] = same_.try_emplace(key, version);
    if (!made && compare_versions(version, at->second).value_or(0) < 0) at->second = version;
  }

  std::map<std::string, std::string> same_;
  std::map<std::string, double> least_;
  bool all_true_ = true;
  std::string files_;
  int reports_ = 0;
};

// The lowest figure of every golden device and GPU pair, for the [health] floors under which a
// GPU fails whatever its peers ran (docs/node-check.md, "[health]"): from node-check --level=full
// reports, and from accept --level=full reports' preflight.burn.
class HealthDraft {
 public:
  // True when `report` held a figure.
  bool add(const GoldenReport& g) {
    const size_t before = figures_;
    if (report_kind(g.report) == "node-check") {
      const json& nc = g.report.at("node_check");
      for (const json& d : array_at(nc, "burn", "devices"))
        lowest("min_gemm_tflops", number_or_none(d, "tflops"), g.path);
      for (const json& d : array_at(nc, "copies", "devices")) {
        lowest("min_memory_copy_gbps", number_or_none(d, "device_gbps"), g.path);
        lowest("min_h2d_gbps", number_or_none(d, "h2d_gbps"), g.path);
        lowest("min_d2h_gbps", number_or_none(d, "d2h_gbps"), g.path);
      }
      for (const json& p : array_at(nc, "copies", "pairs"))
        lowest("min_peer_copy_gbps", number_or_none(p, "gbps"), g.path);
    } else if (g.report.contains("preflight") && g.report["preflight"].is_object()) {
      for (const json& node : array_at(g.report["preflight"], "burn", "nodes"))
        for (const json& d : node.value("devices", json::array())) {
          lowest("min_gemm_tflops", number_or_none(d, "gemm_tflops"), g.path);
          lowest("min_memory_copy_gbps", number_or_none(d, "memory_copy_gbps"), g.path);
          lowest("min_h2d_gbps", number_or_none(d, "h2d_gbps"), g.path);
          lowest("min_d2h_gbps", number_or_none(d, "d2h_gbps"), g.path);
        }
    }
    return figures_ > before;
  }

  std::string text(double share) const {
    if (lowest_.empty()) return "";
    std::string out =
        "\n[health]\n# Floors under which a GPU fails whatever its peers ran: the lowest golden "
        "figure of any device (or GPU pair), x " +
        limit_text(share) + ".\n";
    for (const auto& [key, w] : lowest_)
      out += "# The lowest golden figure, " + limit_text(w.value) + " (" + w.from + ")\n" + key +
             " = " + limit_text(w.value * share) + "\n";
    return out;
  }

 private:
  static json array_at(const json& j, const char* object, const char* array) {
    const auto o = j.find(object);
    if (o == j.end() || !o->is_object()) return json::array();
    const auto a = o->find(array);
    return a != o->end() && a->is_array() ? *a : json::array();
  }
  void lowest(const std::string& key, double value, const std::string& path) {
    if (!(value > 0)) return;
    ++figures_;
    const auto [at, made] = lowest_.try_emplace(key, Worst{value, path});
    if (!made && value < at->second.value) at->second = {value, path};
  }

  std::map<std::string, Worst> lowest_;
  size_t figures_ = 0;
};

std::string rule_text(const ReferenceFigureName& f, double share) {
  const std::string s = limit_text(share);
  if (f.kind == ReferenceKind::share_of_time) return "as o / (o + " + s + " (1 - o))";
  return higher_is_better(f) ? "x " + s : "/ " + s;
}

std::string gate_and_reference_text(const std::string& files, int runs, const Work& work,
                                    const std::map<std::string, Worst>& worst,
                                    const std::map<std::string, int>& measured_by,
                                    int64_t busbw_bytes, double share) {
  const std::string head =
      "# A host file written by `trainproof report hostfile` (docs/acceptance.md, \"A host file "
      "from golden runs\") from:\n" +
      files;
  if (runs == 0) return head;
  std::string gate =
      "[gate]\n# The work every golden run ran (context.scenario_hash): the gate warns on other "
      "work.\nscenario_hash = " +
      work.hash + "\n";
  if (worst.count("busbw_gbps"))
    gate +=
        "# The in-place allreduce size the busbw threshold is read at: the golden sweep's "
        "largest.\nbusbw_bytes = " +
        std::to_string(busbw_bytes) + "\n";
  std::string reference =
      "\n[reference]\n# The job the golden runs ran, and the worst figure of the " +
      std::to_string(runs) + " run(s).\nnodes = " + std::to_string(work.shape.nodes) +
      "\nranks_per_node = " + std::to_string(work.shape.ranks_per_node) +
      "\ngpus_per_node = " + std::to_string(work.shape.gpus_per_node) + "\n";
  std::string not_measured;
  for (const ReferenceFigureName& f : reference_figure_names()) {
    if (!drafted(f)) continue;
    const auto w = worst.find(f.name);
    if (w == worst.end()) {
      not_measured += (not_measured.empty() ? "" : ", ") + f.threshold;
      continue;
    }
    const int by = measured_by.at(f.name);
    gate +=
        "# The worst golden figure, " + limit_text(w->second.value) + " (" + w->second.from +
        (by < runs ? ", measured by " + std::to_string(by) + " of " + std::to_string(runs) + " runs"
                   : "") +
        "), " + rule_text(f, share) + "\n" + f.threshold + " = " +
        limit_text(limit_at(f, w->second.value, share)) + "\n";
    reference += f.name + " = " + exact_number(w->second.value) + "\n";
  }
  if (!not_measured.empty())
    gate += "# Not measured by these runs, so not set: " + not_measured + "\n";
  return head + gate + reference;
}

}  // namespace

std::string draft_host_file(const std::vector<GoldenReport>& golden, double share) {
  if (!(share > 0.6 && share < 0.95))
    throw UsageError("--share must lie in (0.6, 0.95), got " + exact_number(share) +
                     " (docs/acceptance.md, \"Reference figures\")");
  const int64_t busbw_bytes = busbw_bytes_of(golden);
  std::map<std::string, Worst> worst;
  std::map<std::string, int> measured_by;
  Work work;
  InventoryDraft inventory;
  HealthDraft health;
  int runs = 0;
  std::string files;
  for (const GoldenReport& g : golden) {
    files += "#   " + g.path + "\n";
    const bool burned = health.add(g);
    if (report_kind(g.report) == "node-check") {
      inventory.add(g);
      continue;
    }
    const std::map<std::string, double> figures = figures_of(g.report, busbw_bytes);
    if (figures.empty() && burned) continue;  // an accept --level=full of its preflight alone
    if (figures.empty())
      throw UsageError("report hostfile: " + g.path +
                       " measured no figure a gate threshold reads (an accept, train, sweep or "
                       "merged report, or a node-check report)");
    check_same_work(work, g);
    ++runs;
    for (const ReferenceFigureName& f : reference_figure_names()) {
      const auto v = figures.find(f.name);
      if (v == figures.end()) continue;
      ++measured_by[f.name];
      const auto [at, made] = worst.try_emplace(f.name, Worst{v->second, g.path});
      if (!made &&
          (higher_is_better(f) ? v->second < at->second.value : v->second > at->second.value))
        at->second = {v->second, g.path};
    }
  }
  return gate_and_reference_text(files, runs, work, worst, measured_by, busbw_bytes, share) +
         inventory.text() + health.text(share);
}

}  // namespace tp
