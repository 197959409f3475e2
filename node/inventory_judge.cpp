#include "node/inventory_judge.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

namespace tp {
namespace {

std::string figure(double value) {
  char text[32];
  std::snprintf(text, sizeof text, value >= 100 ? "%.0f" : value >= 10 ? "%.1f" : "%.2f", value);
  return text;
}

std::string hex(unsigned id) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%04x", id);
  return text;
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool contains_text(const std::string& haystack, const std::string& needle) {
  return lower(haystack).find(lower(needle)) != std::string::npos;
}

std::string joined(const std::vector<std::string>& parts, size_t shown = 8) {
  std::string text;
  for (size_t i = 0; i < parts.size() && i < shown; ++i) text += (i ? ", " : "") + parts[i];
  if (parts.size() > shown) text += " and " + std::to_string(parts.size() - shown) + " more";
  return text;
}

std::string link_text(int gen, int width) {
  return "Gen" + (gen > 0 ? std::to_string(gen) : std::string("?")) + " x" +
         (width > 0 ? std::to_string(width) : std::string("?"));
}

std::string port_name(const RdmaPort& p) {
  return p.device + " port " + p.port;
}

struct Judge {
  const InventorySpec& spec;
  const MachineFacts& machine;
  const DriverView& driver;
  std::vector<InventoryItem> items;

  void pass(const std::string& key, const std::string& expected, const std::string& found) {
    items.push_back({key, expected, found, "pass", "", ""});
  }
  void not_judged(const std::string& key, const std::string& expected, const std::string& why) {
    items.push_back({key, expected, why, "n/a", "", ""});
  }
  void fail(const std::string& key, const std::string& expected, const std::string& found,
            const std::string& reason, const std::string& action) {
    items.push_back({key, expected, found, "fail", machine.host + ": " + reason, action});
  }
  // Each part's failure in one item: what is wrong with which GPU or port, the first eight named.
  void judge_parts(const std::string& key, const std::string& expected,
                   const std::vector<std::string>& wrong, size_t judged,
                   const std::string& action) {
    if (judged == 0)
      not_judged(key, expected, "none to judge");
    else if (wrong.empty())
      pass(key, expected, "all " + std::to_string(judged));
    else
      fail(key, expected, std::to_string(wrong.size()) + " of " + std::to_string(judged),
           joined(wrong) + "; expected " + expected, action);
  }

  void gpu_count();
  void gpu_parts();
  void gpu_versions();
  void nics();
  void host();
};

void Judge::gpu_count() {
  if (!spec.gpus) return;
  const int expected = *spec.gpus;
  std::set<std::string> by_driver;
  for (const DriverGpu& g : driver.gpus) by_driver.insert(g.pci_address);
  std::vector<std::string> unseen, bus;  // on the bus and not listed by the driver; on the bus
  for (const PciGpu& g : machine.pci_gpus) {
    bus.push_back(g.address);
    if (!by_driver.count(g.address)) unseen.push_back(g.address);
  }
  const int on_bus = int(machine.pci_gpus.size());
  const int found = driver.loaded ? int(driver.gpus.size()) : 0;
  const bool right =
      driver.loaded ? found == expected && unseen.empty() : expected == 0 && on_bus == 0;
  const std::string want = std::to_string(expected);
  if (right) return pass("gpus", want, std::to_string(found));
  std::string detail;
  if (expected == 0 && on_bus > 0)
    return fail("gpus", want, std::to_string(on_bus),
                std::to_string(on_bus) + " GPU(s) on the PCI bus (" + joined(bus) + "), expected 0",
                "this is another host type: use its host file, or move the node to its partition");
  if (driver.loaded && !unseen.empty())
    detail = "missing " + joined(unseen) + ", seen on the PCI bus but not by the driver";
  else
    detail = on_bus == 0 ? "none on the PCI bus" : std::to_string(on_bus) + " on the PCI bus";
  if (!driver.loaded) detail += "; the driver could not be asked: " + driver.unavailable;
  const bool off_the_bus = on_bus < expected;
  fail("gpus", want, std::to_string(found),
       std::to_string(found) + " GPU" + (found == 1 ? "" : "s") + ", expected " + want + " (" +
           detail + ")",
       off_the_bus
           ? "reseat or replace the GPU that is not on the PCI bus (check its power and riser)"
           : "drain the node; read the kernel log for an XID 79 (fallen off the bus) or a driver "
             "error, then reset the GPU or reboot");
}

void Judge::gpu_parts() {
  const bool asked = !spec.gpu_name.empty() || spec.gpu_device_id || spec.min_gpu_memory_gb ||
                     spec.nvlinks_per_gpu || spec.gpu_pcie_gen || spec.gpu_pcie_width ||
                     spec.same_gpu_firmware || spec.ecc || spec.mig || spec.persistence;
  if (!asked) return;
  if (!driver.loaded || driver.gpus.empty()) {
    const std::string why = driver.loaded ? "the driver lists no GPU"
                                          : "the driver could not be asked: " + driver.unavailable;
    for (const char* key :
         {"gpu_name", "gpu_device_id", "min_gpu_memory_gb", "nvlinks_per_gpu", "gpu_pcie_gen",
          "gpu_pcie_width", "same_gpu_firmware", "ecc", "mig", "persistence"})
      not_judged(key, "", why);
    return;
  }
  const size_t n = driver.gpus.size();
  const auto each = [&](const std::string& key, const std::string& expected, auto wrong_text,
                        const std::string& action) {
    std::vector<std::string> wrong;
    for (const DriverGpu& g : driver.gpus)
      if (const std::string w = wrong_text(g); !w.empty()) wrong.push_back(gpu_label(g) + " " + w);
    judge_parts(key, expected, wrong, n, action);
  };
  if (!spec.gpu_name.empty())
    each(
        "gpu_name", spec.gpu_name,
        [&](const DriverGpu& g) {
          return contains_text(g.name, spec.gpu_name) ? "" : "is " + g.name;
        },
        "this is another host type: use its host file, or move the node to its partition");
  if (spec.gpu_device_id)
    each(
        "gpu_device_id", hex(*spec.gpu_device_id),
        [&](const DriverGpu& g) {
          return g.device_id == *spec.gpu_device_id ? "" : "has device id " + hex(g.device_id);
        },
        "this is another host type: use its host file, or move the node to its partition");
  if (spec.min_gpu_memory_gb)
    each(
        "min_gpu_memory_gb", figure(*spec.min_gpu_memory_gb) + " GB",
        [&](const DriverGpu& g) {
          return g.memory_gb >= *spec.min_gpu_memory_gb ? "" : "has " + figure(g.memory_gb) + " GB";
        },
        "check that MIG is off and no other process holds memory; else replace the GPU");
  if (spec.nvlinks_per_gpu)
    each(
        "nvlinks_per_gpu", std::to_string(*spec.nvlinks_per_gpu),
        [&](const DriverGpu& g) {
          return g.nvlinks_up >= *spec.nvlinks_per_gpu
                     ? ""
                     : "has " + std::to_string(std::max(g.nvlinks_up, 0)) + " links up";
        },
        "drain the node; reset the GPU and the NVSwitch fabric (nvidia-fabricmanager), else "
        "replace the baseboard");
  if (spec.gpu_pcie_gen || spec.gpu_pcie_width)
    each(
        spec.gpu_pcie_gen && spec.gpu_pcie_width ? "gpu_pcie_gen, gpu_pcie_width"
        : spec.gpu_pcie_gen                      ? "gpu_pcie_gen"
                                                 : "gpu_pcie_width",
        link_text(spec.gpu_pcie_gen.value_or(0), spec.gpu_pcie_width.value_or(0)),
        [&](const DriverGpu& g) {
          const bool ok = g.max_pcie_gen >= spec.gpu_pcie_gen.value_or(0) &&
                          g.max_pcie_width >= spec.gpu_pcie_width.value_or(0);
          return ok ? "" : "can train to " + link_text(g.max_pcie_gen, g.max_pcie_width);
        },
        "reseat the GPU; check the riser and the BIOS PCIe settings");
  const auto mode = [&](const char* key, std::optional<bool> want, int DriverGpu::*now,
                        int DriverGpu::*pending, const std::string& action) {
    if (!want) return;
    each(
        key, *want ? "on" : "off",
        [&](const DriverGpu& g) -> std::string {
          if (g.*now < 0) return "does not report it";
          if ((g.*now == 1) != *want) return std::string("is ") + (g.*now ? "on" : "off");
          if (pending && g.*pending >= 0 && (g.*pending == 1) != *want)
            return std::string("turns ") + (g.*pending ? "on" : "off") + " at the next reset";
          return "";
        },
        action);
  };
  mode("ecc", spec.ecc, &DriverGpu::ecc, &DriverGpu::ecc_pending,
       "nvidia-smi -e 1 on the GPU, then reset it");
  mode("mig", spec.mig, &DriverGpu::mig, &DriverGpu::mig_pending,
       "nvidia-smi -mig 0 on the GPU, then reset it");
  mode("persistence", spec.persistence, &DriverGpu::persistence, nullptr,
       "start nvidia-persistenced (or nvidia-smi -pm 1)");
  if (spec.same_gpu_firmware && *spec.same_gpu_firmware) {
    std::set<std::string> vbios;
    for (const DriverGpu& g : driver.gpus) vbios.insert(g.vbios);
    std::vector<std::string> wrong;
    if (vbios.size() > 1)
      for (const DriverGpu& g : driver.gpus) wrong.push_back(gpu_label(g) + " VBIOS " + g.vbios);
    judge_parts("same_gpu_firmware", "one VBIOS on every GPU", wrong, n,
                "flash every GPU of the node to the same VBIOS");
  }
}

void Judge::gpu_versions() {
  const auto version = [&](const char* key, const std::string& want, const std::string& have,
                           bool exact, const std::string& action) {
    if (want.empty()) return;
    const bool nccl = std::string(key) == "min_nccl_version";
    if (have.empty())
      return not_judged(key, want,
                        nccl            ? driver.nccl_unavailable
                        : driver.loaded ? "not reported"
                                        : "the driver could not be asked: " + driver.unavailable);
    const std::optional<int> order = compare_versions(have, want);
    const bool ok = order && (exact ? *order == 0 : *order >= 0);
    if (ok) return pass(key, want, have);
    fail(key, (exact ? "" : "at least ") + want, have,
         std::string(key) + " " + have + ", expected " + (exact ? "" : "at least ") + want, action);
  };
  version("driver_version", spec.driver_version, driver.driver_version, true,
          "install the image's driver, or use the host file of this image");
  version("min_driver_version", spec.min_driver_version, driver.driver_version, false,
          "upgrade the NVIDIA driver");
  version("min_cuda_driver_version", spec.min_cuda_driver_version, driver.cuda_driver_version,
          false, "upgrade the NVIDIA driver");
  version("min_nccl_version", spec.min_nccl_version, driver.nccl_version, false,
          "install a newer NCCL (libnccl2)");
}

void Judge::nics() {
  std::vector<const RdmaPort*> counted;
  for (const RdmaPort& p : machine.rdma_ports)
    if (spec.nic_link_layer.empty() || p.link_layer == spec.nic_link_layer) counted.push_back(&p);
  const std::string layer = spec.nic_link_layer.empty() ? "RDMA" : spec.nic_link_layer;
  if (spec.nics) {
    std::vector<std::string> names;
    for (const RdmaPort* p : counted) names.push_back(port_name(*p));
    const std::string found = std::to_string(counted.size());
    if (int(counted.size()) == *spec.nics)
      pass("nics", std::to_string(*spec.nics) + " " + layer, found);
    else
      fail("nics", std::to_string(*spec.nics) + " " + layer, found,
           found + " " + layer + " port(s), expected " + std::to_string(*spec.nics) +
               (names.empty() ? " (none in class/infiniband)" : " (found " + joined(names) + ")"),
           "check that the HCA driver is loaded (ibstat), then reseat or replace the missing NIC");
  }
  const auto each = [&](const std::string& key, const std::string& expected, auto wrong_text,
                        const std::string& action) {
    std::vector<std::string> wrong;
    for (const RdmaPort* p : counted)
      if (const std::string w = wrong_text(*p); !w.empty())
        wrong.push_back(port_name(*p) + " " + w);
    judge_parts(key, expected, wrong, counted.size(), action);
  };
  if (spec.min_nic_rate_gbps)
    each(
        "min_nic_rate_gbps", figure(*spec.min_nic_rate_gbps) + " Gb/s",
        [&](const RdmaPort& p) {
          return p.rate_gbps >= *spec.min_nic_rate_gbps
                     ? ""
                     : "at " + (p.rate_text.empty() ? "no rate" : p.rate_text);
        },
        "reseat or replace the cable or transceiver; check the switch port's speed");
  if (spec.ib_ports_active && *spec.ib_ports_active)
    each(
        "ib_ports_active", "ACTIVE, LinkUp",
        [](const RdmaPort& p) {
          return p.state == "ACTIVE" && p.phys_state == "LinkUp"
                     ? ""
                     : "is " + p.state + ", " + p.phys_state;
        },
        "check the cable and the switch port; a port INIT with LinkUp waits for the subnet "
        "manager");
  if (spec.nic_pcie_gen || spec.nic_pcie_width)
    each(
        spec.nic_pcie_gen && spec.nic_pcie_width ? "nic_pcie_gen, nic_pcie_width"
        : spec.nic_pcie_gen                      ? "nic_pcie_gen"
                                                 : "nic_pcie_width",
        link_text(spec.nic_pcie_gen.value_or(0), spec.nic_pcie_width.value_or(0)),
        [&](const RdmaPort& p) {
          const int want = spec.nic_pcie_width.value_or(0);
          const bool ok = p.link.max_gen >= spec.nic_pcie_gen.value_or(0) &&
                          p.link.max_width >= want && (p.link.width < 0 || p.link.width >= want);
          return ok ? ""
                    : "(" + p.pci_address + ") at " + link_text(p.link.gen, p.link.width) +
                          ", capable of " + link_text(p.link.max_gen, p.link.max_width);
        },
        "reseat the NIC; check its slot and the BIOS PCIe settings");
}

void Judge::host() {
  if (spec.min_host_memory_gb) {
    const std::string want = figure(*spec.min_host_memory_gb) + " GB",
                      have = figure(machine.memory_gb) + " GB";
    if (machine.memory_gb >= *spec.min_host_memory_gb)
      pass("min_host_memory_gb", want, have);
    else
      fail("min_host_memory_gb", want, have, "host memory " + have + ", expected at least " + want,
           "reseat or replace the DIMMs; compare dmidecode -t memory with the host type");
  }
  if (spec.min_cpus) {
    const std::string want = std::to_string(*spec.min_cpus), have = std::to_string(machine.cpus);
    if (machine.cpus >= *spec.min_cpus)
      pass("min_cpus", want, have);
    else
      fail("min_cpus", want, have, have + " online CPUs, expected at least " + want,
           "check the BIOS (SMT, cores disabled) and the kernel's isolcpus and maxcpus");
  }
  if (!spec.cpu_model.empty()) {
    if (contains_text(machine.cpu_model, spec.cpu_model))
      pass("cpu_model", spec.cpu_model, machine.cpu_model);
    else
      fail("cpu_model", spec.cpu_model, machine.cpu_model,
           "CPU '" + machine.cpu_model + "', expected '" + spec.cpu_model + "'",
           "this is another host type: use its host file");
  }
  if (spec.min_network_interfaces) {
    const std::string want = std::to_string(*spec.min_network_interfaces),
                      have = std::to_string(machine.interfaces_up.size());
    if (int(machine.interfaces_up.size()) >= *spec.min_network_interfaces)
      pass("min_network_interfaces", want, have);
    else
      fail("min_network_interfaces", want, have,
           have + " network interface(s) up, expected at least " + want,
           "check the cables and ip link");
  }
}

}  // namespace

std::vector<InventoryItem> judge_inventory(const InventorySpec& spec, const MachineFacts& machine,
                                           const std::vector<MountFacts>& mounts,
                                           const DriverView& driver) {
  Judge judge{spec, machine, driver, {}};
  judge.gpu_count();
  judge.gpu_parts();
  judge.gpu_versions();
  judge.nics();
  judge.host();
  for (const MountSpec& want : spec.mounts) {
    const auto found = std::find_if(mounts.begin(), mounts.end(),
                                    [&](const MountFacts& m) { return m.path == want.path; });
    const std::string expected =
        want.path + (want.min_free_gb > 0 ? " with " + figure(want.min_free_gb) + " GB free" : "");
    if (found == mounts.end() || !found->mounted)
      judge.fail(
          "mounts", expected, "not mounted",
          want.path + " is not a mount point (writes to it would land on the filesystem below)",
          "mount it (check the fstab entry and the filesystem's client), or drain the node");
    else if (found->free_gb < want.min_free_gb)
      judge.fail("mounts", expected, figure(found->free_gb) + " GB free",
                 want.path + " has " + figure(found->free_gb) + " GB free, expected at least " +
                     figure(want.min_free_gb) + " GB",
                 "free space on it (old checkpoints, core files), or raise its quota");
    else
      judge.pass("mounts", expected, figure(found->free_gb) + " GB free");
  }
  return judge.items;
}

}  // namespace tp
