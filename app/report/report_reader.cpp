#include "app/report/report_reader.h"

#include <fstream>
#include <iterator>

#include "app/report/gate.h"
#include "app/report/summary.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/json_depth.h"

namespace tp {

namespace {

using nlohmann::json;

// What a JSON value is, in words: "a string", "an object", "null".
std::string shown_kind(const json& value) {
  return value.is_null() ? "null"
                         : std::string(value.is_string()    ? "a string"
                                       : value.is_number()  ? "a number"
                                       : value.is_boolean() ? "a boolean"
                                       : value.is_array()   ? "an array"
                                                            : "an object");
}

// The sections and fields every reader walks into, with what it reads them as (shown_kind's
// words). A section that is absent is fine (a sweep report has no `train`) unless it is required.
struct ReadField {
  const char* pointer;
  const char* kind;
  bool required;
};
constexpr ReadField kReadFields[] = {{"/context", "an object", true},
                                     {"/context/hosts", "an array", false},
                                     {"/context/warnings", "an array", false},
                                     {"/gate", "an object", false},
                                     {"/gate/checks", "an array", false},
                                     {"/train", "an object", false},
                                     {"/train/phases", "an object", false},
                                     {"/checkpoint", "an object", false},
                                     {"/data", "an object", false},
                                     {"/sweep", "an object", false},
                                     {"/drill", "an object", false},
                                     {"/drill/verdict", "a string", false},
                                     {"/accept", "an object", false},
                                     {"/job", "an object", false},
                                     {"/cost", "an object", false},
                                     {"/nodes", "an array", false},
                                     {"/ranks", "an array", false}};

// "" when the fields every reader walks into have the types they are read as, else which does not.
std::string shape_problem(const json& report) {
  for (const ReadField& f : kReadFields) {
    const json::json_pointer where(f.pointer);
    if (!report.contains(where)) {
      if (f.required) return std::string("field ") + f.pointer + " is missing";
      continue;
    }
    if (const std::string kind = shown_kind(report.at(where)); kind != f.kind)
      return std::string("field ") + f.pointer + " is " + kind + ", not " + f.kind;
  }
  // Each phase's statistics (/train/phases/step/p50 ...).
  if (report.contains("train") && report["train"].contains("phases"))
    for (const auto& [name, phase] : report["train"]["phases"].items()) {
      const std::string at = "/train/phases/" + name;
      if (!phase.is_object()) return "field " + at + " is " + shown_kind(phase) + ", not an object";
      for (const auto& [statistic, value] : phase.items())
        if (!value.is_number() && !value.is_null())
          return "field " + at + "/" + statistic + " is " + shown_kind(value) + ", not a number";
    }
  return "";
}

}  // namespace

std::string json_error_text(const nlohmann::json::exception& e) {
  std::string text = e.what();
  if (text.rfind("[json.exception.", 0) == 0 && text.find("] ") != std::string::npos)
    text.erase(0, text.find("] ") + 2);
  return text;
}

nlohmann::json read_report_file(const std::string& path, const std::string& role) {
  const std::string named = role + " '" + path + "'";
  // A FIFO would block the open and a folder would read as an empty report.
  if (const std::string what = not_a_regular_file(path); !what.empty())
    throw UsageError(named + " " + what);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(role + ": cannot open '" + path + "'");
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (const std::string too_deep = json_depth_problem(text); !too_deep.empty())
    throw UsageError(named + ": " + too_deep + "; a report nests fewer than 20");
  nlohmann::json report;
  try {
    report = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw UsageError(named + ": not valid JSON (at byte " + std::to_string(e.byte) + ")");
  } catch (const nlohmann::json::exception& e) {  // a number too large for a double: 1e999
    throw UsageError(named + ": not valid JSON (" + json_error_text(e) + ")");
  }
  const std::string schema =
      report.is_object() && report.contains("schema") && report["schema"].is_string()
          ? report["schema"].get<std::string>()
          : "";
  bool readable = schema == kReportSchema;
  std::string known = kReportSchema;
  for (const char* older : kOlderReportSchemas) {
    readable = readable || schema == older;
    known += std::string(", ") + older;
  }
  if (!readable) throw UsageError(named + ": schema is not one of " + known);
  const auto verdict = report.find("verdict");
  if (verdict == report.end() || !verdict->is_string() ||
      (*verdict != "PASS" && *verdict != "WARN" && *verdict != "FAIL" && *verdict != "NONE" &&
       *verdict != "INCOMPLETE"))
    throw UsageError(named + ": verdict is not one of PASS, WARN, FAIL, NONE, INCOMPLETE");
  if (const std::string problem = shape_problem(report); !problem.empty())
    throw UsageError(named + ": " + problem);
  // The summary reads the most fields of any reader: a report it can render, they all can.
  try {
    render_summary(report);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(named + ": a field has the wrong type or is missing (" + json_error_text(e) +
                     ")");
  }
  return report;
}

}  // namespace tp
