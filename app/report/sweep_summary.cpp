#include "app/report/sweep_summary.h"

#include <cstdio>
#include <map>
#include <tuple>

#include "app/report/pair_matrix_text.h"
#include "app/report/summary_parts.h"
#include "common/dtype_names.h"
#include "common/number_text.h"

namespace tp {
namespace {

using nlohmann::json;

// nccl-tests' names for the element types, so a pasted table reads like its own.
std::string nccl_tests_type(const std::string& dtype) {
  const std::string name = dtype_name(dtype);  // /2 reports wrote bf16 and fp16
  if (name == "float32") return "float";
  if (name == "float16") return "half";
  return name.empty() ? dtype : name;
}

// Microseconds with as many decimals as fit 7 columns.
std::string time_cell(double us) {
  return us < 100     ? printf_text("%7.2f", us)
         : us < 10000 ? printf_text("%7.1f", us)
                      : printf_text("%7.0f", us);
}

std::string pass_cells(const json& row) {
  if (!row.is_object() || !row.value("not_run", std::string()).empty())
    return printf_text("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
  return printf_text("  %s  %6.2f  %6.2f  %6llu", time_cell(row.at("time_us").at("mean")).c_str(),
                     row.at("algbw_gbps").get<double>(), row.at("busbw_gbps").get<double>(),
                     static_cast<unsigned long long>(row.at("wrong").get<uint64_t>()));
}

std::string tables(const json& sweep) {
  std::string out;
  const json devices = sweep.value("devices", json::array());  // absent in older reports
  int index = 0;
  for (const json& group : sweep.at("groups")) {
    const std::string name = group.at("name");
    const std::vector<int> world_ranks = group.value("world_ranks", std::vector<int>());
    const int group_index = index++;
    std::string op;
    std::vector<json> op_rows;      // the operation's rows so far, for its closing lines
    const json* pending = nullptr;  // the out-of-place row waiting for its in-place twin
    for (const json& row : sweep.at("results")) {
      if (row.at("group") != name) continue;
      if (row.at("op") != op) {
        if (!op_rows.empty()) out += sweep_op_closing_lines(op_rows);
        op_rows.clear();
        op = row.at("op");
        out += sweep_table_header(op, name, world_ranks, devices, group_index);
      }
      op_rows.push_back(row);
      if (!row.at("in_place").get<bool>()) {
        pending = &row;
        continue;
      }
      out += sweep_table_line(pending ? *pending : json(nullptr), row);
      pending = nullptr;
    }
    if (!op_rows.empty()) out += sweep_op_closing_lines(op_rows);
  }
  return out;
}

std::string wrong_lines(const json& sweep) {
  if (sweep.at("wrong").get<uint64_t>() == 0) return "";
  return printf_text("\n%llu wrong elements; the first wrong row: %s\n",
                     static_cast<unsigned long long>(sweep.at("wrong").get<uint64_t>()),
                     sweep.at("first_wrong").get<std::string>().c_str());
}

std::string header(const json& ctx, const json& sweep) {
  return printf_text("\ntrainproof sweep (%s): %d ranks on %zu hosts, comm %s, %s, split %s\n",
                     sweep.at("mode").get<std::string>().c_str(), ctx.at("world_size").get<int>(),
                     ctx.at("hosts").size(), sweep.at("backend").get<std::string>().c_str(),
                     sweep.at("dtype").get<std::string>().c_str(),
                     sweep.at("split").get<std::string>().c_str());
}

// "12.34 GB/s", or "n/a" for a figure nothing measured.
std::string gbps_cell(const json& value) {
  return value.is_number() ? printf_text("%8.2f GB/s", value.get<double>()) : std::string("n/a");
}

std::string group_lines(const json& sweep) {
  if (sweep.at("groups").size() < 2) return "";
  std::string out = "\ngroups (average busbw over every size; over sizes >= 1 MiB):\n";
  for (const json& g : sweep.at("groups"))
    out += printf_text("  %-28s %3d ranks  %13s  %13s\n", g.at("name").get<std::string>().c_str(),
                       g.at("ranks").get<int>(), gbps_cell(g.at("avg_busbw_gbps")).c_str(),
                       gbps_cell(g.at("avg_busbw_gbps_1mib")).c_str());
  return out + "slowest group: " + sweep.at("slowest_group").get<std::string>() + "\n";
}

std::string pairwise_lines(const json& p) {
  std::string out = printf_text("\npairwise: %llu bytes x %d per pair and direction\n",
                                static_cast<unsigned long long>(p.at("pair_bytes").get<uint64_t>()),
                                p.at("pair_iters").get<int>());
  for (const json& rail : p.at("rails")) {
    const std::string name = "rail " + std::to_string(rail.at("rail").get<int>());
    for (const auto& [key, mode, how] :
         {std::tuple{"one_way_gbps", "one_way", ", one direction at a time"},
          std::tuple{"both_ways_gbps", "both_ways", ", both directions at once"}})
      out += rail.value(key, json()).is_array()
                 ? pair_matrix_text(rail.at("hosts"), rail.at(key), name + how)
                 : slowest_pairs_text(rail.at("hosts"), rail.value(mode, json::object()),
                                      name + how, rail.value("matrices_in_trace", json()));
    if (const std::string note = rail.at("note"); !note.empty()) out += "  " + note + "\n";
    for (const json& link : rail.at("bad_links")) out += "  bad " + link.get<std::string>() + "\n";
  }
  return out;
}

}  // namespace

std::string nccl_tests_program(const std::string& op) {
  static const std::map<std::string, std::string> programs = {
      {"allreduce", "all_reduce_perf"},
      {"allgather", "all_gather_perf"},
      {"reducescatter", "reduce_scatter_perf"},
      {"broadcast", "broadcast_perf"},
      {"alltoall", "alltoall_perf"},
      {"sendrecv", "sendrecv_perf"},
      {"reduce", "reduce_perf"}};
  const auto found = programs.find(op);
  return found != programs.end() ? found->second : op + "_perf";
}

std::string device_lines(const std::vector<int>& world_ranks, const json& devices, int index) {
  std::string out = "# Using devices\n";
  size_t shown = 0;
  for (int rank : world_ranks) {
    if (rank < 0 || size_t(rank) >= devices.size() || !devices[size_t(rank)].is_object()) continue;
    if (shown++ == kDeviceLines) break;
    const json& d = devices[size_t(rank)];
    // nccl-tests prints the PCI domain, bus and device: the function is left out.
    std::string pci = d.value("pci_bus_id", "");
    if (const size_t dot = pci.rfind('.'); dot != std::string::npos) pci.resize(dot);
    out += printf_text("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n", rank, index,
                       d.value("pid", 0), d.value("host", "").c_str(), d.value("device", -1),
                       pci.empty() ? "none" : pci.c_str(), d.value("name", "").c_str());
  }
  if (shown > kDeviceLines)
    out += printf_text("#  ... and %zu more ranks (sweep.devices[] in the report lists each)\n",
                       world_ranks.size() - kDeviceLines);
  return out;
}

std::string sweep_table_header(const std::string& op, const std::string& group,
                               const std::vector<int>& world_ranks, const json& devices,
                               int index) {
  return "#\n# Collective test starting: " + nccl_tests_program(op) + "\n#\n" +
         device_lines(world_ranks, devices, index) +
         printf_text("#\n# %s, %zu ranks (%s)\n", op.c_str(), world_ranks.size(), group.c_str()) +
         "#                                                              out-of-place            "
         "           in-place\n"
         "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
         "time   algbw   busbw #wrong\n"
         "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
         "(us)  (GB/s)  (GB/s)\n";
}

std::string sweep_table_line(const json& out_of_place, const json& in_place) {
  const json& any = out_of_place.is_object() ? out_of_place : in_place;
  return printf_text("%12llu  %12llu  %8s  %6s  %6d",
                     static_cast<unsigned long long>(any.at("bytes").get<uint64_t>()),
                     static_cast<unsigned long long>(any.at("count").get<uint64_t>()),
                     nccl_tests_type(any.at("dtype")).c_str(),
                     any.at("redop").get<std::string>().c_str(), any.at("root").get<int>()) +
         pass_cells(out_of_place) + pass_cells(in_place) + "\n";
}

std::string sweep_op_closing_lines(const std::vector<json>& rows) {
  uint64_t wrong = 0;
  double all = 0, large = 0;
  int counted = 0, counted_large = 0;
  for (const json& row : rows) {
    wrong += row.value("wrong", uint64_t(0));
    if (!row.value("not_run", std::string()).empty() || !row.contains("busbw_gbps") ||
        !row["busbw_gbps"].is_number())
      continue;
    all += row["busbw_gbps"].get<double>();
    ++counted;
    if (row.value("bytes", uint64_t(0)) >= (uint64_t(1) << 20)) {
      large += row["busbw_gbps"].get<double>();
      ++counted_large;
    }
  }
  const auto average = [](double sum, int n) {
    return n > 0 ? readable_number(sum / n, 6) : std::string("N/A");
  };
  return printf_text("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(wrong),
                     wrong == 0 ? "OK" : "FAILED") +
         "# Avg bus bandwidth    : " + average(all, counted) +
         "\n# trainproof: avg busbw over sizes >= 1 MiB : " + average(large, counted_large) +
         "\n#\n# Collective test concluded: " +
         nccl_tests_program(rows.empty() ? "" : rows.front().value("op", "")) + "\n#\n";
}

std::string render_sweep_summary(const json& untrusted, bool with_tables) {
  const json report = visible(untrusted);
  const json& ctx = report.at("context");
  const json& sweep = report.at("sweep");
  std::string out;
  out += header(ctx, sweep);
  if (!sweep.contains("pairwise") && sweep.contains("min_bytes") && sweep.contains("max_bytes"))
    out += printf_text("sizes: %s to %s bytes%s\n", sweep.at("min_bytes").dump().c_str(),
                       sweep.at("max_bytes").dump().c_str(),
                       sweep.value("max_bytes_rule", json()).is_string()
                           ? (" (" + sweep.at("max_bytes_rule").get<std::string>() + ")").c_str()
                           : "");
  if (sweep.contains("pairwise"))
    out += pairwise_lines(sweep.at("pairwise"));
  else if (with_tables)
    out += tables(sweep);
  if (sweep.contains("groups")) {
    out += group_lines(sweep);
    out += wrong_lines(sweep);
  }
  out += flagged_nodes(report.at("nodes"));
  out += warning_lines(ctx.at("warnings"));
  out += check_lines(report.at("gate").at("checks"));
  out += "verdict: " + report.at("verdict").get<std::string>() + "\n";
  return out;
}

}  // namespace tp
