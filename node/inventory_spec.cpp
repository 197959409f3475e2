#include "node/inventory_spec.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "common/errors.h"

namespace tp {
namespace {

// How one key's value is read into the spec. `where` names the file and line for errors.
using Reader = std::function<void(InventorySpec&, const std::string& where, const std::string&)>;

std::string trimmed(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

[[noreturn]] void bad_value(const std::string& where, const std::string& key,
                            const std::string& value, const std::string& wanted) {
  throw UsageError(where + ": " + key + " = '" + value + "' is not " + wanted);
}

long long whole_number(const std::string& where, const std::string& key, const std::string& text,
                       long long least, long long most) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 0);
  if (text.empty() || *end != '\0' || errno != 0 || value < least || value > most)
    bad_value(where, key, text,
              "a whole number from " + std::to_string(least) + " to " + std::to_string(most));
  return value;
}

double amount(const std::string& where, const std::string& key, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(value) || value < 0 || value > 1e9)
    bad_value(where, key, text, "a number from 0 to 1e9");
  return value;
}

bool truth(const std::string& where, const std::string& key, const std::string& text) {
  if (text == "true" || text == "on" || text == "yes") return true;
  if (text == "false" || text == "off" || text == "no") return false;
  bad_value(where, key, text, "true or false (on/off, yes/no)");
}

std::string version(const std::string& where, const std::string& key, const std::string& text) {
  if (!compare_versions(text, text)) bad_value(where, key, text, "a dotted version like 550.54.15");
  return text;
}

// A name or model part: printable text, so a finding that quotes it stays one line.
std::string plain_text(const std::string& where, const std::string& key, const std::string& text) {
  if (text.empty() || text.size() > 128) bad_value(where, key, text, "1 to 128 characters");
  for (unsigned char c : text)
    if (c < 0x20 || c == 0x7f) bad_value(where, key, "(control character)", "printable text");
  return text;
}

// "/lustre:100, /scratch" : each a path from the root, with a least free space in GB.
std::vector<MountSpec> mounts(const std::string& where, const std::string& key,
                              const std::string& text) {
  std::vector<MountSpec> out;
  std::istringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    item = trimmed(item);
    MountSpec m;
    const size_t colon = item.rfind(':');
    m.path = colon == std::string::npos ? item : trimmed(item.substr(0, colon));
    if (colon != std::string::npos)
      m.min_free_gb = amount(where, key, trimmed(item.substr(colon + 1)));
    if (m.path.empty() || m.path.front() != '/' || m.path.find("..") != std::string::npos)
      bad_value(where, key, item, "PATH[:MIN_FREE_GB] with PATH from / and no '..'");
    plain_text(where, key, m.path);
    out.push_back(m);
  }
  if (out.empty()) bad_value(where, key, text, "a comma list of PATH[:MIN_FREE_GB]");
  return out;
}

// "79, 48": XIDs, for a [health] list.
std::vector<long long> xid_list(const std::string& where, const std::string& key,
                                const std::string& text) {
  std::vector<long long> out;
  std::istringstream items(text);
  for (std::string item; std::getline(items, item, ',');)
    out.push_back(whole_number(where, key, trimmed(item), 1, 100000));
  if (out.empty()) bad_value(where, key, text, "a comma list of XIDs");
  return out;
}

double share(const std::string& where, const std::string& key, const std::string& text) {
  const double value = amount(where, key, text);
  if (value >= 1) bad_value(where, key, text, "a share from 0 to below 1");
  return value;
}

struct Key {
  std::string name, meaning;
  Reader read;
};

const std::vector<Key>& keys() {
  using S = InventorySpec;
  using W = const std::string&;
  static const std::vector<Key> table = {
      {"gpus", "GPUs each node has, on the PCI bus and by the driver (0 to 64)",
       [](S& s, W w, W v) { s.gpus = int(whole_number(w, "gpus", v, 0, 64)); }},
      {"gpu_name", "a part of every GPU's name as the driver gives it (H200)",
       [](S& s, W w, W v) { s.gpu_name = plain_text(w, "gpu_name", v); }},
      {"gpu_device_id", "every GPU's PCI device id (0x2335 for H200 SXM)",
       [](S& s, W w, W v) {
         s.gpu_device_id = unsigned(whole_number(w, "gpu_device_id", v, 1, 0xffff));
       }},
      {"min_gpu_memory_gb", "least memory of every GPU, GB",
       [](S& s, W w, W v) { s.min_gpu_memory_gb = amount(w, "min_gpu_memory_gb", v); }},
      {"driver_version", "the NVIDIA driver exactly (550.54.15)",
       [](S& s, W w, W v) { s.driver_version = version(w, "driver_version", v); }},
      {"min_driver_version", "the least NVIDIA driver (550.54)",
       [](S& s, W w, W v) { s.min_driver_version = version(w, "min_driver_version", v); }},
      {"min_cuda_driver_version", "the least CUDA version the driver supports (12.4)",
       [](S& s, W w, W v) {
         s.min_cuda_driver_version = version(w, "min_cuda_driver_version", v);
       }},
      {"min_nccl_version", "the least NCCL the GPU backend loads (2.23)",
       [](S& s, W w, W v) { s.min_nccl_version = version(w, "min_nccl_version", v); }},
      {"nvlinks_per_gpu", "NVLink links up on every GPU (18 on H100/H200 SXM)",
       [](S& s, W w, W v) {
         s.nvlinks_per_gpu = int(whole_number(w, "nvlinks_per_gpu", v, 0, 64));
       }},
      {"gpu_pcie_gen", "least PCIe generation every GPU's link can train to",
       [](S& s, W w, W v) { s.gpu_pcie_gen = int(whole_number(w, "gpu_pcie_gen", v, 1, 7)); }},
      {"gpu_pcie_width", "least PCIe width every GPU's link can train to (16)",
       [](S& s, W w, W v) { s.gpu_pcie_width = int(whole_number(w, "gpu_pcie_width", v, 1, 32)); }},
      {"same_gpu_firmware", "true: one driver and one VBIOS on every GPU of a node",
       [](S& s, W w, W v) { s.same_gpu_firmware = truth(w, "same_gpu_firmware", v); }},
      {"ecc", "on: ECC enabled on every GPU, now and after the next reset",
       [](S& s, W w, W v) { s.ecc = truth(w, "ecc", v); }},
      {"mig", "off: MIG disabled on every GPU, now and after the next reset",
       [](S& s, W w, W v) { s.mig = truth(w, "mig", v); }},
      {"persistence", "on: persistence mode on every GPU",
       [](S& s, W w, W v) { s.persistence = truth(w, "persistence", v); }},
      {"nics", "RDMA ports (class/infiniband) of nic_link_layer each node has (0 to 64)",
       [](S& s, W w, W v) { s.nics = int(whole_number(w, "nics", v, 0, 64)); }},
      {"nic_link_layer", "InfiniBand or Ethernet (RoCE): the link layer of the counted ports",
       [](S& s, W w, W v) {
         if (v != "InfiniBand" && v != "Ethernet")
           bad_value(w, "nic_link_layer", v, "InfiniBand or Ethernet");
         s.nic_link_layer = v;
       }},
      {"min_nic_rate_gbps", "least rate of every counted port, Gb/s (400 for NDR)",
       [](S& s, W w, W v) { s.min_nic_rate_gbps = amount(w, "min_nic_rate_gbps", v); }},
      {"nic_pcie_gen", "least PCIe generation every NIC's link can train to",
       [](S& s, W w, W v) { s.nic_pcie_gen = int(whole_number(w, "nic_pcie_gen", v, 1, 7)); }},
      {"nic_pcie_width", "least PCIe width every NIC's link can train to",
       [](S& s, W w, W v) { s.nic_pcie_width = int(whole_number(w, "nic_pcie_width", v, 1, 32)); }},
      {"ib_ports_active", "true: every counted port is ACTIVE and LinkUp",
       [](S& s, W w, W v) { s.ib_ports_active = truth(w, "ib_ports_active", v); }},
      {"min_network_interfaces", "least network interfaces up, loopback aside",
       [](S& s, W w, W v) {
         s.min_network_interfaces = int(whole_number(w, "min_network_interfaces", v, 0, 1024));
       }},
      {"min_host_memory_gb", "least host memory (MemTotal), GB",
       [](S& s, W w, W v) { s.min_host_memory_gb = amount(w, "min_host_memory_gb", v); }},
      {"min_cpus", "least online CPUs",
       [](S& s, W w, W v) { s.min_cpus = int(whole_number(w, "min_cpus", v, 1, 1 << 20)); }},
      {"cpu_model", "a part of the CPU's model name (/proc/cpuinfo)",
       [](S& s, W w, W v) { s.cpu_model = plain_text(w, "cpu_model", v); }},
      {"mounts", "PATH[:MIN_FREE_GB], ...: mount points that must exist, with free space",
       [](S& s, W w, W v) { s.mounts = mounts(w, "mounts", v); }},
      {"health.clock_event_share",
       "[health] a clock-event reason in more than this share of a load's samples is a finding "
       "(0.05)",
       [](S& s, W w, W v) { s.clock_event_share = share(w, "clock_event_share", v); }},
      {"health.fatal_xids", "[health] XIDs that fail the GPU, beyond the shipped table's",
       [](S& s, W w, W v) { s.xids.fatal = xid_list(w, "fatal_xids", v); }},
      {"health.warn_xids", "[health] XIDs that only warn",
       [](S& s, W w, W v) { s.xids.warn = xid_list(w, "warn_xids", v); }},
      {"health.min_gemm_tflops", "[health] level=full: least GEMM TFLOP/s of every GPU's burn",
       [](S& s, W w, W v) { s.min_gemm_tflops = amount(w, "min_gemm_tflops", v); }},
      {"health.min_memory_copy_gbps", "[health] level=full: least device-memory copy GB/s",
       [](S& s, W w, W v) { s.min_memory_copy_gbps = amount(w, "min_memory_copy_gbps", v); }},
      {"health.min_h2d_gbps", "[health] level=full: least host-to-device copy GB/s",
       [](S& s, W w, W v) { s.min_h2d_gbps = amount(w, "min_h2d_gbps", v); }},
      {"health.min_d2h_gbps", "[health] level=full: least device-to-host copy GB/s",
       [](S& s, W w, W v) { s.min_d2h_gbps = amount(w, "min_d2h_gbps", v); }},
      {"health.min_peer_copy_gbps", "[health] level=full: least peer copy GB/s of every GPU pair",
       [](S& s, W w, W v) { s.min_peer_copy_gbps = amount(w, "min_peer_copy_gbps", v); }},
      {"health.application_xids", "[health] XIDs that are an application's, no finding",
       [](S& s, W w, W v) { s.xids.application = xid_list(w, "application_xids", v); }},
  };
  return table;
}

// The fields of a dotted version, or nothing when it is not one.
std::optional<std::vector<long long>> fields_of(const std::string& text) {
  std::vector<long long> fields;
  std::istringstream parts(text);
  for (std::string part; std::getline(parts, part, '.');) {
    if (part.empty() || part.size() > 9 ||
        part.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    fields.push_back(std::stoll(part));
  }
  if (fields.empty() || text.back() == '.') return std::nullopt;
  return fields;
}

}  // namespace

bool InventorySpec::empty() const {
  return !gpus && gpu_name.empty() && !gpu_device_id && !min_gpu_memory_gb &&
         driver_version.empty() && min_driver_version.empty() && min_cuda_driver_version.empty() &&
         min_nccl_version.empty() && !nvlinks_per_gpu && !gpu_pcie_gen && !gpu_pcie_width &&
         !same_gpu_firmware && !ecc && !mig && !persistence && !nics && nic_link_layer.empty() &&
         !min_nic_rate_gbps && !nic_pcie_gen && !nic_pcie_width && !ib_ports_active &&
         !min_network_interfaces && !min_host_memory_gb && !min_cpus && cpu_model.empty() &&
         mounts.empty();
}

const std::vector<std::pair<std::string, std::string>>& inventory_keys() {
  static const std::vector<std::pair<std::string, std::string>> names = [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const Key& k : keys()) out.emplace_back(k.name, k.meaning);
    return out;
  }();
  return names;
}

InventorySpec parse_inventory(const std::string& path, const InventoryLines& lines) {
  InventorySpec spec;
  for (const auto& [name, given] : lines) {
    const std::string where = "gate.file '" + path + "', line " + std::to_string(given.line);
    const Key* key = nullptr;
    for (const Key& k : keys())
      if (k.name == name) key = &k;
    if (!key) {
      const bool health = name.rfind("health.", 0) == 0;
      std::string known;
      for (const Key& k : keys())
        if ((k.name.rfind("health.", 0) == 0) == health)
          known += (known.empty() ? "" : ", ") + k.name.substr(health ? 7 : 0);
      throw UsageError(where + ": unknown " + (health ? "[health]" : "inventory") + " key '" +
                       name.substr(health ? 7 : 0) + "' (known: " + known + ")");
    }
    key->read(spec, where, given.value);
  }
  if (spec.nics && spec.nic_link_layer.empty()) spec.nic_link_layer = "InfiniBand";
  return spec;
}

std::optional<int> compare_versions(const std::string& a, const std::string& b) {
  const auto x = fields_of(a), y = fields_of(b);
  if (!x || !y) return std::nullopt;
  for (size_t i = 0; i < std::max(x->size(), y->size()); ++i) {
    const long long p = i < x->size() ? (*x)[i] : 0, q = i < y->size() ? (*y)[i] : 0;
    if (p != q) return p < q ? -1 : 1;
  }
  return 0;
}

}  // namespace tp
