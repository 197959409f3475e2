#include "data/loader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "common/clock.h"
#include "common/errors.h"
#include "common/philox.h"

namespace tp {
namespace {

constexpr uint64_t kDirectAlign = 4096;

std::vector<int64_t> samples_of(const DatasetSpec& spec, const std::vector<int>& shards) {
  std::vector<int64_t> samples;
  for (int f : shards)
    for (int64_t s = shard_first(spec, f); s < shard_first(spec, f + 1); ++s) samples.push_back(s);
  return samples;
}

// O_DIRECT reads of unaligned ranges land here first; one per reader thread, reused.
thread_local SampleBytes direct_bounce;

}  // namespace

void SampleBytes::reserve(size_t n) {
  if (n <= capacity) return;
  const size_t rounded =
      std::max<size_t>(kDirectAlign, (n + kDirectAlign - 1) / kDirectAlign * kDirectAlign);
  void* memory = nullptr;
  if (::posix_memalign(&memory, kDirectAlign, rounded) != 0)
    throw RuntimeError("out of memory for a " + std::to_string(rounded) + "-byte sample buffer");
  // Touch every page now, outside the readers' timed reads.
  std::memset(memory, 0, rounded);
  data.reset(static_cast<unsigned char*>(memory));
  capacity = rounded;
}

int64_t EpochOrder::sample_at(int64_t position) {
  if (samples_ < 1)
    throw UsageError("an epoch needs at least one sample, got " + std::to_string(samples_));
  const int64_t epoch = position / samples_;
  if (epoch != epoch_) {
    // Fisher-Yates with counter-based draws keyed by (seed, epoch, i): any rank, any resume,
    // computes the same order.
    order_.resize(size_t(samples_));
    for (int64_t i = 0; i < samples_; ++i)
      order_[size_t(i)] = subset_.empty() ? i : subset_[size_t(i)];
    for (int64_t i = samples_ - 1; i > 0; --i) {
      const philox::Counter bits =
          philox::block_bits(seed_, philox::kShuffle, uint64_t(epoch), uint64_t(i));
      const uint64_t draw = (uint64_t(bits[0]) << 32) | bits[1];
      std::swap(order_[size_t(i)], order_[size_t(draw % uint64_t(i + 1))]);
    }
    epoch_ = epoch;
  }
  return order_[size_t(position % samples_)];
}

DatasetBatchSource::DatasetBatchSource(DatasetSpec spec, const ModelSpec& model, BatchShare share,
                                       uint64_t seed, LoaderOptions options)
    : spec_(std::move(spec)),
      model_(model),
      share_(share),
      seed_(seed),
      options_(std::move(options)),
      order_(1, seed) {
  check_options();
  // Every shard's index, checked against its files, before anything is opened for reading.
  for (int f = 0; f < spec_.files; ++f) shards_.push_back(load_shard_index(spec_, f));
  for (const ShardIndex& shard : shards_)
    for (uint64_t length : shard.lengths) longest_ = std::max(longest_, length);
  const uint64_t in_flight = uint64_t(options_.prefetch + 1) * uint64_t(share_.samples);
  check_pool_fits(in_flight);
  order_ = options_.shards.empty()
               ? EpochOrder(spec_.samples, seed)
               : EpochOrder(samples_of(spec_, options_.shards),
                            seed ^ (0x9E3779B97F4A7C15ull * uint64_t(options_.shards.front() + 1)));
  try {
    open_shards();
    // The pool: every buffer the scheduled batches can hold at once, sized for the longest
    // sample.
    spare_.resize(size_t(in_flight));
    for (SampleBytes& buffer : spare_) buffer.reserve(size_t(longest_));
    start_readers();
  } catch (...) {
    for (int fd : fds_) ::close(fd);
    throw;
  }
}

void DatasetBatchSource::check_options() const {
  if (options_.readers < 1 || options_.readers > kMaxDataReaders)
    throw UsageError("data.readers=" + std::to_string(options_.readers) + " is out of range [1, " +
                     std::to_string(kMaxDataReaders) + "] (reader threads per rank)");
  if (options_.prefetch < 0 || options_.prefetch > kMaxDataPrefetch)
    throw UsageError("data.prefetch=" + std::to_string(options_.prefetch) +
                     " is out of range [0, " + std::to_string(kMaxDataPrefetch) + "]");
  if (share_.samples < 1)
    throw UsageError("the loader needs at least one sample per rank per step, got " +
                     std::to_string(share_.samples));
  if (const std::string problem = shape_problem(spec_); !problem.empty())
    throw UsageError("dataset in " + spec_.dir + ": " + problem);
  for (int f : options_.shards)
    if (f < 0 || f >= spec_.files)
      throw UsageError("data.rank_shift: no shard " + std::to_string(f) + " among the dataset's " +
                       std::to_string(spec_.files));
}

// The buffers are touched page by page when they are allocated: more than the host's memory
// would end in the OOM killer, not in an error.
void DatasetBatchSource::check_pool_fits(uint64_t buffers) const {
  uint64_t pool = 0;
  const bool overflow = __builtin_mul_overflow(buffers, longest_, &pool);
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_bytes = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_bytes <= 0) return;  // unknown: nothing to compare with
  const uint64_t memory = uint64_t(pages) * uint64_t(page_bytes);
  if (overflow || pool > memory)
    throw UsageError("data.prefetch=" + std::to_string(options_.prefetch) +
                     ": the loader's buffers, (" + std::to_string(options_.prefetch) +
                     " + 1) batches x " + std::to_string(share_.samples) + " samples per rank x " +
                     std::to_string(longest_) + " bytes (the longest sample) = " +
                     (overflow ? std::string("more than 2^64") : std::to_string(pool)) +
                     " bytes, exceed this host's memory (" + std::to_string(memory) +
                     " bytes); lower data.prefetch or model.batch");
}

void DatasetBatchSource::open_shards() {
  for (const ShardIndex& shard : shards_) {
    const RegularFile file = open_regular_file(shard.path, options_.direct ? O_DIRECT : 0);
    fds_.push_back(file.fd);
    // Samples are read in shuffled order: readahead would only fetch bytes nobody asked for.
    ::posix_fadvise(file.fd, 0, 0, POSIX_FADV_RANDOM);
  }
}

void DatasetBatchSource::start_readers() {
  try {
    for (int r = 0; r < options_.readers; ++r) readers_.emplace_back([this] { read_loop(); });
  } catch (const std::exception& e) {  // std::system_error; std::bad_alloc
    const size_t started = readers_.size();
    stop_readers();
    throw RuntimeError("data.readers=" + std::to_string(options_.readers) + ": only " +
                       std::to_string(started) + " reader threads could start (" + e.what() +
                       "); lower data.readers, or raise the limit on threads (ulimit -u, the "
                       "cgroup's pids.max) or memory");
  }
}

void DatasetBatchSource::stop_readers() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  for (std::thread& t : readers_) t.join();
  readers_.clear();
}

DatasetBatchSource::~DatasetBatchSource() {
  stop_readers();
  for (int fd : fds_) ::close(fd);
}

void DatasetBatchSource::schedule(int64_t step) {
  Pending pending;
  pending.samples.resize(size_t(share_.samples));
  pending.remaining = share_.samples;
  std::vector<Job> jobs;
  for (int i = 0; i < share_.samples; ++i) {
    // The global order places the rank's share within the global batch; a rank-affine order
    // (data.rank_shift) is the rank's own sequence.
    const int64_t position = options_.shards.empty()
                                 ? (step - 1) * model_.global_batch + share_.first + i
                                 : (step - 1) * share_.samples + i;
    const int64_t sample = order_.sample_at(position);
    pending.ids.push_back(sample);
    jobs.push_back({step, i, sample});
  }
  {
    std::lock_guard<std::mutex> guard(mutex_);
    pending_[step] = std::move(pending);
    jobs_.insert(jobs_.end(), jobs.begin(), jobs.end());
  }
  work_.notify_all();
}

void DatasetBatchSource::read_loop() {
  // An unaligned O_DIRECT piece spans at most one more page at each end. Out of memory here, the
  // first read that needs the buffer reports it.
  try {
    if (options_.direct) direct_bounce.reserve(size_t(longest_ + 2 * kDirectAlign));
  } catch (const std::exception&) {
  }
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = jobs_.front();
      jobs_.pop_front();
    }
    SampleBytes bytes;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (!spare_.empty()) {
        bytes = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    std::string error;
    int shard = -1;
    const double start = steady_seconds();
    try {
      read_sample(job.sample, bytes, shard);
    } catch (const std::exception& e) {
      error = e.what();
    }
    const double end = steady_seconds();
    {
      std::lock_guard<std::mutex> guard(mutex_);
      stats_.reader_busy_s += end - start;
      stats_.bytes_read += bytes.size;
      stats_.samples_read += 1;
      if (stats_.first_read_s == 0) stats_.first_read_s = start;
      stats_.last_read_s = std::max(stats_.last_read_s, end);
      if (shard >= 0) {
        auto& seen = stats_.shards_read;
        const auto at = std::lower_bound(seen.begin(), seen.end(), shard);
        if (at == seen.end() || *at != shard) seen.insert(at, shard);
      }
      Pending& p = pending_[job.step];
      p.samples[size_t(job.slot)] = std::move(bytes);
      if (!error.empty() && p.error.empty()) p.error = error;
      --p.remaining;
    }
    done_.notify_all();
  }
}

void DatasetBatchSource::read_sample(int64_t sample, SampleBytes& out, int& shard_read) {
  // The shard holding `sample`: shards hold consecutive ranges in order.
  size_t f = size_t(std::upper_bound(
                        shards_.begin(), shards_.end(), sample,
                        [](int64_t s, const ShardIndex& shard) { return s < shard.first_sample; }) -
                    shards_.begin()) -
             1;
  const ShardIndex& shard = shards_[f];
  shard_read = int(f);
  const size_t i = size_t(sample - shard.first_sample);
  const uint64_t length = shard.lengths.at(i);
  out.resize(length);
  // (file offset, bytes) pieces: one for raw; split at chunk bounds for hdf5.
  std::vector<std::pair<uint64_t, uint64_t>> pieces;
  uint64_t logical = shard.offsets[i];
  for (uint64_t left = length; left > 0;) {
    if (shard.chunk_bytes == 0) {
      pieces.emplace_back(logical, left);
      break;
    }
    const uint64_t c = logical / shard.chunk_bytes, within = logical % shard.chunk_bytes;
    const uint64_t n = std::min(left, shard.chunk_bytes - within);
    pieces.emplace_back(shard.chunk_address.at(c) + within, n);
    logical += n;
    left -= n;
  }
  uint64_t filled = 0;
  for (const auto& [offset, bytes] : pieces) {
    if (options_.direct) {
      // O_DIRECT needs aligned offsets, sizes and memory. An aligned piece lands in place; any
      // other is read as its aligned superset into this reader's bounce buffer.
      const uint64_t begin = offset / kDirectAlign * kDirectAlign;
      const uint64_t end = (offset + bytes + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
      const bool in_place = begin == offset && end == offset + bytes && filled % kDirectAlign == 0;
      unsigned char* target = out.data.get() + filled;
      if (!in_place) {
        direct_bounce.reserve(size_t(end - begin));
        target = direct_bounce.data.get();
      }
      const ssize_t n = ::pread(fds_[f], target, end - begin, off_t(begin));
      if (n < ssize_t(offset + bytes - begin))
        throw RuntimeError("read " + shard.path + " (sample " + std::to_string(sample) +
                           ") with O_DIRECT: " + (n < 0 ? std::strerror(errno) : "short read"));
      if (!in_place) std::memcpy(out.data.get() + filled, target + (offset - begin), bytes);
    } else {
      uint64_t done = 0;
      while (done < bytes) {
        const ssize_t n =
            ::pread(fds_[f], out.data.get() + filled + done, bytes - done, off_t(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
          throw RuntimeError("read " + shard.path + " (sample " + std::to_string(sample) +
                             "): " + (n < 0 ? std::strerror(errno) : "end of file"));
        done += uint64_t(n);
      }
    }
    if (options_.drop_cache)
      ::posix_fadvise(fds_[f], off_t(offset), off_t(bytes), POSIX_FADV_DONTNEED);
    filled += bytes;
  }
  if (options_.test_read_delay_ms > 0)
    std::this_thread::sleep_for(
        std::chrono::duration<double, std::milli>(options_.test_read_delay_ms));
  if (options_.verify && sample_checksum(out.data.get(), out.size) != shard.checksums[i])
    throw RuntimeError("data.verify: sample " + std::to_string(sample) + " in " + shard.path +
                       " (bytes " + std::to_string(shard.offsets[i]) + "+" +
                       std::to_string(length) + ") fails its checksum");
}

void DatasetBatchSource::next(int64_t step, Batch& batch) {
  // Keep `prefetch` batches queued ahead of this one.
  if (scheduled_until_ < step) scheduled_until_ = step - 1;
  const int64_t ahead = std::min(step + std::max(0, options_.prefetch), options_.last_step);
  while (scheduled_until_ < std::max(step, ahead)) schedule(++scheduled_until_);
  Pending ready;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_.at(step).remaining == 0; });
    ready = std::move(pending_.at(step));
    pending_.erase(step);
  }
  if (!ready.error.empty()) throw RuntimeError(ready.error);

  const size_t per_sample = size_t(model_.seq) * model_.hidden;
  batch.samples = share_.samples;
  batch.first_global_sample = (step - 1) * model_.global_batch + share_.first;
  batch.inputs.resize(per_sample * share_.samples);
  batch.targets.resize(per_sample * share_.samples);
  std::vector<unsigned char>& folded = folded_;
  folded.resize(per_sample);
  for (int i = 0; i < share_.samples; ++i) {
    // Every byte read reaches the compute: a sample longer than the input is XOR-folded onto
    // it, a shorter one repeated. Bytes map onto the grid k/128 - 1, exact in fp32.
    const unsigned char* bytes = ready.samples[size_t(i)].data.get();
    const size_t length = ready.samples[size_t(i)].size;
    for (size_t k = 0; k < per_sample; ++k) folded[k] = bytes[k % length];
    size_t k = per_sample;
    if (per_sample % 8 == 0) {
      // Whole blocks in 64-bit words: a few GB/s, where bytes would make this thread the
      // bottleneck of a storage-bound run.
      std::vector<uint64_t>& words = fold_words_;
      words.resize(per_sample / 8);
      std::memcpy(words.data(), folded.data(), per_sample);
      for (; k + per_sample <= length; k += per_sample)
        for (size_t w = 0; w < words.size(); ++w) {
          uint64_t word;
          std::memcpy(&word, bytes + k + 8 * w, 8);
          words[w] ^= word;
        }
      std::memcpy(folded.data(), words.data(), per_sample);
    }
    for (; k + per_sample <= length; k += per_sample)
      for (size_t j = 0; j < per_sample; ++j) folded[j] ^= bytes[k + j];
    for (; k < length; ++k) folded[k % per_sample] ^= bytes[k];
    float* in = batch.inputs.data() + per_sample * i;
    for (size_t k = 0; k < per_sample; ++k) in[k] = float(folded[k]) * 0x1p-7f - 1.0f;
    philox::fill_uniform(batch.targets.data() + per_sample * i, per_sample, seed_, philox::kTargets,
                         uint64_t(ready.ids[size_t(i)]), 1.0f);
  }
  std::lock_guard<std::mutex> guard(mutex_);
  for (SampleBytes& b : ready.samples) spare_.push_back(std::move(b));
}

LoaderStats DatasetBatchSource::stats() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return stats_;
}

}  // namespace tp
