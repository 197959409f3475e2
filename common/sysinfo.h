#pragma once
// Facts about the host this process runs on, read from Linux interfaces.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tp {

std::string host_name();
// CPUs this process may run on, as a Linux cpulist ("0-3,8").
std::string cpu_affinity_list();
std::vector<int> cpu_affinity();
// NUMA nodes that the affinity touches, as a cpulist; empty when the kernel does not say.
std::string numa_nodes_of(const std::vector<int>& cpus);
// MemAvailable from /proc/meminfo, or nullopt when unreadable.
std::optional<uint64_t> memory_available_bytes();
unsigned online_cpus();
// The scaling governor of cpu0 ("performance", "powersave"), or empty when not exposed.
std::string cpu_governor();
std::string format_cpulist(std::vector<int> ids);
std::string utc_timestamp();

}  // namespace tp
