#include "app/report/junit.h"

#include "app/report/gate.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <optional>
#include <vector>

namespace tp {
namespace {

using nlohmann::json;

// Text as XML 1.0 takes it in an attribute or an element: the five escapes, and the control
// characters XML forbids replaced by '?'.
std::string xml_text(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += (c < 0x20 && c != '\t' && c != '\n' && c != '\r') ? '?' : char(c);
    }
  }
  return out;
}

std::string figure_text(const json& value) {
  if (value.is_null()) return "n/a";
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

struct Suite {
  std::string name;
  std::vector<const json*> checks;
  int failures = 0, skipped = 0;
};

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", seconds > 0 ? seconds : 0.0);
  return text;
}

std::string status_word(std::string text) {
  for (char& c : text) c = char(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

std::string testcase_xml(const json& check, const std::string& suite) {
  const std::string status = check.value("status", "");
  const std::string reason = check.value("reason", "");
  // A check is a judgement of figures its stage measured: it takes no time of its own (the
  // stage's is its suite's).
  std::string out = "    <testcase classname=\"trainproof." + xml_text(suite) + "\" name=\"" +
                    xml_text(check.value("name", "")) + "\" time=\"0.000\">\n";
  out += "      <properties>\n        <property name=\"status\" value=\"" +
         xml_text(status_word(status)) + "\"/>\n      </properties>\n";
  if (status == "fail" || status == "incomplete")
    out += "      <failure type=\"" + xml_text(status == "fail" ? "FAIL" : "INCOMPLETE") +
           "\" message=\"" + xml_text(reason) + "\">" + xml_text(reason) + "</failure>\n";
  if (status == "n/a") out += "      <skipped message=\"" + xml_text(reason) + "\"/>\n";
  std::string details = "status: " + status +
                        "\nvalue: " + figure_text(check.value("value", json())) +
                        "\nthreshold: " + figure_text(check.value("threshold", json()));
  if (check.contains("source")) details += "\nsource: " + check["source"].get<std::string>();
  details += "\nreason: " + reason;
  out += "      <system-out>" + xml_text(details) + "</system-out>\n";
  // A WARN passes, so CI stays green: the line CI servers show beside a passing case's name
  // says it warned.
  if (status == "warn")
    out += "      <system-err>" + xml_text("WARN: " + reason) + "</system-err>\n";
  return out + "    </testcase>\n";
}

// Seconds since the epoch of an ISO 8601 UTC time as context.start_time writes it
// ("2026-12-03T10:15:00.123Z"); nullopt for anything else.
std::optional<double> utc_seconds(const json& text) {
  if (!text.is_string()) return std::nullopt;
  std::tm tm{};
  double fraction = 0;
  const std::string s = text;
  int consumed = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6)
    return std::nullopt;
  if (size_t(consumed) < s.size() && s[size_t(consumed)] == '.')
    fraction =
        std::atof(("0" + s.substr(size_t(consumed), s.find('Z') - size_t(consumed))).c_str());
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return double(timegm(&tm)) + fraction;
}

// The wall time of the run: context.end_time - start_time, else job.wall_s; 0 when neither.
double run_seconds(const json& report) {
  const json& context = report.value("context", json::object());
  const auto start = utc_seconds(context.value("start_time", json()));
  const auto end = utc_seconds(context.value("end_time", json()));
  if (start && end && *end >= *start) return *end - *start;
  const json& job = report.value("job", json::object());
  return job.contains("wall_s") && job["wall_s"].is_number() ? job["wall_s"].get<double>() : 0.0;
}

// A stage's time: job.train_wall_s for train, its category in job.categories[] for the others
// (the job timeline marks each acceptance stage by name; restore as cold_restore), the run's own
// for the one stage of a train, sweep or drill report, else 0.
double suite_seconds(const json& report, const std::string& stage, size_t suites) {
  const json& job = report.value("job", json::object());
  const json& categories = job.value("categories", json::array());
  if (stage == "train" && job.contains("train_wall_s") && job["train_wall_s"].is_number())
    return job["train_wall_s"].get<double>();
  const std::string name = stage == "restore" ? "cold_restore" : stage;
  if (categories.is_array())
    for (const json& c : categories)
      if (c.is_object() && c.value("name", "") == name && c.contains("seconds") &&
          c["seconds"].is_number())
        return c["seconds"].get<double>();
  return suites == 1 ? run_seconds(report) : 0.0;
}

// JUnit's timestamp: the start in UTC to the second, without a zone, as the JUnit schema (and
// the CI servers that validate against it) writes it.
std::string timestamp_of(const json& report) {
  const json& context = report.value("context", json::object());
  const json start = context.value("start_time", json());
  if (!utc_seconds(start)) return "";
  return start.get<std::string>().substr(0, 19);
}

}  // namespace

std::string render_junit(const json& report) {
  std::vector<Suite> suites;
  std::map<std::string, size_t> index;
  const json checks =
      report.contains("gate") ? report["gate"].value("checks", json::array()) : json::array();
  for (const json& check : checks) {
    const std::string stage = stage_of_check(check, report);
    if (!index.count(stage)) {
      index[stage] = suites.size();
      suites.push_back({stage, {}, 0, 0});
    }
    Suite& suite = suites[index[stage]];
    suite.checks.push_back(&check);
    const std::string status = check.value("status", "");
    suite.failures += status == "fail" || status == "incomplete";
    suite.skipped += status == "n/a";
  }
  int failures = 0, skipped = 0;
  for (const Suite& s : suites) {
    failures += s.failures;
    skipped += s.skipped;
  }
  const std::string stamp = timestamp_of(report);
  const std::string timestamp = stamp.empty() ? "" : " timestamp=\"" + xml_text(stamp) + "\"";
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"trainproof " +
                    report_kind(report) + "\" tests=\"" + std::to_string(checks.size()) +
                    "\" failures=\"" + std::to_string(failures) + "\" errors=\"0\" skipped=\"" +
                    std::to_string(skipped) + "\" time=\"" + seconds_text(run_seconds(report)) +
                    "\"" + timestamp + ">\n";
  const json& context = report.value("context", json::object());
  for (const Suite& s : suites) {
    out += "  <testsuite name=\"" + xml_text(s.name) + "\" tests=\"" +
           std::to_string(s.checks.size()) + "\" failures=\"" + std::to_string(s.failures) +
           "\" errors=\"0\" skipped=\"" + std::to_string(s.skipped) + "\" time=\"" +
           seconds_text(suite_seconds(report, s.name, suites.size())) + "\"" + timestamp +
           ">\n    <properties>\n";
    out += "      <property name=\"verdict\" value=\"" + xml_text(report.value("verdict", "")) +
           "\"/>\n";
    for (const char* key : {"run_id", "scenario_hash"})
      if (context.contains(key) && context[key].is_string())
        out += "      <property name=\"" + std::string(key) + "\" value=\"" +
               xml_text(context[key].get<std::string>()) + "\"/>\n";
    out += "    </properties>\n";
    for (const json* check : s.checks) out += testcase_xml(*check, s.name);
    out += "  </testsuite>\n";
  }
  return out + "</testsuites>\n";
}

}  // namespace tp
