// Every host file in scenarios/hosts/ is self-consistent (docs/acceptance.md, "Reference figures"):
// a synthetic report of healthy hosts at the file's [reference] figures passes every threshold the
// file sets, at its reference job and at 8 times as many nodes; the same report at 60% of the
// figures fails every check a bandwidth, a utilisation, a goodput or a time feeds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "app/accept/accept_config.h"
#include "app/cli/cli.h"
#include "app/cli/host_reference.h"
#include "app/judge/gate_judge.h"
#include "app/judge/host_file_draft.h"
#include "common/errors.h"
#include "common/number_text.h"

namespace {

using nlohmann::json;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr double kWeakHost = 0.6;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> host_files() {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(std::string(TRAINPROOF_SCENARIOS) + "/hosts"))
    if (entry.path().extension() == ".ini") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

tp::AcceptConfig thresholds_of(const std::string& path) {
  // Every stage, with checkpoints (the figures of every threshold are measured).
  const std::string flag = "--gate.file=" + path;
  const char* argv[] = {"trainproof", "accept", flag.c_str(), "--checkpoint.dir=/ckpt",
                        "--checkpoint.every=5"};
  const tp::Invocation inv = tp::parse_invocation(int(std::size(argv)), argv);
  return tp::accept_config_from(inv.options, inv.option_source, tp::train_config_from(inv.options));
}

const tp::ReferenceFigureName* feeding(const std::string& threshold) {
  for (const tp::ReferenceFigureName& f : tp::reference_figure_names())
    if (f.threshold == threshold) return &f;
  return nullptr;
}

// A host `share` as good as the reference: its figures moved as their kind says.
struct SyntheticHost {
  const tp::HostReference& reference;
  double share;
  double figure(const std::string& name, double otherwise = 0) const {
    const auto found = reference.find(name);
    if (found == reference.end()) return otherwise;
    for (const tp::ReferenceFigureName& f : tp::reference_figure_names()) {
      if (f.name != name) continue;
      if (f.kind == tp::ReferenceKind::higher_is_better) return found->second * share;
      if (f.kind == tp::ReferenceKind::lower_is_better) return found->second / share;
      if (f.kind == tp::ReferenceKind::share_of_time)  // S / (S + T), S stretched by 1 / share
        return found->second / (found->second + share * (1 - found->second));
    }
    return found->second;
  }
  // An aggregate bandwidth: per node or per GPU where the file states it so, else the job's.
  double aggregate(const std::string& name, int nodes, int gpus) const {
    if (reference.count(name + "_per_node")) return figure(name + "_per_node") * nodes;
    if (reference.count(name + "_per_gpu")) return figure(name + "_per_gpu") * gpus;
    return figure(name);
  }
};

json pair_matrix(int nodes, double gbps) {
  json matrix = json::array();
  for (int a = 0; a < nodes; ++a) {
    json row = json::array();
    for (int b = 0; b < nodes; ++b) row.push_back(a == b ? json(nullptr) : json(gbps));
    matrix.push_back(row);
  }
  return matrix;
}

// A report as accept and report merge leave it, for `nodes` nodes of the reference's kind.
json synthetic_report(const SyntheticHost& host, int nodes, int64_t busbw_bytes) {
  const int per_node = int(host.figure("ranks_per_node", 1));
  const int gpus_per_node = int(host.figure("gpus_per_node", 0));
  json report;
  json hosts = json::array();
  for (int n = 0; n < nodes; ++n) {
    char name[32];
    std::snprintf(name, sizeof name, "node-%03d", n);
    hosts.push_back(name);
    report["nodes"].push_back({{"host", name}});
    for (int local = 0; local < per_node; ++local) {
      json rank = {{"rank", n * per_node + local},
                   {"host", name},
                   {"straggler_score", host.figure("straggler_score", 1.0)}};
      if (local < gpus_per_node) rank["gpu"] = {{"index", local}};
      report["ranks"].push_back(rank);
    }
  }
  for (const char* op : {"allreduce", "allgather", "reducescatter"})
    report["sweep"]["results"].push_back({{"op", op},
                                          {"in_place", true},
                                          {"group", "world"},
                                          {"bytes", busbw_bytes},
                                          {"busbw_gbps", host.figure("busbw_gbps")}});
  report["sweep"]["pairwise"]["rails"].push_back(
      {{"hosts", hosts}, {"one_way_gbps", pair_matrix(nodes, host.figure("pair_gbps"))}});
  report["train"] = {{"step_cv", host.figure("step_cv")},
                     {"au", host.figure("au")},
                     {"phases",
                      {{"step", {{"p50", 1.0}}},
                       {"comm_exposed", {{"p50", host.figure("comm_exposed_fraction")}}}}}};
  const int gpus = nodes * gpus_per_node;
  report["checkpoint"] = {{"write_gbps", host.aggregate("ckpt_write_gbps", nodes, gpus)},
                          {"overhead", host.figure("ckpt_overhead")}};
  report["job"] = {{"train_goodput", host.figure("goodput")},
                   {"goodput", host.figure("job_goodput")}};
  report["restore"] = {{"gbps", host.aggregate("restore_gbps", nodes, gpus)},
                       {"seconds", host.figure("restore_s")}};
  report["drill"] = {{"rto_s", host.figure("rto_s")}, {"rpo_steps", host.figure("rpo_steps")}};
  return report;
}

json judged(const tp::AcceptConfig& config, const json& report) {
  tp::StageAttempts every;
  for (const tp::GateThreshold& t : config.thresholds) every[t.stage] = 1;
  return tp::judge_thresholds(config, report, every);
}

// The threshold a gate check judges ("min_busbw_gbps.allreduce" -> "min_busbw_gbps").
std::string threshold_of(const json& check) {
  const std::string name = check["name"];
  return name.substr(0, name.find('.'));
}

// Checks a job of this shape cannot measure: a straggler among fewer than 3 ranks, a pair of
// nodes in a job of one.
bool unmeasurable_here(const std::string& threshold, const json& report) {
  if (threshold == "min_straggler_score") return report["ranks"].size() < 3;
  if (threshold == "min_pair_gbps") return report["nodes"].size() < 2;
  return false;
}

// What keeps a host file from holding together, one line each; none for a sound file.
std::vector<std::string> inconsistencies(const std::string& path) {
  std::vector<std::string> found;
  tp::HostReference reference;
  tp::split_reference_section(path, read_text(path), reference);
  const tp::AcceptConfig config = thresholds_of(path);
  if (!reference.count("nodes") || !reference.count("ranks_per_node"))
    return {"[reference] needs nodes and ranks_per_node"};
  for (const tp::GateThreshold& t : config.thresholds) {
    if (t.threshold.source.find("gate.file") == std::string::npos) continue;
    const tp::ReferenceFigureName* f = feeding(t.threshold.check);
    if (!f || !reference.count(f->name))
      found.push_back("sets gate." + t.threshold.check + " but [reference] has no figure for it");
  }
  const int nodes = int(reference.at("nodes"));
  for (const int job_nodes : {nodes, 8 * nodes}) {
    const std::string where = " at " + std::to_string(job_nodes) + " nodes: ";
    // A healthy host passes every threshold (PASS, not WARN).
    const json healthy = synthetic_report({reference, 1.0}, job_nodes, config.busbw_bytes);
    for (const json& check : judged(config, healthy))
      if (check["status"] != "pass" &&
          !(check["status"] == "n/a" && unmeasurable_here(threshold_of(check), healthy)))
        found.push_back("a healthy host" + where + check.dump());
    // A host 60% as good fails every check its speed feeds; spreads still pass.
    const json weak = synthetic_report({reference, kWeakHost}, job_nodes, config.busbw_bytes);
    int failed = 0;
    for (const json& check : judged(config, weak)) {
      const std::string threshold = threshold_of(check);
      const tp::ReferenceFigureName* f = feeding(threshold);
      if (!f || !reference.count(f->name) || unmeasurable_here(threshold, weak)) continue;
      const char* want = f->kind == tp::ReferenceKind::spread ? "pass" : "fail";
      failed += f->kind != tp::ReferenceKind::spread;
      if (check["status"] != want)
        found.push_back("a host at 60% of its " + f->name + where + check.dump());
    }
    if (failed == 0) found.push_back("no threshold is fed by a speed" + where);
  }
  return found;
}

class HostFile : public ::testing::TestWithParam<std::string> {};

TEST_P(HostFile, HoldsTogether) {
  for (const std::string& why : inconsistencies(GetParam()))
    ADD_FAILURE() << GetParam() << ": " << why;
}

// The check's negative control: a shipped file, loosened or left without a figure, fails it.
TEST(HostFileCheck, ALooseLimitOrAMissingFigureIsFound) {
  const std::string shipped = std::string(TRAINPROOF_SCENARIOS) + "/hosts/dev-vm-2core.ini";
  const std::string text = read_text(shipped);
  const auto variant = [&](const std::string& name, const std::string& from,
                           const std::string& to) {
    const std::string path = ::testing::TempDir() + name;
    std::string changed = text;
    const size_t at = changed.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) changed.replace(at, from.size(), to);
    std::ofstream(path) << changed;
    return inconsistencies(path);
  };
  EXPECT_TRUE(inconsistencies(shipped).empty());
  const auto loose = variant("host_loose.ini", "min_busbw_gbps = 1.3", "min_busbw_gbps = 1.0");
  ASSERT_FALSE(loose.empty());
  EXPECT_THAT(loose.front(), HasSubstr("a host at 60% of its busbw_gbps"));
  const auto tight = variant("host_tight.ini", "min_au = 0.135", "min_au = 0.21");
  ASSERT_FALSE(tight.empty());
  EXPECT_THAT(tight.front(), HasSubstr("a healthy host"));  // the WARN band, not a PASS
  const auto bare = variant("host_bare.ini", "min_au = 0.135", "min_au = 0.135\nmax_step_cv = 2");
  ASSERT_FALSE(bare.empty());
  EXPECT_THAT(bare.front(), HasSubstr("sets gate.max_step_cv but [reference] has no figure"));
}

// Three golden runs of the H200 host type's reference job, each a little off the reference, as
// accept and report merge leave them.
std::vector<tp::GoldenReport> golden_h200_runs(tp::HostReference& reference) {
  const std::string shipped = std::string(TRAINPROOF_SCENARIOS) + "/hosts/h200-nvlink-ndr400.ini";
  tp::split_reference_section(shipped, read_text(shipped), reference);
  std::vector<tp::GoldenReport> golden;
  for (const double share : {1.02, 0.97, 1.0}) {
    json report = synthetic_report({reference, share}, int(reference.at("nodes")), 256 << 20);
    // What the reference has no figure for, these runs did not measure.
    report.erase("drill");
    report["restore"].erase("seconds");
    report["job"].erase("goodput");
    report["context"]["scenario_hash"] = "5f2a";
    golden.push_back({"golden-" + std::to_string(golden.size() + 1) + ".json", report});
  }
  return golden;
}

std::string line_of(const std::string& text, const std::string& key) {
  const size_t at = text.find("\n" + key + " = ");
  if (at == std::string::npos) return "";
  return text.substr(at + 1, text.find('\n', at + 1) - at - 1);
}

TEST(HostFileDraft, GoldenRunsGiveAFileThatHoldsTogetherWithEachSource) {
  tp::HostReference reference;
  const std::vector<tp::GoldenReport> golden = golden_h200_runs(reference);
  const std::string text = tp::draft_host_file(golden, 0.8);
  const std::string path = ::testing::TempDir() + "drafted.ini";
  std::ofstream(path) << text;
  for (const std::string& why : inconsistencies(path)) ADD_FAILURE() << why << "\n" << text;
  // The worst run is the second (97% of the reference): every reference figure is its figure.
  EXPECT_EQ(line_of(text, "busbw_gbps"), "busbw_gbps = " + tp::exact_number(360 * 0.97)) << text;
  EXPECT_EQ(line_of(text, "min_busbw_gbps"), "min_busbw_gbps = 279") << text;  // 349.2 x 0.8
  EXPECT_THAT(text, HasSubstr("# The worst golden figure, 349 (golden-2.json), x 0.8\n"
                              "min_busbw_gbps = 279\n"));
  EXPECT_EQ(line_of(text, "max_restore_s"), "");  // no restore_s figure in the reference
  EXPECT_THAT(text, HasSubstr("# Not measured by these runs, so not set: min_job_goodput, "
                              "max_restore_s, max_rto_s, max_rpo_steps\n"));
  EXPECT_EQ(line_of(text, "scenario_hash"), "scenario_hash = 5f2a");
  EXPECT_EQ(line_of(text, "nodes"), "nodes = 8");
  EXPECT_EQ(line_of(text, "gpus_per_node"), "gpus_per_node = 8");
  EXPECT_EQ(line_of(text, "busbw_bytes"), "busbw_bytes = 268435456");
  // A time goes the other way: the worst is the longest, and the limit is it over the share.
  EXPECT_EQ(line_of(text, "comm_exposed_fraction"),
            "comm_exposed_fraction = " + tp::exact_number(0.1 / 0.97));
}

TEST(HostFileDraft, RunsOfOtherWorkOrAShareOutOfRangeAreRefusedNamingTheFile) {
  tp::HostReference reference;
  std::vector<tp::GoldenReport> golden = golden_h200_runs(reference);
  EXPECT_THROW(tp::draft_host_file(golden, 0.6), tp::UsageError);
  EXPECT_THROW(tp::draft_host_file(golden, 0.95), tp::UsageError);
  golden[2].report["context"]["scenario_hash"] = "9e1c";
  try {
    tp::draft_host_file(golden, 0.8);
    ADD_FAILURE() << "another scenario was accepted";
  } catch (const tp::UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("golden-3.json ran scenario 9e1c and golden-1.json ran 5f2a"));
  }
  EXPECT_THROW(tp::draft_host_file({{"empty.json", json::object()}}, 0.8), tp::UsageError);
}

// A node-check report of an 8x H200 node as node-check writes it.
json h200_node_check(int gpus, double memory_gb, const std::string& driver) {
  json report = {{"schema", "trainproof.report/3"}, {"verdict", "PASS"}};
  json& nc = report["node_check"];
  nc["level"] = "quick";
  nc["machine"] = {{"cpus", 224},
                   {"memory_gb", memory_gb},
                   {"interfaces_up", {"eth0"}},
                   {"pci_gpus", json::array()},
                   {"rdma_ports", json::array()}};
  for (int i = 0; i < 8; ++i)
    nc["machine"]["rdma_ports"].push_back({{"device", "mlx5_" + std::to_string(i)},
                                           {"state", "ACTIVE"},
                                           {"phys_state", "LinkUp"},
                                           {"link_layer", "InfiniBand"},
                                           {"rate_gbps", 400.0},
                                           {"pcie", {{"max_gen", 5}, {"max_width", 16}}}});
  nc["driver"] = {{"loaded", true},
                  {"driver_version", driver},
                  {"cuda_driver_version", "12.4"},
                  {"nccl_version", "2.23.4"},
                  {"gpus", json::array()}};
  for (int i = 0; i < gpus; ++i)
    nc["driver"]["gpus"].push_back({{"name", "NVIDIA H200"},
                                    {"device_id", 0x2335},
                                    {"memory_gb", 150.75 - i * 0.01},
                                    {"vbios", "96.00.99.00.01"},
                                    {"ecc", 1},
                                    {"mig", 0},
                                    {"persistence", 1},
                                    {"nvlinks_up", 18},
                                    {"max_pcie_gen", 5},
                                    {"max_pcie_width", 16}});
  return report;
}

// A drafted host file, written to `name`, held to every shipped file's self-consistency check,
// and its [inventory] and [health] as the host file reader reads them.
tp::InventorySpec drafted_spec(const std::string& text, const std::string& name) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  for (const std::string& why : inconsistencies(path)) ADD_FAILURE() << why << "\n" << text;
  tp::HostReference ignored;
  tp::InventoryLines lines;
  tp::split_host_sections(path, text, ignored, lines);
  return tp::parse_inventory(path, lines);
}

TEST(HostFileDraft, NodeCheckReportsGiveTheInventoryAsMinimums) {
  tp::HostReference reference;
  std::vector<tp::GoldenReport> golden = golden_h200_runs(reference);
  golden.push_back({"node-1.json", h200_node_check(8, 2063.5, "550.90.07")});
  golden.push_back({"node-2.json", h200_node_check(8, 2051.2, "550.54.15")});
  const std::string text = tp::draft_host_file(golden, 0.8);
  const tp::InventorySpec spec = drafted_spec(text, "drafted_inventory.ini");
  EXPECT_EQ(spec.gpus, 8);
  EXPECT_EQ(spec.gpu_name, "NVIDIA H200");
  EXPECT_EQ(spec.gpu_device_id, 0x2335u);
  EXPECT_EQ(spec.min_gpu_memory_gb, 150);
  EXPECT_EQ(spec.min_driver_version, "550.54.15") << "the older of the two";
  EXPECT_EQ(spec.min_host_memory_gb, std::floor(2051.2 * 0.95));
  EXPECT_EQ(spec.nics, 8);
  EXPECT_EQ(spec.min_nic_rate_gbps, 400);
  EXPECT_EQ(spec.nvlinks_per_gpu, 18);
  EXPECT_EQ(spec.ecc, true);
  EXPECT_EQ(spec.mig, false);
  EXPECT_EQ(spec.ib_ports_active, true);
  golden.push_back({"node-3.json", h200_node_check(7, 2063.5, "550.90.07")});
  try {
    tp::draft_host_file(golden, 0.8);
    ADD_FAILURE() << "a node with 7 GPUs joined an 8-GPU host type";
  } catch (const tp::UsageError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("node-3.json found gpus 7 where node-1.json, node-2.json found 8"));
  }
}

TEST(HostFileDraft, FullLevelReportsGiveTheHealthFloorsAtTheLowestFigureTimesTheShare) {
  // A node-check --level=full report (GPU 3's GEMM the lowest, one pair's copy the lowest) and an
  // accept --level=full report of its preflight alone (the lowest host-to-device rate).
  json node = h200_node_check(8, 2063.5, "550.90.07");
  json& nc = node["node_check"];
  nc["level"] = "full";
  nc["burn"] = {{"backend", "cuda"}, {"devices", json::array()}};
  nc["copies"] = {{"backend", "cuda"}, {"devices", json::array()}, {"pairs", json::array()}};
  for (int i = 0; i < 8; ++i) {
    nc["burn"]["devices"].push_back({{"gpu", i}, {"tflops", i == 3 ? 590.0 : 610.0}});
    nc["copies"]["devices"].push_back(
        {{"gpu", i}, {"device_gbps", 3900.0}, {"h2d_gbps", 55.0}, {"d2h_gbps", 54.0}});
    nc["copies"]["pairs"].push_back(
        {{"source", i}, {"destination", (i + 1) % 8}, {"gbps", i == 5 ? 700.0 : 720.0}});
  }
  nc["copies"]["pairs"].push_back({{"source", 0}, {"destination", 2}, {"gbps", nullptr}});
  json accept = {{"schema", "trainproof.report/3"}, {"verdict", "PASS"}};
  accept["preflight"]["burn"]["nodes"] = {{{"host", "gpu-node-01"},
                                           {"devices",
                                            {{{"gpu", 0},
                                              {"gemm_tflops", 600.0},
                                              {"memory_copy_gbps", 3950.0},
                                              {"h2d_gbps", 50.0},
                                              {"d2h_gbps", 56.0}}}}}};
  tp::HostReference reference;
  std::vector<tp::GoldenReport> golden = golden_h200_runs(reference);
  golden.push_back({"node-1.json", node});
  golden.push_back({"accept-full.json", accept});
  const std::string text = tp::draft_host_file(golden, 0.8);
  EXPECT_THAT(text, HasSubstr("# The lowest golden figure, 590 (node-1.json)\n"
                              "min_gemm_tflops = 472\n"));
  EXPECT_THAT(text, HasSubstr("# The lowest golden figure, 50 (accept-full.json)\n"
                              "min_h2d_gbps = 40\n"));
  const tp::InventorySpec spec = drafted_spec(text, "drafted_health.ini");
  EXPECT_DOUBLE_EQ(spec.min_gemm_tflops, 472);
  EXPECT_DOUBLE_EQ(spec.min_memory_copy_gbps, 3120);
  EXPECT_DOUBLE_EQ(spec.min_h2d_gbps, 40);
  EXPECT_DOUBLE_EQ(spec.min_d2h_gbps, 43.2);
  EXPECT_DOUBLE_EQ(spec.min_peer_copy_gbps, 560) << "a pair without a peer path is no figure";
  // An accept report with neither a gate figure nor a burn is still refused.
  EXPECT_THROW(
      tp::draft_host_file({{"accept-empty.json", json{{"preflight", json::object()}}}}, 0.8),
      tp::UsageError);
}

INSTANTIATE_TEST_SUITE_P(ScenariosHosts, HostFile, ::testing::ValuesIn(host_files()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = fs::path(info.param).stem().string();
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST(HostReference, KeepsLineNumbersAndNamesAnUnknownFigure) {
  tp::HostReference reference;
  const std::string text = "[gate]\nmin_au = 0.5\n[reference]\n# measured\nau = 0.8\n";
  EXPECT_EQ(tp::split_reference_section("h.ini", text, reference), "[gate]\nmin_au = 0.5\n\n\n\n");
  EXPECT_EQ(reference.at("au"), 0.8);
  tp::HostReference again;
  try {
    tp::split_reference_section("h.ini", "[reference]\n\naw = 0.8\n", again);
    FAIL() << "an unknown figure was accepted";
  } catch (const tp::UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("gate.file 'h.ini', line 3: unknown reference figure 'aw'"));
  }
  EXPECT_THROW(tp::split_reference_section("h.ini", "[reference]\nau = fast\n", again),
               tp::UsageError);
  EXPECT_THROW(tp::split_reference_section("h.ini", "[reference]\nau = -1\n", again),
               tp::UsageError);
}

TEST(HostReference, AGateFileWithAReferenceSectionIsReadAndAMisspeltFigureIsExit2) {
  const std::string dir = ::testing::TempDir();
  const std::string good = dir + "host_reference_good.ini";
  const std::string bad = dir + "host_reference_bad.ini";
  std::ofstream(good) << "[gate]\nmin_au = 0.5\n[reference]\nnodes = 2\nau = 0.8\n";
  std::ofstream(bad) << "[gate]\nmin_au = 0.5\n[reference]\nau = 0.8\nbusbw = 3\n";
  EXPECT_EQ(thresholds_of(good).thresholds.front().threshold.limit, 0.5);
  try {
    thresholds_of(bad);
    FAIL() << "a misspelt reference figure was accepted";
  } catch (const tp::UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("line 5: unknown reference figure 'busbw'"));
  }
}

}  // namespace
