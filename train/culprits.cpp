#include "train/culprits.h"

#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "common/clock.h"
#include "common/json_depth.h"

namespace tp {
namespace {

// A counter that reads the same twice, from a watchdog that has not ended on purpose.
bool stopped(const HeartbeatRecord& first, const HeartbeatRecord& second) {
  return first.present && second.present && first.liveness >= 0 && !first.watch_ended &&
         !second.watch_ended && first.liveness == second.liveness;
}

bool ahead_of(const HeartbeatRecord& a, const HeartbeatRecord& b) {
  return a.step > b.step || (a.step == b.step && phase_order(a.phase) > phase_order(b.phase));
}

}  // namespace

const char* why_name(Culprit::Why why) {
  switch (why) {
    case Culprit::Why::stopped:
      return "stopped";
    case Culprit::Why::no_heartbeat:
      return "no heartbeat";
    case Culprit::Why::behind:
      return "behind";
  }
  return "?";
}

Verdict name_culprits(const std::vector<HeartbeatRecord>& first,
                      const std::vector<HeartbeatRecord>& second) {
  Verdict verdict;
  verdict.unentered = first_unentered(second);
  for (const HeartbeatRecord& h : second)
    if (h.present && (!verdict.furthest.present || ahead_of(h, verdict.furthest)))
      verdict.furthest = h;
  for (size_t r = 0; r < second.size(); ++r) {
    if (!second[r].present)
      verdict.culprits.push_back({second[r], Culprit::Why::no_heartbeat});
    else if (r < first.size() && stopped(first[r], second[r]))
      verdict.culprits.push_back({second[r], Culprit::Why::stopped});
  }
  if (!verdict.culprits.empty()) return verdict;
  for (const HeartbeatRecord& h : second)
    if (ahead_of(verdict.furthest, h)) verdict.culprits.push_back({h, Culprit::Why::behind});
  return verdict;
}

namespace {

nlohmann::json abort_json(const std::string& what, const HeartbeatRecord& me,
                          const Verdict& verdict) {
  nlohmann::json record;
  record["reason"] = what;
  record["detected_by"] = {
      {"rank", me.rank}, {"host", me.host}, {"step", me.step}, {"phase", me.phase}};
  record["detected_at_unix"] = unix_seconds();
  if (verdict.furthest.present)
    record["furthest"] = {{"rank", verdict.furthest.rank},
                          {"step", verdict.furthest.step},
                          {"phase", verdict.furthest.phase}};
  if (const auto& u = verdict.unentered)
    record["first_unentered"] = {
        {"comm", u->comm},
        {"seq", u->seq},
        {"op", u->op.empty() ? nlohmann::json() : nlohmann::json(u->op)},
        {"bytes", u->bytes >= 0 ? nlohmann::json(u->bytes) : nlohmann::json()},
        {"ranks", u->ranks},
        {"hosts", u->hosts},
        {"inside_previous", u->inside_previous},
        {"entered_by", u->waiting.size()}};
  record["missing"] = nlohmann::json::array();
  for (const Culprit& culprit : verdict.culprits) {
    const HeartbeatRecord& h = culprit.last;
    record["missing"].push_back({{"rank", h.rank},
                                 {"host", h.present ? nlohmann::json(h.host) : nlohmann::json()},
                                 {"last_step", h.step},
                                 {"last_phase", h.present ? h.phase : "none"},
                                 {"last_seen_unix", h.unix_time},
                                 {"why", why_name(culprit.why)}});
  }
  return record;
}

std::string summary_of(const nlohmann::json& record, const std::string& path) {
  std::ostringstream named;
  for (const nlohmann::json& m : record.value("missing", nlohmann::json::array())) {
    named << (named.tellp() ? ", " : "") << "rank " << m.value("rank", -1);
    if (!m.contains("host") || !m["host"].is_string())
      named << " (no heartbeat)";
    else
      named << " on " << m["host"].get<std::string>() << " (last in step "
            << m.value("last_step", int64_t(0)) << " " << m.value("last_phase", std::string())
            << (m.value("why", std::string()) == "stopped" ? "; stopped or dead" : "") << ")";
  }
  std::string unentered;
  if (const auto u = record.find("first_unentered"); u != record.end() && u->is_object()) {
    Unentered parsed;
    parsed.comm = u->value("comm", std::string());
    parsed.seq = u->value("seq", int64_t(0));
    parsed.op = (*u)["op"].is_string() ? (*u)["op"].get<std::string>() : "";
    parsed.bytes = (*u)["bytes"].is_number() ? (*u)["bytes"].get<int64_t>() : -1;
    parsed.ranks = u->value("ranks", std::vector<int>{});
    parsed.hosts = u->value("hosts", std::vector<std::string>{});
    parsed.inside_previous = u->value("inside_previous", std::vector<int>{});
    parsed.hosts.resize(parsed.ranks.size());
    unentered = "; " + unentered_text(parsed);
  }
  return named.tellp()
             ? "did not arrive: " + named.str() + unentered + " (abort.json: " + path + ")"
         : unentered.empty()
             ? "every rank is alive and reached this point (abort.json: " + path + ")"
             : "every rank is alive" + unentered + " (abort.json: " + path + ")";
}

// Publishes `text` as `path` unless a record is there already; returns that record then.
std::optional<nlohmann::json> publish_first(const std::string& path, const std::string& text,
                                            int rank) {
  const std::string mine = path + ".rank-" + std::to_string(rank);
  {
    std::ofstream out(mine, std::ios::trunc);
    out << text;
    if (!out.flush()) throw std::runtime_error("cannot write " + mine);
  }
  // A hard link appears whole or not at all, and never replaces an existing file.
  const int linked = ::link(mine.c_str(), path.c_str()) == 0 ? 0 : errno;
  std::error_code ec;
  if (linked == EEXIST) {
    std::filesystem::remove(mine, ec);
    std::ifstream in(path);
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    nlohmann::json earlier = json_depth_problem(text).empty()
                                 ? nlohmann::json::parse(text, nullptr, false)
                                 : nlohmann::json(nlohmann::json::value_t::discarded);
    if (!earlier.is_discarded()) return earlier;
  } else if (linked == 0) {
    std::filesystem::remove(mine, ec);
    return std::nullopt;
  }
  // A file system without hard links, or a record that does not parse: this one replaces it.
  std::filesystem::rename(mine, path);
  return std::nullopt;
}

}  // namespace

std::string write_abort_record(const std::string& dir, const std::string& what,
                               const HeartbeatRecord& me, const Verdict& verdict) {
  const nlohmann::json record = abort_json(what, me, verdict);
  const std::string path = dir + "/abort.json";
  try {
    if (const auto earlier = publish_first(path, record.dump(2) + "\n", me.rank))
      return "rank " +
             std::to_string(
                 earlier->value("detected_by", nlohmann::json::object()).value("rank", -1)) +
             " looked first: " + summary_of(*earlier, path);
  } catch (const std::exception&) {
    // The abort goes ahead; the message still names the culprits.
  }
  return summary_of(record, path);
}

}  // namespace tp
