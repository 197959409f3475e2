// The report's data section: the dataset, how it was read, and what the ranks read, with the
// warnings that say when the figures measure memory or CPU rather than storage (docs/data.md).
#include <algorithm>
#include <cstdio>

#include "app/report/report.h"

namespace tp {
namespace {

using nlohmann::json;

struct DataTotals {
  double bytes = 0, samples = 0, busy = 0, window = 0, ram = 0;
  double rank_gbps_min = 0, rank_gbps_max = 0;
  double cpus_min = 0;
  int starved_rank = -1;  // the first rank with fewer CPUs than its threads, or -1
};

// A rank with fewer CPUs of its own than its reader threads plus the step thread makes them take
// turns: its read figures and its stall then measure CPU, not storage.
DataTotals totals_of(const DataRecord& data, int threads_per_rank) {
  DataTotals t;
  for (size_t r = 0; r < data.ranks.size(); ++r) {
    const RankLoad& load = data.ranks[r];
    const double cpus = data.cpu_share.at(r);
    if (r == 0 || cpus < t.cpus_min) t.cpus_min = cpus;
    if (cpus < threads_per_rank && t.starved_rank < 0) t.starved_rank = int(r);
    t.bytes += double(load.bytes_read);
    t.samples += double(load.samples_read);
    t.busy += load.reader_busy_s;
    t.window = std::max(t.window, load.window_s);
    t.ram += double(load.host_ram_bytes);
    const double gbps = load.window_s > 0 ? double(load.bytes_read) / load.window_s / 1e9 : 0.0;
    t.rank_gbps_min = r == 0 ? gbps : std::min(t.rank_gbps_min, gbps);
    t.rank_gbps_max = std::max(t.rank_gbps_max, gbps);
  }
  return t;
}

std::string page_cache_warning(uint64_t dataset_total, double ram) {
  if (double(dataset_total) >= 5.0 * ram) return "";
  return "the dataset (" + std::to_string(dataset_total / 1000000) +
         " MB) is smaller than 5x the RAM of the nodes reading it (" +
         std::to_string(uint64_t(ram) / 1000000) +
         " MB): the page cache can hold it, so read figures may measure memory, not storage "
         "(MLPerf Storage requires 5x; or use data.cache=drop)";
}

std::string cpu_warning(const DataRecord& data, const DataTotals& t, int readers) {
  if (t.starved_rank < 0) return "";
  const int threads = readers + 1;
  char text[512];
  std::snprintf(text, sizeof text,
                "rank %d has %.3g CPU(s) of its own (its affinity, shared with the ranks of its "
                "host that may run there) for %d reader thread(s) and the step: they take "
                "turns, so read figures and the data stall measure CPU, not storage (give each "
                "rank %d cores: srun --cpus-per-task=%d, or mpirun --map-by slot:PE=%d or "
                "--bind-to none)",
                t.starved_rank, data.cpu_share.at(size_t(t.starved_rank)), readers, threads,
                threads, threads);
  return text;
}

}  // namespace

json data_json(const TrainConfig& cfg, const DataRecord& data) {
  const DatasetSpec& spec = data.dataset;
  const uint64_t total_bytes = dataset_bytes(spec);
  const DataTotals t = totals_of(data, cfg.data.readers + 1);
  json shards = json::array();
  for (const RankLoad& load : data.ranks) shards.push_back(load.shards_read);
  return json{{"dir", cfg.data.dir},
              {"format", spec.format},
              {"files", spec.files},
              {"samples", spec.samples},
              {"dataset_bytes", total_bytes},
              {"readers", cfg.data.readers},
              {"prefetch", cfg.data.prefetch},
              {"verify", cfg.data.verify},
              {"cache", cfg.data.cache},
              {"direct", cfg.data.direct},
              {"rank_shift", cfg.data.rank_shift},
              {"epochs", double(cfg.steps) * double(cfg.model.global_batch) / double(spec.samples)},
              {"bytes_read", uint64_t(t.bytes)},
              {"samples_read", uint64_t(t.samples)},
              {"reader_busy_s", t.busy},
              {"read_gbps", t.window > 0 ? t.bytes / t.window / 1e9 : 0.0},
              {"rank_read_gbps", {{"min", t.rank_gbps_min}, {"max", t.rank_gbps_max}}},
              {"rank_shards_read", shards},
              {"samples_per_s", t.window > 0 ? t.samples / t.window : 0.0},
              {"ram_of_reading_nodes", uint64_t(t.ram)},
              {"cpus_per_rank_min", t.cpus_min},
              {"page_cache_warning", page_cache_warning(total_bytes, t.ram)},
              {"cpu_warning", cpu_warning(data, t, cfg.data.readers)}};
}

}  // namespace tp
