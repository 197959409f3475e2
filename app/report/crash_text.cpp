#include "app/report/crash_text.h"

#include <cxxabi.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "common/errors.h"
#include "common/files.h"
#include "common/json_depth.h"
#include "common/redact.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kCrashFormat = "trainproof-crash/1";
constexpr uintmax_t kMaxRecordBytes = 1 << 20;  // a record is a few kB; 48 frames at most
// Ranks after the full stacks that still get a line of their own.
constexpr size_t kCrashLines = 16;

bool is_record_name(const std::string& name) {
  return name.rfind("crash-rank", 0) == 0 && name.size() > 15 &&
         name.compare(name.size() - 5, 5, ".json") == 0;
}

json read_one_record(const std::string& path) {
  if (const std::string problem = not_a_regular_file(path); !problem.empty())
    throw UsageError("report: crash record '" + path + "': " + problem);
  std::error_code ec;
  if (fs::file_size(path, ec) > kMaxRecordBytes)
    throw UsageError("report: crash record '" + path + "' is larger than a crash record can be");
  std::ifstream in(path);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (const std::string deep = json_depth_problem(text); !deep.empty())
    throw UsageError("report: crash record '" + path + "': " + deep);
  const json record = json::parse(text, nullptr, false);
  if (!record.is_object() || record.value("format", json()) != kCrashFormat)
    throw UsageError("report: '" + path + "' is not a crash record (format " + kCrashFormat + ")");
  for (const char* field : {"signal", "host", "subcommand", "address", "code"})
    if (!record.contains(field) || !record[field].is_string())
      throw UsageError("report: crash record '" + path + "': field " + field +
                       " is missing or not a string");
  if (!record.contains("rank") || !record["rank"].is_number_integer())
    throw UsageError("report: crash record '" + path +
                     "': field rank is missing or not an integer");
  if (record.contains("frames") && !record["frames"].is_array())
    throw UsageError("report: crash record '" + path + "': field frames is not an array");
  return record;
}

std::string text_of(const json& record, const char* field) {
  const json value = record.value(field, json());
  return value.is_string() ? message_text(value.get<std::string>()) : std::string();
}

// "rank 1 on node-07 (train): SIGSEGV at 0x0 (address not mapped)"
std::string headline(const json& record) {
  std::string line = "rank " + std::to_string(record["rank"].get<long long>()) + " on " +
                     text_of(record, "host") + " (" + text_of(record, "subcommand") +
                     "): " + text_of(record, "signal") + " at " + text_of(record, "address") +
                     " (" + text_of(record, "code") + ")";
  if (const std::string e = text_of(record, "uncaught_exception"); !e.empty())
    line += "; uncaught exception: " + e;
  return line;
}

std::string frame_line(size_t index, const json& frame) {
  if (!frame.is_object()) return "  #" + std::to_string(index) + " (not a frame)\n";
  const std::string function = text_of(frame, "function");
  const std::string module = text_of(frame, "module");
  std::string line =
      "  #" + std::to_string(index) + " " + text_of(frame, "ip") + " " +
      (function.empty() ? "??" : demangled(function) + " +" + text_of(frame, "function_offset"));
  if (!module.empty())
    line +=
        "  (" + fs::path(module).filename().string() + " +" + text_of(frame, "module_offset") + ")";
  return line + "\n";
}

}  // namespace

std::string demangled(const std::string& name) {
  int status = 0;
  char* text = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string result = status == 0 && text ? text : name;
  std::free(text);
  return result;
}

bool is_crash_evidence(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& entry : fs::directory_iterator(path, ec))
      if (is_record_name(entry.path().filename().string())) return true;
    return false;
  }
  if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) > kMaxRecordBytes) return false;
  std::ifstream in(path);
  char head[64] = {};
  in.read(head, sizeof head - 1);
  return std::string(head).find(kCrashFormat) != std::string::npos;
}

std::vector<json> read_crash_records(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return {read_one_record(path)};
  std::vector<std::pair<long long, json>> by_rank;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    if (!is_record_name(entry.path().filename().string()) || entry.is_symlink(ec)) continue;
    json record = read_one_record(entry.path().string());
    by_rank.emplace_back(record["rank"].get<long long>(), std::move(record));
  }
  std::sort(by_rank.begin(), by_rank.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<json> records;
  for (auto& [rank, record] : by_rank) records.push_back(std::move(record));
  return records;
}

std::string render_crash_records(const std::vector<json>& records, size_t full) {
  std::ostringstream out;
  out << "crashed: " << records.size() << (records.size() == 1 ? " rank" : " ranks") << "\n";
  for (size_t i = 0; i < records.size() && i < full + kCrashLines; ++i) {
    const json& record = records[i];
    out << (i < full ? "\n" : "") << headline(record) << "\n";
    if (i >= full) continue;
    const json frames = record.value("frames", json::array());
    for (size_t f = 0; f < frames.size(); ++f) out << frame_line(f, frames[f]);
  }
  if (records.size() > full + kCrashLines) {
    // Thousands of crashed ranks: the rest counted by signal, so the text stays a page.
    std::map<std::string, size_t> by_signal;
    for (size_t i = full + kCrashLines; i < records.size(); ++i)
      ++by_signal[text_of(records[i], "signal")];
    out << records.size() - full - kCrashLines << " more ranks:";
    const char* separator = " ";
    for (const auto& [signal, count] : by_signal) {
      out << separator << count << " " << signal;
      separator = ", ";
    }
    out << "\n";
  }
  if (records.size() > full)
    out << "(stacks of the first " << full << " shown; every record is in its own file)\n";
  return out.str();
}

}  // namespace tp
