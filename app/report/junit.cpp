#include "app/report/junit.h"

#include "app/report/gate.h"

#include <map>
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

std::string testcase_xml(const json& check, const std::string& suite) {
  const std::string status = check.value("status", "");
  const std::string reason = check.value("reason", "");
  std::string out = "    <testcase classname=\"trainproof." + xml_text(suite) + "\" name=\"" +
                    xml_text(check.value("name", "")) + "\">\n";
  if (status == "fail" || status == "incomplete")
    out += "      <failure type=\"" + xml_text(status == "fail" ? "FAIL" : "INCOMPLETE") +
           "\" message=\"" + xml_text(reason) + "\">" + xml_text(reason) + "</failure>\n";
  if (status == "n/a") out += "      <skipped message=\"" + xml_text(reason) + "\"/>\n";
  std::string details = "status: " + status +
                        "\nvalue: " + figure_text(check.value("value", json())) +
                        "\nthreshold: " + figure_text(check.value("threshold", json()));
  if (check.contains("source")) details += "\nsource: " + check["source"].get<std::string>();
  details += "\nreason: " + reason;
  out += "      <system-out>" + xml_text(details) + "</system-out>\n    </testcase>\n";
  return out;
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
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"trainproof " +
                    report_kind(report) + "\" tests=\"" + std::to_string(checks.size()) +
                    "\" failures=\"" + std::to_string(failures) + "\" errors=\"0\" skipped=\"" +
                    std::to_string(skipped) + "\">\n";
  const json& context = report.value("context", json::object());
  for (const Suite& s : suites) {
    out += "  <testsuite name=\"" + xml_text(s.name) + "\" tests=\"" +
           std::to_string(s.checks.size()) + "\" failures=\"" + std::to_string(s.failures) +
           "\" errors=\"0\" skipped=\"" + std::to_string(s.skipped) + "\">\n    <properties>\n";
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
