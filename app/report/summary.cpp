#include "app/report/summary.h"

#include "app/job/cost.h"
#include "app/job/job_timeline.h"
#include "app/report/summary_parts.h"
#include "app/report/sweep_summary.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "app/report/report_buckets.h"
#include "common/number_text.h"
#include "common/text_safety.h"

namespace tp {
namespace {

using nlohmann::json;

std::string si(double value, const char* unit) {
  const char* prefixes[] = {"", "k", "M", "G", "T", "P"};
  int p = 0;
  while (value >= 1000.0 && p < 5) {
    value /= 1000.0;
    ++p;
  }
  const std::string suffix = std::string(prefixes[p]) + unit;
  return suffix.empty() ? readable_number(value) : readable_number(value) + " " + suffix;
}

// A buffer's size in the binary units its option is given in (comm.bucket_mb is MiB): 8 KiB,
// 25 MiB.
std::string binary_size(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  return readable_number(bytes) + " " + units[u];
}

double seconds_p50(const json& summary) {
  return summary.is_object() ? summary.at("p50").get<double>() : 0.0;
}

// The checkpoint overhead (docs/report.md), said once: the share of training time checkpoints
// take, with the two medians it rests on. A /2 report has stall_fraction (stall over the training
// between saves) instead: the same share follows from it.
std::string overhead_line(const json& c) {
  const double stall = seconds_p50(c.at("stall_s"));
  json overhead = c.value("overhead", json(nullptr));
  const json older = c.value("stall_fraction", json(nullptr));
  if (!overhead.is_number() && older.is_number())
    overhead = older.get<double>() / (1 + older.get<double>());
  if (!overhead.is_number())
    return "  checkpoints stalled training " + readable_number(stall) + " s a save";
  const double share = overhead.get<double>();
  std::string out = "  checkpoints took " + readable_percent(share) +
                    " of training time: a stall of " + readable_number(stall) + " s a save";
  if (c.contains("training_between_s") && c["training_between_s"].is_number())
    out += " against " + readable_number(c["training_between_s"].get<double>()) +
           " s of training between saves (medians)";
  if (share > 0.5) out += ", longer than the training between them";
  return out;
}

std::string checkpoint_lines(const json& c) {
  std::string mode = c.at("layout").get<std::string>();
  if (c.value("shard_optimizer", false) && mode == "file-per-rank") mode += ", sharded";
  if (c.value("async", false)) mode += ", async";
  std::string out;
  const size_t saves = c.at("saves").size();
  if (saves == 0) {
    out += "\ncheckpoints (" + mode + "): none written\n";
  } else {
    out += printf_text(
        "\ncheckpoints (%s): %zu written, %s each; write %s/s aggregate (ranks %s/s to %s/s)\n",
        mode.c_str(), saves, si(c.at("bytes").get<double>(), "B").c_str(),
        si(c.at("write_gbps").get<double>() * 1e9, "B").c_str(),
        si(c.at("rank_write_gbps").at("min").get<double>() * 1e9, "B").c_str(),
        si(c.at("rank_write_gbps").at("max").get<double>() * 1e9, "B").c_str());
    out += overhead_line(c) + "; the save was committed " +
           readable_number(seconds_p50(c.at("total_s"))) + " s after it began\n";
  }
  const json& r = c.at("restore");
  if (r.is_object()) {
    out += printf_text("  restored step %lld from %s in %.3f s, %s/s%s\n",
                       r.at("step").get<long long>(), r.at("folder").get<std::string>().c_str(),
                       r.at("seconds").get<double>(),
                       si(r.at("restore_gbps").get<double>() * 1e9, "B").c_str(),
                       c.value("cold_read", false) ? " (cold)" : "");
    for (const json& rejected : r.at("rejected"))
      out += "  set aside: " + rejected.get<std::string>() + "\n";
    for (const json& damaged : r.value("damaged_replicas", json::array()))
      out += "  damaged replica, another restored: " + damaged.get<std::string>() + "\n";
  }
  return out;
}

std::string header_lines(const json& ctx, const json& train) {
  const json& model = train.at("model");
  const size_t hosts = ctx.at("hosts").size();
  std::string out = printf_text(
      "trainproof %s: %d ranks on %zu host%s, %lld steps (%lld warm-up), compute %s, "
      "comm %s%s\n",
      ctx.at("tool").at("version").get<std::string>().c_str(), ctx.at("world_size").get<int>(),
      hosts, hosts == 1 ? "" : "s", train.at("steps_run").get<long long>(),
      train.at("warmup_steps").get<long long>(),
      ctx.at("backends").at("compute").get<std::string>().c_str(),
      ctx.at("backends").at("comm").get<std::string>().c_str(),
      train.at("timing").at("overlap").get<bool>() ? " (overlapped)" : " (blocking)");
  // Reports before model.batch_per_rank have no such field.
  const json per_rank = model.value("batch_per_rank", json());
  const std::string batch =
      std::to_string(model.at("global_batch").get<long long>()) +
      (per_rank.is_number() ? " (" + std::to_string(per_rank.get<long long>()) + " per rank)" : "");
  out += printf_text("model: %d layers x %d hidden, seq %d, global batch %s, %s parameters\n\n",
                     model.at("layers").get<int>(), model.at("hidden").get<int>(),
                     model.at("seq").get<int>(), batch.c_str(),
                     si(model.at("parameters").get<double>(), "").c_str());
  return out;
}

std::string ms_row(const char* name, const json& s) {
  return printf_text("%-14s %10.3f %10.3f %10.3f %10.3f %10.3f\n", name,
                     s.at("min").get<double>() * 1e3, s.at("p50").get<double>() * 1e3,
                     s.at("p99").get<double>() * 1e3, s.at("max").get<double>() * 1e3,
                     s.at("mean").get<double>() * 1e3);
}

std::string phase_table(const json& train) {
  std::string out = printf_text("%-14s %10s %10s %10s %10s %10s\n", "phase (ms)", "min", "p50",
                                "p99", "max", "mean");
  for (const char* phase :
       {"data", "compute", "comm", "comm_exposed", "optimizer", "checkpoint", "step"})
    out += ms_row(phase, train.at("phases").at(phase));
  return out + ms_row("arrival_skew", train.at("arrival_skew"));
}

std::string throughput_line(const json& train) {
  return printf_text(
      "\nAU %.3f | %s samples/s | %s tokens/s | achieved %s (%s of the GEMM-alone "
      "rate %s)\n",
      train.at("au").get<double>(), si(train.at("samples_per_s").get<double>(), "").c_str(),
      si(train.at("tokens_per_s").get<double>(), "").c_str(),
      si(train.at("achieved_flops").get<double>(), "FLOP/s").c_str(),
      readable_percent(train.at("achieved_vs_gemm_rate").get<double>()).c_str(),
      si(train.at("gemm_rate_flops").get<double>(), "FLOP/s").c_str());
}

// Per bucket size: the collective's time and bus bandwidth, and against the sweep's row of the
// same report where there is one (app/report/report_buckets.h).
std::string bucket_lines(const json& report) {
  const json& train = report.at("train");
  if (!train.contains("buckets") || train.at("buckets").empty()) return "";
  const json efficiency = comm_efficiency_json(report);
  std::string out = "\ncomm per bucket size (time on the last rank to start it, p50):\n";
  for (const json& size : train.at("buckets")) {
    out += printf_text(
        "  %s x%d: %.3f ms, busbw %s GB/s", binary_size(size.at("bytes").get<double>()).c_str(),
        size.at("buckets").get<int>(), size.at("time_s").at("p50").get<double>() * 1e3,
        readable_number(size.at("busbw_gbps").get<double>()).c_str());
    for (const json& e : efficiency)
      if (e.at("bytes") == size.at("bytes"))
        out += printf_text(", %s of the sweep's %s GB/s at %s",
                           readable_percent(e.at("efficiency").get<double>()).c_str(),
                           readable_number(e.at("sweep_busbw_gbps").get<double>()).c_str(),
                           binary_size(e.at("sweep_bytes").get<double>()).c_str());
    out += "\n";
  }
  return out;
}

std::string data_line(const json& d) {
  return printf_text(
      "\ndata (%s, %d files, %d readers, prefetch %d%s): %s read at %s/s (ranks %s/s to %s/s), "
      "%s samples/s; stall p50 %.3f ms\n",
      d.at("format").get<std::string>().c_str(), d.at("files").get<int>(),
      d.at("readers").get<int>(), d.at("prefetch").get<int>(),
      d.value("verify", false) ? ", verified" : "",
      si(d.at("bytes_read").get<double>(), "B").c_str(),
      si(d.at("read_gbps").get<double>() * 1e9, "B").c_str(),
      si(d.at("rank_read_gbps").at("min").get<double>() * 1e9, "B").c_str(),
      si(d.at("rank_read_gbps").at("max").get<double>() * 1e9, "B").c_str(),
      si(d.at("samples_per_s").get<double>(), "").c_str(),
      d.at("stall").at("p50").get<double>() * 1e3);
}

// The lowest straggler scores first; ties keep rank order.
std::string slowest_ranks(const json& report, size_t shown) {
  std::vector<json> ranks(report.at("ranks").begin(), report.at("ranks").end());
  std::stable_sort(ranks.begin(), ranks.end(), [](const json& a, const json& b) {
    return a.at("straggler_score").get<double>() < b.at("straggler_score").get<double>();
  });
  std::string out = printf_text("\nslowest ranks %-20s %12s %12s %10s %12s\n", "(host)",
                                "compute p50", "step p50", "score", "skew p50");
  for (size_t i = 0; i < std::min(shown, ranks.size()); ++i) {
    const json& r = ranks[i];
    out += printf_text(
        "  rank %-5d %-22s %9.3f ms %9.3f ms %10.2f %9.3f ms%s\n", r.at("rank").get<int>(),
        r.at("host").get<std::string>().c_str(), r.at("p50").at("compute").get<double>() * 1e3,
        r.at("p50").at("step").get<double>() * 1e3, r.at("straggler_score").get<double>(),
        r.at("arrival_skew").at("p50").get<double>() * 1e3,
        r.at("flagged").get<bool>() ? "  FLAGGED" : "");
  }
  return out;
}

}  // namespace

std::string flagged_nodes(const json& nodes) {
  std::string out = "\nflagged nodes:";
  bool any = false;
  for (const json& n : nodes) {
    if (!n.at("flagged").get<bool>()) continue;
    any = true;
    out += "\n  " + n.at("host").get<std::string>() + ":";
    for (const json& reason : n.at("reasons")) out += "\n    - " + reason.get<std::string>();
  }
  return out + (any ? "\n" : " none\n");
}

std::string warning_lines(const json& warnings) {
  if (warnings.empty()) return "";
  std::string out = "\nwarnings:\n";
  for (const json& w : warnings) out += "  - " + w.get<std::string>() + "\n";
  return out;
}

std::string check_lines(const json& checks) {
  std::string out = "\nchecks:\n";
  for (const json& c : checks) {
    // PASS, WARN, FAIL as verdicts read; n/a as everywhere outside nccl-tests' table.
    std::string status = c.at("status").get<std::string>();
    if (status != "n/a") std::transform(status.begin(), status.end(), status.begin(), ::toupper);
    out += printf_text("  %-5s %-24s %s\n", status.c_str(), c.at("name").get<std::string>().c_str(),
                       c.at("reason").get<std::string>().c_str());
  }
  return out;
}

// What a terminal would act on (C0 and C1 controls, DEL, bytes that are not UTF-8) as visible
// \n, \xNN or \u00NN, so that a report's strings can neither move the cursor nor forge a line.
static std::string visible_text(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const size_t length = utf8_sequence_length(text, i);
    if (byte == '\n') {
      out += "\\n";
    } else if (byte < 0x20 || byte == 0x7f || length == 0) {
      out += printf_text("\\x%02X", byte);
    } else if (byte == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0) {
      out += printf_text("\\u%04X", static_cast<unsigned char>(text[i + 1]));  // C1 control
    } else {
      out.append(text, i, length);
      i += length;
      continue;
    }
    i += std::max<size_t>(length, 1);
  }
  return out;
}

json visible(const json& value) {
  if (value.is_string()) return visible_text(value.get<std::string>());
  if (!value.is_structured()) return value;
  json out = value.is_array() ? json::array() : json::object();
  for (auto it = value.begin(); it != value.end(); ++it)
    if (value.is_array())
      out.push_back(visible(*it));
    else
      out[visible_text(it.key())] = visible(*it);
  return out;
}

// A partial report (app/accept/accept_progress.h) says so before anything else.
std::string partial_line(const json& accept) {
  const json partial = accept.value("partial", json());
  if (!partial.is_object()) return "";
  return "PARTIAL REPORT, written as stage " + partial.value("running", std::string("?")) +
         " started (" + partial.value("written_at", std::string("?")) +
         "): the run had not finished, and ended without its final report if it is not beside "
         "this one\n";
}

// An acceptance run's stages, each with its verdict and how many attempts it took.
std::string stage_lines(const json& report) {
  if (!report.contains("accept") || !report["accept"].is_object()) return "";
  const json attempts = report["accept"].value("attempts", json::array());
  const std::string partial = partial_line(report["accept"]);
  if (!attempts.is_array() || attempts.empty()) return partial;
  // The verdict and the stages lead; the goodput beside them names which one it is, as the job's
  // alone counts the sweep and the other stages as lost time.
  std::string out = partial + "acceptance verdict: " + report.value("verdict", std::string("?")) +
                    "\naccept stages:";
  for (const json& a : attempts) {
    if (!a.is_object()) continue;
    const std::string stage = a.value("stage", "");
    // A stage whose every check is n/a (pairwise on one node) judged nothing.
    const std::string verdict = a.value("verdict", "") == "NONE" ? "n/a" : a.value("verdict", "");
    out += printf_text(" %s %s", stage.c_str(), verdict.c_str());
    if (a.value("attempt", 1) > 1) out += printf_text(" (attempt %d)", a.value("attempt", 1));
    out += ",";
  }
  out.back() = '\n';
  if (report.contains("job") && report["job"].is_object())
    out += goodput_text(report["job"]) + "\n";
  return out;
}

std::string restore_line(const json& report) {
  if (!report.contains("restore") || !report["restore"].is_object()) return "";
  const json& r = report["restore"];
  return printf_text("\ncold restore of step %lld: %s in %.3f s, %s\n", r.value("step", 0LL),
                     si(r.value("bytes", 0.0), "B").c_str(), r.value("seconds", 0.0),
                     si(r.value("gbps", 0.0) * 1e9, "B/s").c_str());
}

// A merged drill's outcome (docs/drills.md has the drill's own summary).
std::string drill_line(const json& report) {
  if (!report.contains("drill") || !report["drill"].is_object()) return "";
  const json& d = report["drill"];
  auto number = [](const json& v, const char* unit) {
    return v.is_number() ? readable_number(v.get<double>()) + " " + unit : std::string("-");
  };
  return printf_text("\ndrill: %s, %zu failure(s), %d restart(s); RPO %s, RTO %s\n",
                     d.value("verdict", "").c_str(), d.value("failures", json::array()).size(),
                     d.value("restarts", 0), number(d.value("rpo_steps", json()), "steps").c_str(),
                     number(d.value("rto_s", json()), "s").c_str());
}

// The job's timeline, largest part first, and what it cost when a price was given.
std::string job_lines(const json& report) {
  std::string out;
  if (report.contains("job"))
    for (const std::string& line : timeline_lines(report["job"])) out += line + "\n";
  if (report.contains("cost") && (report["cost"].value("priced", false) ||
                                  !report["cost"].value("projection", json()).is_null()))
    for (const std::string& line : cost_lines(report["cost"])) out += line + "\n";
  if (!out.empty()) out.insert(0, 1, '\n');
  return out;
}

// An acceptance run whose stages trained nothing and swept nothing: its stages and checks.
std::string render_checks_only(const json& report) {
  // A node-check's report (app/node_check_report.h) has no stages; it names its node.
  const bool node_check = report.contains("node_check");
  std::string out = node_check ? "trainproof node-check of " +
                                     report.at("nodes").at(0).value("host", std::string("?")) + "\n"
                               : "trainproof acceptance run\n" + stage_lines(report);
  out += job_lines(report);
  out += warning_lines(report.at("context").value("warnings", json::array()));
  out += check_lines(report.at("gate").at("checks"));
  out += "verdict: " + report.at("verdict").get<std::string>() + "\n";
  return out;
}

std::string render_summary(const json& untrusted, size_t slowest_ranks_shown) {
  // A report with both stages (an acceptance run) shows the training summary, which holds each
  // bucket size against the sweep's row.
  if (untrusted.contains("sweep") && !untrusted.contains("train"))
    return stage_lines(visible(untrusted)) + render_sweep_summary(untrusted, true);
  if (!untrusted.contains("train")) return render_checks_only(visible(untrusted));
  const json report = visible(untrusted);
  const json& ctx = report.at("context");
  const json& train = report.at("train");
  std::string out = stage_lines(report) + header_lines(ctx, train);
  out += phase_table(train);
  out += throughput_line(train);
  out += bucket_lines(report);
  if (report.contains("data")) out += data_line(report.at("data"));
  if (report.contains("checkpoint")) out += checkpoint_lines(report.at("checkpoint"));
  out += restore_line(report);
  out += drill_line(report);
  out += job_lines(report);
  out += slowest_ranks(report, slowest_ranks_shown);
  out += flagged_nodes(report.at("nodes"));
  out += warning_lines(ctx.at("warnings"));
  out += check_lines(report.at("gate").at("checks"));
  out += "\nfinal digest: " + train.at("final_digest").get<std::string>() + "\n";
  out += "verdict: " + report.at("verdict").get<std::string>() + "\n";
  return out;
}

}  // namespace tp
