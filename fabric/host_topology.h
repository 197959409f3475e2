#pragma once
// A node's processors and memory as hwloc sees them (docs/sweep.md, "Topology preflight"): the
// CPU model, packages, cores, hardware threads, NUMA nodes and memory. hwloc reads the machine
// (or, for tests, an XML export of one), rather than this project parsing /proc by hand.
#include <cstdint>
#include <string>
#include <vector>

namespace tp {

struct HostTopology {
  std::string cpu_model;  // "AMD EPYC 9654 96-Core Processor"; "" when hwloc does not say
  int packages = 0, cores = 0, hardware_threads = 0, numa_nodes = 0;
  uint64_t memory_bytes = 0;                // every NUMA node's local memory together
  std::vector<uint64_t> numa_memory_bytes;  // [NUMA node]
  std::string error;                        // why hwloc could not read it, or ""
};

// This machine, or the hwloc XML file `xml_path` when it is not empty.
HostTopology read_host_topology(const std::string& xml_path = "");

}  // namespace tp
