#pragma once
// The storage-backed batch source: `data.readers` threads per rank read samples with pread (raw
// shards, or HDF5 shards through their chunk addresses, resolved once), `data.prefetch` batches
// ahead of the step. The step's data phase is the time it waits for its batch: the exposed stall.
//
// Order: the global sample positions (step-1)*B .. step*B-1 map to epoch p / N and, within it,
// to a permutation of the N samples drawn from (seed, epoch); each rank takes its contiguous
// share of the global batch. Every sample byte reaches the inputs, so a wrong read changes the
// digest.
//
// Nothing is read before every shard's index has been checked against its files, and only
// regular files are opened, without blocking (dataset.h): a damaged dataset is refused before
// the first step, never found in the middle of a run.
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/batch_source.h"
#include "data/dataset.h"

namespace tp {

// data.readers is 1 to this many threads per rank; data.prefetch 0 to this many batches.
inline constexpr int kMaxDataReaders = 1024;
inline constexpr int kMaxDataPrefetch = 1024;

struct LoaderOptions {
  int readers = 2;
  int prefetch = 2;
  bool verify = false;
  bool drop_cache = false;        // data.cache=drop: posix_fadvise(DONTNEED) after each read
  bool direct = false;            // data.direct: O_DIRECT, aligned reads
  double test_read_delay_ms = 0;  // test-only throttle per sample read
  int64_t last_step = 0;          // nothing is read ahead past it
  // data.rank_shift: read only these shards, in an order of their own; empty: the global order.
  std::vector<int> shards;
};

struct LoaderStats {
  uint64_t bytes_read = 0;
  int64_t samples_read = 0;
  double reader_busy_s = 0;                  // summed over this rank's reader threads
  double first_read_s = 0, last_read_s = 0;  // steady clock: this rank's reading window
  std::vector<int> shards_read;              // which shards this rank read from, ascending
};

// The sample at a position: each epoch is a permutation drawn from (seed, epoch) of all samples,
// or of a given subset of them (data.rank_shift: the samples of the shards a rank reads).
class EpochOrder {
 public:
  EpochOrder(int64_t samples, uint64_t seed) : samples_(samples), seed_(seed) {}
  EpochOrder(std::vector<int64_t> subset, uint64_t seed)
      : samples_(int64_t(subset.size())), seed_(seed), subset_(std::move(subset)) {}
  int64_t sample_at(int64_t position);

 private:
  int64_t samples_;
  uint64_t seed_;
  std::vector<int64_t> subset_;  // empty: all samples 0..samples_-1
  int64_t epoch_ = -1;
  std::vector<int64_t> order_;
};

// A sample's bytes in page-aligned memory that is reused from batch to batch. The pool is
// allocated and faulted in before the first read, as a real loader pins its buffers once, so the
// readers' time is the storage's and an O_DIRECT read can land in it without a bounce.
struct SampleBytes {
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  std::unique_ptr<unsigned char[], Free> data;
  size_t size = 0, capacity = 0;
  void reserve(size_t n);  // at least n bytes, every page touched; keeps the contents otherwise
  void resize(size_t n) {
    reserve(n);
    size = n;
  }
};

class DatasetBatchSource final : public BatchSource {
 public:
  DatasetBatchSource(DatasetSpec spec, const ModelSpec& model, BatchShare share, uint64_t seed,
                     LoaderOptions options);
  ~DatasetBatchSource() override;
  std::string name() const override { return "dataset"; }
  void next(int64_t step, Batch& batch) override;
  LoaderStats stats() const;

 private:
  struct Job {
    int64_t step;
    int slot;
    int64_t sample;
  };
  struct Pending {
    std::vector<SampleBytes> samples;
    std::vector<int64_t> ids;
    int remaining = 0;
    std::string error;
  };

  // UsageError naming the option or the dataset's value out of range.
  void check_options() const;
  // UsageError when `buffers` of the longest sample would not fit in this host's memory.
  void check_pool_fits(uint64_t buffers) const;
  void open_shards();
  // RuntimeError naming data.readers when not all of them can start; none is left running.
  void start_readers();
  void stop_readers();
  void schedule(int64_t step);
  void read_loop();
  // Reads `sample` into `out`; `shard_read` is set to its shard once that is known.
  void read_sample(int64_t sample, SampleBytes& out, int& shard_read);

  DatasetSpec spec_;
  ModelSpec model_;
  BatchShare share_;
  uint64_t seed_;
  LoaderOptions options_;
  EpochOrder order_;
  std::vector<ShardIndex> shards_;
  std::vector<int> fds_;
  uint64_t longest_ = 0;         // the longest sample's bytes: the size of every pooled buffer
  int64_t scheduled_until_ = 0;  // steps up to here have their reads queued

  mutable std::mutex mutex_;
  std::condition_variable work_, done_;
  std::deque<Job> jobs_;
  std::map<int64_t, Pending> pending_;
  std::vector<SampleBytes> spare_;     // the buffer pool: free buffers, for the next reads
  std::vector<unsigned char> folded_;  // the step thread's fold of one sample, reused
  std::vector<uint64_t> fold_words_;
  bool stopping_ = false;
  LoaderStats stats_;
  std::vector<std::thread> readers_;
};

}  // namespace tp
