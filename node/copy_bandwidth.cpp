#include "node/copy_bandwidth.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <thread>

#include "common/sysinfo.h"
#include "gpu/gpu_loader.h"

namespace tp {
namespace {

using CopyClock = std::chrono::steady_clock;

// The CPU's own memory: big enough to leave every cache, small enough for a test host.
constexpr size_t kHostCopyBytes = size_t(64) << 20;

double host_copy_gbps(double seconds) {
  std::unique_ptr<unsigned char[]> from(new unsigned char[kHostCopyBytes]);
  std::unique_ptr<unsigned char[]> to(new unsigned char[kHostCopyBytes]);
  std::memset(from.get(), 1, kHostCopyBytes);
  std::memset(to.get(), 0, kHostCopyBytes);  // touched before the clock starts
  long copies = 0;
  const auto start = CopyClock::now();
  double took = 0;
  do {
    std::memcpy(to.get(), from.get(), kHostCopyBytes);
    ++copies;
    took = std::chrono::duration<double>(CopyClock::now() - start).count();
  } while (took < seconds);
  // Each byte read once and written once, as on a GPU.
  return 2.0 * double(kHostCopyBytes) * double(copies) / took / 1e9;
}

// Runs the calling thread on the CPUs local to the GPU at `pci_address`, so the pinned memory it
// allocates lies on the GPU's NUMA node; the list it ran on ("" when sysfs does not say).
std::string run_near(const std::string& sysfs_root, const std::string& pci_address) {
  std::ifstream in(sysfs_root + "/bus/pci/devices/" + pci_address + "/local_cpulist");
  std::string list;
  if (!(in >> list)) return "";
  const std::vector<int> cpus = parse_cpulist(list);
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus)
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
  if (cpus.empty() || pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) return "";
  return list;
}

void measure_device(CopyDevice& d, const GpuApi* api, const CopyOptions& options) {
  try {
    if (!api) {
      d.device_gbps = host_copy_gbps(options.seconds);
      return;
    }
    d.cpus = run_near(options.sysfs_root, d.pci_address);
    const GpuCopyRates r = api->measure_copies(d.gpu, options.seconds);
    d.device_gbps = r.device_gbps;
    d.h2d_gbps = r.h2d_gbps;
    d.d2h_gbps = r.d2h_gbps;
  } catch (const std::exception& e) {
    d.error = e.what();
  }
}

// Every device of `which` at once, one thread each; a device not back well past its time is
// left behind and named.
void measure_all(std::vector<CopyDevice>& devices, const std::vector<size_t>& which,
                 const GpuApi* api, const CopyOptions& options) {
  std::vector<std::shared_ptr<CopyDevice>> results;
  std::vector<std::future<void>> done;
  for (size_t k : which) {
    auto result = std::make_shared<CopyDevice>(devices[k]);
    // A measurement that fails or never returns leaves no figure behind.
    result->device_gbps = result->h2d_gbps = result->d2h_gbps = 0;
    result->error.clear();
    results.push_back(result);
    done.push_back(std::async(std::launch::async,
                              [result, api, options] { measure_device(*result, api, options); }));
  }
  const double limit_s = 60 + 20 * options.seconds;
  const auto deadline = CopyClock::now() + std::chrono::duration<double>(limit_s);
  for (size_t i = 0; i < which.size(); ++i) {
    if (done[i].wait_until(deadline) == std::future_status::ready) {
      devices[which[i]] = *results[i];
      continue;
    }
    devices[which[i]].error =
        "the copies did not return within " + std::to_string(int(limit_s)) + " s";
    std::thread([f = std::move(done[i])]() mutable { f.wait(); }).detach();
  }
}

struct Figure {
  const char* name;  // in reasons
  double CopyDevice::*value;
  double CopyFloors::*floor;
};
constexpr Figure kFigures[] = {
    {"device memory copy", &CopyDevice::device_gbps, &CopyFloors::device},
    {"host-to-device copy", &CopyDevice::h2d_gbps, &CopyFloors::h2d},
    {"device-to-host copy", &CopyDevice::d2h_gbps, &CopyFloors::d2h}};

PeerRules with_floor(PeerRules rules, double floor) {
  rules.floor = floor;
  return rules;
}

std::vector<GpuFigure> figures_of(const std::string& host, const std::vector<CopyDevice>& devices,
                                  double CopyDevice::*value, std::vector<size_t>& index) {
  std::vector<GpuFigure> out;
  index.clear();
  for (size_t k = 0; k < devices.size(); ++k)
    if (devices[k].error.empty() && devices[k].*value > 0) {
      out.push_back({host, devices[k].gpu, devices[k].uuid, devices[k].*value});
      index.push_back(k);
    }
  return out;
}

// The devices some figure flags.
std::vector<size_t> suspects(const std::string& host, const CopyRecord& record,
                             const PeerRules& rules) {
  std::vector<size_t> out, index;
  for (const Figure& f : kFigures) {
    const PeerJudgement j =
        judge_gpu_peers(figures_of(host, record.devices, f.value, index),
                        with_floor(rules, record.floors.*f.floor), f.name, "GB/s");
    for (const PeerFlag& flag : j.flags)
      if (std::find(out.begin(), out.end(), index[flag.index]) == out.end())
        out.push_back(index[flag.index]);
  }
  return out;
}

// The node's GPU pairs, one at a time: each the only traffic on its path. A pair whose copy
// does not come back ends the pass (its GPUs are stuck), named, without waiting on it.
void measure_pairs(const std::string& host, CopyRecord& record, const GpuApi* api,
                   const CopyOptions& options) {
  const double seconds = options.seconds / 8, limit_s = 30 + 20 * seconds;
  for (const CopyDevice& s : record.devices)
    for (const CopyDevice& d : record.devices) {
      if (s.gpu == d.gpu || !s.error.empty() || !d.error.empty()) continue;
      const std::string pair =
          host + ": GPU " + std::to_string(s.gpu) + " -> GPU " + std::to_string(d.gpu);
      auto copy = std::async(std::launch::async, [api, from = s.gpu, to = d.gpu, seconds] {
        return api->measure_peer_copy(from, to, seconds);
      });
      if (copy.wait_for(std::chrono::duration<double>(limit_s)) != std::future_status::ready) {
        record.findings.push_back(
            {"fail",
             pair + ": the peer copy did not return within " + std::to_string(int(limit_s)) + " s",
             "drain the node and reset both GPUs; reboot if that fails"});
        std::thread([f = std::move(copy)]() mutable { f.wait(); }).detach();
        return;
      }
      try {
        record.pairs.push_back({s.gpu, d.gpu, copy.get()});
      } catch (const std::exception& e) {
        record.findings.push_back({"fail", pair + ": the peer copy failed: " + e.what(),
                                   "drain the node and reset both GPUs"});
      }
    }
}

std::vector<CopyDevice> find_devices(CopyRecord& record, const GpuApi*& api) {
  api = nullptr;
  if (!missing_gpu_driver().empty()) {
    record.backend = "cpu";
    return {CopyDevice{}};
  }
  const GpuLibrary& library = load_gpu_library();
  if (!library.api) {
    record.unavailable = "the GPU backend could not be loaded: " + library.error;
    return {};
  }
  std::vector<CopyDevice> devices;
  try {
    for (const GpuDevice& g : library.api->inventory())
      devices.push_back({g.index, g.uuid, g.pci_bus_id, "", 0, 0, 0, ""});
  } catch (const std::exception& e) {
    record.unavailable = std::string("the GPUs could not be listed: ") + e.what();
    return {};
  }
  api = library.api;
  record.backend = "cuda";
  return devices;
}

std::string pair_label(const std::string& host, const PeerCopy& p) {
  return host + ": GPU " + std::to_string(p.source) + " -> GPU " + std::to_string(p.destination);
}

void judge_pairs(const std::string& host, const CopyRecord& record, const PeerRules& rules,
                 std::vector<HealthFinding>& out) {
  // A floor holds for every pair: the host file says what each must reach.
  if (record.floors.peer > 0)
    for (const PeerCopy& p : record.pairs)
      if (p.gbps > 0 && p.gbps < record.floors.peer) {
        char text[128];
        std::snprintf(text, sizeof text,
                      ": peer copy %.1f GB/s, below the host file's floor of %.1f GB/s", p.gbps,
                      record.floors.peer);
        out.push_back({"fail", pair_label(host, p) + text,
                       "drain the node; check that pair's NVLink links (nvidia-smi nvlink -s) "
                       "and the NVSwitch trays"});
      }
  // Against each other only where every pair shares one kind of path; elsewhere a pair across
  // sockets, or one without an NVLink bridge, is slower by design.
  if (!record.pairs_alike) return;
  std::vector<GpuFigure> figures;
  std::vector<const PeerCopy*> measured, missing;
  for (const PeerCopy& p : record.pairs) {
    if (p.gbps > 0) {
      figures.push_back({host, int(measured.size()), "", p.gbps});
      measured.push_back(&p);
    } else {
      missing.push_back(&p);
    }
  }
  // A node where some pairs reach each other directly and others do not has lost a link.
  if (!measured.empty())
    for (const PeerCopy* p : missing)
      out.push_back({"warn",
                     pair_label(host, *p) + ": no peer path, while " +
                         std::to_string(measured.size()) + " other pair(s) have one",
                     "check the NVLink links and the fabric manager (nvidia-smi topo -m)"});
  const PeerJudgement j = judge_gpu_peers(figures, rules, "peer copy", "GB/s");
  for (const PeerFlag& flag : j.flags) {
    if (record.floors.peer > 0 && measured[flag.index]->gbps < record.floors.peer)
      continue;  // named by its floor above
    char figures_text[160];
    std::snprintf(figures_text, sizeof figures_text,
                  ": peer copy %.1f GB/s, %.0f%% of the node's best pair (%.1f GB/s; the pairs "
                  "spread by %.0f%%)",
                  measured[flag.index]->gbps, 100 * flag.ratio, flag.reference, 100 * j.noise);
    out.push_back({flag.status, pair_label(host, *measured[flag.index]) + figures_text,
                   "drain the node; check that pair's NVLink links (nvidia-smi nvlink -s) and "
                   "the NVSwitch trays"});
  }
}

}  // namespace

std::vector<HealthFinding> judge_copies(const std::string& host, const CopyRecord& record,
                                        const PeerRules& rules) {
  std::vector<HealthFinding> out;
  for (const CopyDevice& d : record.devices)
    if (!d.error.empty())
      out.push_back({"fail",
                     host + ": GPU " + std::to_string(d.gpu) + ": the copies failed: " + d.error,
                     "drain the node and reset the GPU; run node-check --level=full again"});
  std::vector<size_t> index;
  for (const Figure& f : kFigures) {
    const PeerJudgement j =
        judge_gpu_peers(figures_of(host, record.devices, f.value, index),
                        with_floor(rules, record.floors.*f.floor), f.name, "GB/s");
    for (const PeerFlag& flag : j.flags)
      out.push_back({flag.status, flag.reason,
                     std::string(f.value == &CopyDevice::device_gbps
                                     ? "drain the node; check the GPU's memory clocks and ECC, "
                                       "then replace it if it stays slow"
                                     : "drain the node; check the GPU's PCIe link (lspci -vv), "
                                       "its riser and slot, and the NUMA placement")});
  }
  judge_pairs(host, record, rules, out);
  return out;
}

CopyRecord run_copy_bandwidth(const std::string& host, const CopyOptions& options) {
  CopyRecord record;
  record.seconds = options.seconds;
  record.pairs_alike = options.pairs_alike;
  record.floors = options.floors;
  const GpuApi* api = nullptr;
  record.devices = find_devices(record, api);
  if (record.devices.empty()) {
    if (record.unavailable.empty()) record.unavailable = "no device to measure";
    return record;
  }
  std::vector<size_t> all(record.devices.size());
  for (size_t k = 0; k < all.size(); ++k) all[k] = k;
  measure_all(record.devices, all, api, options);
  // A suspect counts only when a second measurement is slow too. Every device measures again
  // beside it, under the same contention for host memory and the bus, and each figure keeps its
  // better one.
  if (!suspects(host, record, options.rules).empty()) {
    std::vector<size_t> working;
    for (size_t k = 0; k < record.devices.size(); ++k)
      if (record.devices[k].error.empty()) working.push_back(k);
    std::vector<CopyDevice> second = record.devices;
    measure_all(second, working, api, options);
    for (size_t k : working) {
      if (!second[k].error.empty())
        record.devices[k].error = "the second measurement: " + second[k].error;
      for (const Figure& f : kFigures)
        record.devices[k].*f.value = std::max(record.devices[k].*f.value, second[k].*f.value);
    }
  }
  if (api) measure_pairs(host, record, api, options);
  std::vector<HealthFinding> judged = judge_copies(host, record, options.rules);
  record.findings.insert(record.findings.begin(), judged.begin(), judged.end());
  return record;
}

CopyOptions copy_options_of(double burn_s, const InventorySpec* rules,
                            const std::string& sysfs_root, bool every_pair_nvlink) {
  CopyOptions copies;
  copies.seconds = std::clamp(burn_s / 60, 0.1, 1.0);
  copies.sysfs_root = sysfs_root;
  copies.pairs_alike =
      every_pair_nvlink || (rules && rules->nvlinks_per_gpu && *rules->nvlinks_per_gpu > 0);
  if (rules)
    copies.floors = {rules->min_memory_copy_gbps, rules->min_h2d_gbps, rules->min_d2h_gbps,
                     rules->min_peer_copy_gbps};
  return copies;
}

}  // namespace tp
