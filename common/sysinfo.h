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
// A /proc/meminfo field in bytes ("MemTotal", "MemAvailable"), or nullopt when unreadable.
std::optional<uint64_t> meminfo_bytes(const std::string& key);
unsigned online_cpus();
// The scaling governor of cpu0 ("performance", "powersave"), or empty when not exposed.
std::string cpu_governor();
// The CPU's model, as /proc/cpuinfo names it ("model name"; on Arm, the implementer and part);
// empty when it does not say. Ranks on different models may round differently.
std::string cpu_model();
std::string format_cpulist(std::vector<int> ids);
// "0-3,8" -> {0,1,2,3,8}; an empty or malformed list gives what parsed before the fault.
std::vector<int> parse_cpulist(const std::string& list);
// Each rank's share of CPUs: every CPU of its affinity counts 1/k, where k is the number of ranks
// of the same host whose affinity holds that CPU. Ranks bound apart get their affinity; ranks
// that all see one set split it.
std::vector<double> cpu_shares(const std::vector<std::string>& affinity_of_rank,
                               const std::vector<std::string>& host_of_rank);
std::string utc_timestamp();

}  // namespace tp
