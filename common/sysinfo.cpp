#include "common/sysinfo.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace tp {

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

std::vector<int> cpu_affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

std::string format_cpulist(std::vector<int> ids) {
  std::sort(ids.begin(), ids.end());
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ids[i]);
    if (j > i) out += '-' + std::to_string(ids[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> parse_cpulist(const std::string& list) {
  std::vector<int> ids;
  size_t at = 0;
  while (at < list.size()) {
    const size_t end = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, end - at);
    at = end + 1;
    int first = 0, last = 0;
    char dash = 0;
    const int fields = std::sscanf(item.c_str(), "%d%c%d", &first, &dash, &last);
    if (fields == 1)
      last = first;
    else if (fields != 3 || dash != '-' || last < first)
      break;
    for (int id = first; id <= last; ++id) ids.push_back(id);
  }
  return ids;
}

std::vector<double> cpu_shares(const std::vector<std::string>& affinity_of_rank,
                               const std::vector<std::string>& host_of_rank) {
  std::vector<std::vector<int>> cpus;
  std::map<std::pair<std::string, int>, int> holders;  // (host, cpu) -> ranks holding it
  for (size_t r = 0; r < affinity_of_rank.size(); ++r) {
    cpus.push_back(parse_cpulist(affinity_of_rank[r]));
    for (int cpu : cpus.back()) ++holders[{host_of_rank.at(r), cpu}];
  }
  std::vector<double> shares;
  for (size_t r = 0; r < cpus.size(); ++r) {
    double share = 0;
    for (int cpu : cpus[r]) share += 1.0 / holders[{host_of_rank[r], cpu}];
    shares.push_back(share);
  }
  return shares;
}

std::string cpu_affinity_list() {
  return format_cpulist(cpu_affinity());
}

std::string numa_nodes_of(const std::vector<int>& cpus) {
  namespace fs = std::filesystem;
  std::vector<int> nodes;
  std::error_code ec;
  for (int cpu : cpus) {
    const fs::path dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu);
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("node", 0) == 0 && name.size() > 4) {
        const int node = std::stoi(name.substr(4));
        if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
      }
    }
  }
  return format_cpulist(nodes);
}

std::optional<uint64_t> meminfo_bytes(const std::string& key) {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  const std::string prefix = key + ":";
  while (std::getline(meminfo, line))
    if (line.rfind(prefix, 0) == 0) return std::stoull(line.substr(prefix.size())) * 1024;
  return std::nullopt;
}

unsigned online_cpus() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<unsigned>(n) : 1;
}

std::string cpu_governor() {
  std::ifstream in("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
  std::string governor;
  in >> governor;
  return governor;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, implementer, part;
  const auto value = [&line] {
    const size_t start = line.find_first_not_of(' ', line.find(':') + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  };
  while (std::getline(in, line)) {
    if (line.find(':') == std::string::npos) continue;
    if (line.rfind("model name", 0) == 0) return value();
    if (implementer.empty() && line.rfind("CPU implementer", 0) == 0) implementer = value();
    if (part.empty() && line.rfind("CPU part", 0) == 0) part = value();
  }
  return implementer.empty() ? "" : "implementer " + implementer + " part " + part;
}

std::string utc_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  std::ostringstream out;
  out << text << '.' << (millis < 100 ? (millis < 10 ? "00" : "0") : "") << millis << 'Z';
  return out.str();
}

}  // namespace tp
