#include "fabric/host_topology.h"

#include <hwloc.h>

namespace tp {
namespace {

int count_of(hwloc_topology_t topology, hwloc_obj_type_t type) {
  const int n = hwloc_get_nbobjs_by_type(topology, type);
  return n < 0 ? 0 : n;
}

std::string cpu_model(hwloc_topology_t topology) {
  for (hwloc_obj_t package = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_PACKAGE, nullptr);
       package; package = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_PACKAGE, package))
    if (const char* model = hwloc_obj_get_info_by_name(package, "CPUModel")) return model;
  const char* model = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topology), "CPUModel");
  return model ? model : "";
}

}  // namespace

HostTopology read_host_topology(const std::string& xml_path) {
  HostTopology host;
  hwloc_topology_t topology = nullptr;
  if (hwloc_topology_init(&topology) != 0) {
    host.error = "hwloc_topology_init failed";
    return host;
  }
  if (!xml_path.empty() && hwloc_topology_set_xml(topology, xml_path.c_str()) != 0) {
    host.error = "hwloc cannot read the XML file '" + xml_path + "'";
    hwloc_topology_destroy(topology);
    return host;
  }
  if (hwloc_topology_load(topology) != 0) {
    host.error = "hwloc_topology_load failed";
    hwloc_topology_destroy(topology);
    return host;
  }
  host.cpu_model = cpu_model(topology);
  host.packages = count_of(topology, HWLOC_OBJ_PACKAGE);
  host.cores = count_of(topology, HWLOC_OBJ_CORE);
  host.hardware_threads = count_of(topology, HWLOC_OBJ_PU);
  host.numa_nodes = count_of(topology, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < host.numa_nodes; ++i) {
    const hwloc_obj_t node = hwloc_get_obj_by_type(topology, HWLOC_OBJ_NUMANODE, unsigned(i));
    const uint64_t bytes = node && node->attr ? node->attr->numanode.local_memory : 0;
    host.numa_memory_bytes.push_back(bytes);
    host.memory_bytes += bytes;
  }
  hwloc_topology_destroy(topology);
  return host;
}

}  // namespace tp
