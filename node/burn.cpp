#include "node/burn.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "gpu/gpu_loader.h"
#include "kernels/cpu_backend.h"

namespace tp {
namespace {

using BurnClock = std::chrono::steady_clock;
using MakeCompute = std::function<std::unique_ptr<ComputeBackend>()>;

// One square layer, one sample: the GEMM is [seq x hidden] x [hidden x hidden]. 8192 x 8192 in
// bf16 keeps an H200's tensor cores busy (1.1 TFLOP a GEMM) in under 1 GiB; the CPU's is small
// enough that a test's burn of a second measures it several times.
BackendConfig burn_config(bool gpu) {
  BackendConfig c;
  c.layers = 1;
  c.hidden = gpu ? 8192 : 256;
  c.seq = gpu ? 8192 : 64;
  c.global_batch = 1;
  c.local_samples = 1;
  c.seed = 1;
  return c;
}

// Measures `d` one second at a time (less on a short burn) until `seconds` have passed.
void burn_device(BurnDevice& d, const MakeCompute& make, bool gpu, double seconds,
                 const BurnOptions& options) {
  try {
    std::unique_ptr<ComputeBackend> compute = make();
    compute->initialize(burn_config(gpu));
    const double each = std::clamp(seconds / 8, 0.05, 1.0);
    const auto end = BurnClock::now() + std::chrono::duration<double>(seconds);
    do {
      const double rate = compute->measure_gemm_rate(each);
      d.rates.push_back(rate);
      if (options.on_measurement) options.on_measurement(d, rate);
    } while (BurnClock::now() < end);
    d.figure = steady_rate(d.rates);
  } catch (const std::exception& e) {
    d.error = e.what();
  }
}

struct Burner {
  bool gpu = false;
  std::vector<BurnDevice> devices;
  std::vector<MakeCompute> makers;
};

// Every device at once, one thread each; a device still burning well past its time (a kernel
// that never returns) is left behind and named.
void burn_all(Burner& b, const std::vector<size_t>& which, double seconds,
              const BurnOptions& options) {
  std::vector<std::shared_ptr<BurnDevice>> results;
  std::vector<std::future<void>> done;
  for (size_t k : which) {
    auto result = std::make_shared<BurnDevice>(b.devices[k]);
    result->rates.clear();
    result->figure = 0;  // a burn that fails or never returns leaves no figure behind
    result->error.clear();
    results.push_back(result);
    done.push_back(
        std::async(std::launch::async, [result, make = b.makers[k], gpu = b.gpu, seconds, options] {
          burn_device(*result, make, gpu, seconds, options);
        }));
  }
  const auto deadline = BurnClock::now() + std::chrono::duration<double>(seconds * 2 + 60);
  for (size_t i = 0; i < which.size(); ++i) {
    if (done[i].wait_until(deadline) == std::future_status::ready) {
      b.devices[which[i]] = *results[i];
      continue;
    }
    b.devices[which[i]].error = "the burn did not return within " +
                                std::to_string(int(seconds * 2 + 60)) + " s (a hung kernel?)";
    // The thread owns its result; let it finish, or not, without this process waiting on it.
    std::thread([f = std::move(done[i])]() mutable { f.wait(); }).detach();
  }
}

// The devices to burn: the GPUs where a driver answers, else the CPU.
Burner find_devices(BurnRecord& record) {
  Burner b;
  record.why_cpu = missing_gpu_driver();
  if (record.why_cpu.empty()) {
    const GpuLibrary& library = load_gpu_library();
    if (!library.api) {
      record.unavailable = "the GPU backend could not be loaded: " + library.error;
      return b;
    }
    try {
      for (const GpuDevice& g : library.api->inventory()) {
        b.devices.push_back({g.index, g.name, g.uuid, g.pci_bus_id, {}, 0, -1, ""});
        b.makers.push_back(
            [api = library.api, index = g.index] { return api->make_compute(index, "bf16"); });
      }
    } catch (const std::exception& e) {
      record.unavailable = std::string("the GPUs could not be listed: ") + e.what();
      return b;
    }
    b.gpu = true;
    record.backend = "cuda";
    record.dtype = "bf16";
    return b;
  }
  b.devices.push_back({-1, "cpu", "", "", {}, 0, -1, ""});
  b.makers.push_back([] { return make_cpu_backend(); });
  record.backend = "cpu";
  record.dtype = "fp32";
  return b;
}

std::vector<GpuFigure> figures_of(const std::string& host, const std::vector<BurnDevice>& devices) {
  std::vector<GpuFigure> figures;
  for (const BurnDevice& d : devices)
    if (d.error.empty())
      figures.push_back({host, d.gpu, d.uuid, std::max(d.figure, d.confirmed) / 1e12});
  return figures;
}

}  // namespace

double steady_rate(const std::vector<double>& rates) {
  if (rates.empty()) return 0;
  std::vector<double> second(rates.begin() + long(rates.size() / 2), rates.end());
  std::sort(second.begin(), second.end());
  const size_t n = second.size();
  return n % 2 ? second[n / 2] : (second[n / 2 - 1] + second[n / 2]) / 2;
}

BurnRecord run_burn(const std::string& host, const BurnOptions& options) {
  BurnRecord record;
  record.seconds = options.seconds;
  Burner b = find_devices(record);
  if (b.devices.empty()) {
    if (record.unavailable.empty()) record.unavailable = "no device to burn";
    return record;
  }
  std::vector<size_t> all(b.devices.size());
  for (size_t k = 0; k < all.size(); ++k) all[k] = k;
  burn_all(b, all, options.seconds, options);
  record.peers = judge_gpu_peers(figures_of(host, b.devices), options.rules, "GEMM", "TFLOP/s");
  // A suspect counts only when a second measurement of it is slow too, as the pairwise pass
  // confirms a slow link: noise on a healthy node must not flag it. Every device burns again
  // beside it, so the suspect meets the same power, heat and bus as its peers, and each keeps
  // its better figure.
  if (!record.peers.flags.empty()) {
    std::vector<size_t> working;
    for (size_t k = 0; k < b.devices.size(); ++k)
      if (b.devices[k].error.empty()) working.push_back(k);
    Burner again = b;
    burn_all(again, working, std::max(2.0, options.seconds / 4), options);
    for (size_t k : working) {
      b.devices[k].confirmed = again.devices[k].figure;
      if (!again.devices[k].error.empty())
        b.devices[k].error = "the second burn: " + again.devices[k].error;
    }
    record.peers = judge_gpu_peers(figures_of(host, b.devices), options.rules, "GEMM", "TFLOP/s");
  }
  record.devices = b.devices;
  return record;
}

BurnOptions burn_options_of(double burn_s, const InventorySpec* rules) {
  BurnOptions options;
  options.seconds = burn_s;
  if (rules) options.rules.floor = rules->min_gemm_tflops;
  return options;
}

std::vector<HealthFinding> burn_findings(const std::string& host, const BurnRecord& burn,
                                         bool driver_present) {
  std::vector<HealthFinding> out;
  if (!burn.unavailable.empty() && driver_present)
    out.push_back({"fail", host + ": the burn could not run: " + burn.unavailable,
                   "check the CUDA toolkit and libtrainproof_gpu.so beside trainproof, then the "
                   "GPUs (nvidia-smi)"});
  for (const BurnDevice& d : burn.devices)
    if (!d.error.empty())
      out.push_back({"fail", host + ": " + burn_device_label(d) + ": the burn failed: " + d.error,
                     "drain the node and reset the GPU; run node-check --level=full again"});
  for (const PeerFlag& flag : burn.peers.flags)
    out.push_back({flag.status, flag.reason,
                   "drain the node; burn that GPU alone to confirm, then check its cooling and "
                   "power, and replace it if it stays slow"});
  return out;
}

std::string burn_device_label(const BurnDevice& d) {
  if (d.gpu < 0) return "the CPU";
  return "GPU " + std::to_string(d.gpu) + " (" + (d.uuid.empty() ? "" : d.uuid + ", ") +
         d.pci_address + ")";
}

}  // namespace tp
