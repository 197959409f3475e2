// The dataset batch source: reader threads and prefetch over a small dataset written by
// prepare-data's shard writer. Each batch is checked by value against samples generated here,
// independently of the files, and the loader's counters against the samples it must have read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/errors.h"
#include "common/philox.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "tests/unit/fifo_guard.h"
#include "tests/unit/one_rank.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr uint64_t kTrainSeed = 7;  // the order and the targets; the content has the spec's seed
constexpr int64_t kGlobalBatch = 8;
constexpr int64_t kSteps = 7;  // 40 samples are 5 steps: the run crosses into a second epoch
const tp::ModelSpec kModel{1, 8, 4, kGlobalBatch};
constexpr size_t kPerSample = 4 * 8;  // seq * hidden

struct Expected {
  std::vector<float> inputs, targets;
};

class Loader : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    spec.dir = tp::test::fresh_dir("loader-" + GetParam() + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    spec.format = GetParam();
    spec.files = 3;
    spec.samples = 40;
    spec.sample_bytes = 3000;
    spec.spread = 0.5;
    spec.seed = 99;
    for (int f = 0; f < spec.files; ++f) tp::write_shard(spec, f);
    for (int64_t id = 0; id < spec.samples; ++id) expected[id] = reference(id);
  }
  void TearDown() override { fs::remove_all(spec.dir); }

  // What the step should see for sample `id`: its bytes XOR-folded onto one sample's inputs
  // (every sample here is longer than an input) on the grid k/128 - 1, and Philox targets.
  Expected reference(int64_t id) const {
    const int64_t length = tp::sample_length(spec, id);
    std::vector<unsigned char> bytes(size_t(length), 0);
    tp::fill_sample(spec, id, bytes.data(), length);
    std::vector<unsigned char> folded(kPerSample, 0);
    for (size_t j = 0; j < bytes.size(); ++j) folded[j % kPerSample] ^= bytes[j];
    Expected e;
    for (unsigned char b : folded) e.inputs.push_back(float(b) / 128.0f - 1.0f);
    e.targets.resize(kPerSample);
    tp::philox::fill_uniform(e.targets.data(), kPerSample, kTrainSeed, tp::philox::kTargets,
                             uint64_t(id), 1.0f);
    return e;
  }

  tp::LoaderOptions options(int readers, int prefetch) const {
    tp::LoaderOptions o;
    o.readers = readers;
    o.prefetch = prefetch;
    o.verify = true;
    o.last_step = kSteps;
    return o;
  }

  // The sample whose inputs slot `i` of `batch` holds, found among all samples by value: the
  // loader's own order is not used to decide what it read. -1 when none or several match.
  int64_t identify(const tp::Batch& batch, int i) const {
    const std::vector<float> slot(batch.inputs.begin() + i * kPerSample,
                                  batch.inputs.begin() + (i + 1) * kPerSample);
    int64_t found = -1;
    for (const auto& [id, e] : expected)
      if (e.inputs == slot) {
        if (found >= 0) return -1;
        found = id;
      }
    return found;
  }

  int shard_of(int64_t id) const {
    int f = 0;
    while (tp::shard_first(spec, f + 1) <= id) ++f;
    return f;
  }

  std::vector<std::vector<float>> read_steps(tp::DatasetBatchSource& source) {
    std::vector<std::vector<float>> all;
    tp::Batch batch;
    for (int64_t s = 1; s <= kSteps; ++s) {
      source.next(s, batch);
      all.push_back(batch.inputs);
      all.push_back(batch.targets);
    }
    return all;
  }

  tp::DatasetSpec spec;
  std::map<int64_t, Expected> expected;
};

INSTANTIATE_TEST_SUITE_P(Formats, Loader, ::testing::Values("raw", "hdf5"),
                         [](const auto& info) { return info.param; });

TEST_P(Loader, BatchesHoldTheShuffledSamplesAndEachEpochReadsEverySampleOnce) {
  std::multiset<int64_t> first_epoch;
  for (int rank = 0; rank < 2; ++rank) {
    const tp::BatchShare share = tp::batch_share(kGlobalBatch, 2, rank);
    tp::DatasetBatchSource source(spec, kModel, share, kTrainSeed, options(3, 2));
    tp::EpochOrder order(spec.samples, kTrainSeed);
    tp::Batch batch;
    uint64_t bytes = 0;
    std::set<int> shards;
    for (int64_t s = 1; s <= kSteps; ++s) {
      source.next(s, batch);
      ASSERT_EQ(batch.samples, 4);
      EXPECT_EQ(batch.first_global_sample, (s - 1) * kGlobalBatch + share.first);
      ASSERT_EQ(batch.inputs.size(), 4 * kPerSample);
      for (int i = 0; i < batch.samples; ++i) {
        const int64_t id = identify(batch, i);
        ASSERT_GE(id, 0) << "rank " << rank << " step " << s << " slot " << i
                         << ": the inputs are no sample's fold";
        EXPECT_EQ(id, order.sample_at((s - 1) * kGlobalBatch + share.first + i))
            << "rank " << rank << " step " << s << " slot " << i;
        const std::vector<float> targets(batch.targets.begin() + i * kPerSample,
                                         batch.targets.begin() + (i + 1) * kPerSample);
        EXPECT_EQ(targets, expected.at(id).targets);
        if (s <= 5) first_epoch.insert(id);
        bytes += uint64_t(tp::sample_length(spec, id));
        shards.insert(shard_of(id));
      }
    }
    const tp::LoaderStats stats = source.stats();
    EXPECT_EQ(stats.samples_read, kSteps * 4) << "rank " << rank;
    EXPECT_EQ(stats.bytes_read, bytes) << "rank " << rank;
    EXPECT_EQ(stats.shards_read, std::vector<int>(shards.begin(), shards.end()));
    EXPECT_GT(stats.last_read_s, stats.first_read_s);
  }
  std::multiset<int64_t> every_sample;
  for (int64_t id = 0; id < spec.samples; ++id) every_sample.insert(id);
  EXPECT_EQ(first_epoch, every_sample);
}

TEST_P(Loader, ReadersAndPrefetchChangeNothingButTheTimings) {
  const tp::BatchShare share{0, int(kGlobalBatch)};
  tp::DatasetBatchSource serial(spec, kModel, share, kTrainSeed, options(1, 0));
  tp::DatasetBatchSource parallel(spec, kModel, share, kTrainSeed, options(4, 3));
  EXPECT_EQ(read_steps(serial), read_steps(parallel));
  EXPECT_EQ(serial.stats().samples_read, parallel.stats().samples_read);
  EXPECT_EQ(serial.stats().bytes_read, parallel.stats().bytes_read);
}

TEST_P(Loader, PrefetchNeverReadsPastTheLastStep) {
  const tp::BatchShare share{0, int(kGlobalBatch)};
  tp::LoaderOptions o = options(2, 4);
  o.last_step = 2;
  tp::DatasetBatchSource source(spec, kModel, share, kTrainSeed, o);
  tp::Batch batch;
  source.next(1, batch);
  source.next(2, batch);
  // Reads past step 2, had any been queued, would land while the readers are given time here.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(source.stats().samples_read, 2 * kGlobalBatch);
}

TEST_P(Loader, VerificationNamesTheFileAndSampleOfAFlippedByte) {
  const tp::BatchShare share{0, int(kGlobalBatch)};
  const int64_t victim = tp::EpochOrder(spec.samples, kTrainSeed).sample_at(2);  // step 1, slot 2
  const int f = shard_of(victim);
  const tp::ShardIndex index = tp::load_shard_index(spec, f);
  const size_t i = size_t(victim - index.first_sample);
  // The file offset of the sample's 11th byte: raw offsets are file offsets; HDF5 ones go
  // through the chunk addresses.
  const uint64_t logical = index.offsets[i] + 10;
  const uint64_t at = index.chunk_bytes == 0 ? logical
                                             : index.chunk_address[logical / index.chunk_bytes] +
                                                   logical % index.chunk_bytes;
  {
    std::fstream file(index.path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(std::streamoff(at));
    const char byte = char(file.get() ^ 0x20);
    file.seekp(std::streamoff(at));
    file.put(byte);
  }
  {
    tp::DatasetBatchSource source(spec, kModel, share, kTrainSeed, options(3, 2));
    tp::Batch batch;
    try {
      source.next(1, batch);
      FAIL() << "data.verify let a flipped byte through";
    } catch (const tp::RuntimeError& e) {
      EXPECT_EQ(std::string(e.what()),
                "data.verify: sample " + std::to_string(victim) + " in " + index.path + " (bytes " +
                    std::to_string(index.offsets[i]) + "+" + std::to_string(index.lengths[i]) +
                    ") fails its checksum");
    }
  }
  // Without verification the byte is read, and it reaches the inputs: only that sample differs.
  tp::LoaderOptions unverified = options(3, 2);
  unverified.verify = false;
  tp::DatasetBatchSource source(spec, kModel, share, kTrainSeed, unverified);
  tp::Batch batch;
  source.next(1, batch);
  EXPECT_EQ(identify(batch, 2), -1);
  const std::vector<float> slot(batch.inputs.begin() + 2 * kPerSample,
                                batch.inputs.begin() + 3 * kPerSample);
  const std::vector<float>& clean = expected.at(victim).inputs;
  int differing = 0;
  for (size_t k = 0; k < kPerSample; ++k) differing += slot[k] != clean[k];
  EXPECT_EQ(differing, 1);
  EXPECT_EQ(slot[10], clean[10] + (slot[10] > clean[10] ? 0x20 : -0x20) / 128.0f);
  for (int other : {0, 1, 3}) EXPECT_GE(identify(batch, other), 0);
}

TEST_P(Loader, ARankShiftedLoaderReadsOnlyItsShards) {
  tp::LoaderOptions o = options(2, 1);
  o.shards = {1};
  o.last_step = 3;
  const tp::BatchShare share{0, 4};
  tp::DatasetBatchSource source(spec, kModel, share, kTrainSeed, o);
  std::set<int64_t> seen;
  tp::Batch batch;
  for (int64_t s = 1; s <= 3; ++s) {
    source.next(s, batch);
    for (int i = 0; i < 4; ++i) {
      const int64_t id = identify(batch, i);
      EXPECT_EQ(shard_of(id), 1) << "sample " << id;
      seen.insert(id);
    }
  }
  EXPECT_EQ(seen.size(), 12u) << "13 samples in shard 1: no repeat within the epoch";
  EXPECT_EQ(source.stats().shards_read, std::vector<int>{1});
}

TEST_P(Loader, AFifoInPlaceOfAShardIsRefusedWithoutBlocking) {
  const std::string fifo = spec.dir + "/" + tp::shard_name(spec, 1);
  tp::test::make_fifo_at(fifo);
  const tp::DatasetSpec copy = spec;
  const tp::LoaderOptions o = options(2, 1);
  const tp::test::FifoOutcome outcome = tp::test::call_beside_fifo(fifo, [copy, o] {
    tp::DatasetBatchSource source(copy, kModel, {0, int(kGlobalBatch)}, kTrainSeed, o);
  });
  ASSERT_FALSE(outcome.blocked) << "the loader blocked on a FIFO";
  EXPECT_TRUE(outcome.usage_error) << outcome.message;
  EXPECT_THAT(outcome.message, HasSubstr(fifo));
  EXPECT_THAT(outcome.message, HasSubstr("not a regular file"));
}

TEST_P(Loader, ATruncatedShardIsRefusedBeforeTheFirstRead) {
  const std::string shard = spec.dir + "/" + tp::shard_name(spec, 2);
  fs::resize_file(shard, fs::file_size(shard) - 1);
  try {
    tp::DatasetBatchSource source(spec, kModel, {0, int(kGlobalBatch)}, kTrainSeed, options(2, 1));
    FAIL() << "a truncated shard was accepted";
  } catch (const tp::UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr(shard));
  }
}

TEST_P(Loader, ReadersOutOfRangeAreRefusedNamingTheBound) {
  for (int readers : {0, -1, tp::kMaxDataReaders + 1, 100000}) {
    try {
      tp::DatasetBatchSource source(spec, kModel, {0, int(kGlobalBatch)}, kTrainSeed,
                                    options(readers, 1));
      ADD_FAILURE() << "data.readers=" << readers << " was accepted";
    } catch (const tp::UsageError& e) {
      EXPECT_THAT(e.what(), HasSubstr("data.readers=" + std::to_string(readers)));
      EXPECT_THAT(e.what(), HasSubstr(std::to_string(tp::kMaxDataReaders)));
    }
  }
}

TEST(LoaderErrors, AShardTruncatedDuringTheRunNamesTheFileAndSample) {
  tp::DatasetSpec spec;
  spec.dir = tp::test::fresh_dir("loader-short-shard");
  spec.files = 2;
  spec.samples = 16;
  spec.sample_bytes = 512;
  for (int f = 0; f < spec.files; ++f) tp::write_shard(spec, f);
  const std::string shard = spec.dir + "/" + tp::shard_name(spec, 1);
  tp::LoaderOptions o;
  o.readers = 2;
  o.prefetch = 0;
  o.last_step = 1;
  // The whole dataset in one batch, so shard 1's samples are all asked for.
  tp::DatasetBatchSource source(spec, {1, 8, 4, 16}, {0, 16}, kTrainSeed, o);
  // Checked whole when the loader started; shortened since.
  fs::resize_file(shard, 100);
  tp::Batch batch;
  try {
    source.next(1, batch);
    FAIL() << "a short shard read went unnoticed";
  } catch (const tp::RuntimeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("read " + shard + " (sample "));
    EXPECT_THAT(e.what(), HasSubstr("end of file"));
  }
  fs::remove_all(spec.dir);
}

// A dataset of two 1 GiB samples in a sparse shard: within every bound, but a deep prefetch of
// them would pin more memory than the host has.
tp::DatasetSpec giant_samples_dataset(const std::string& name) {
  tp::DatasetSpec spec;
  spec.dir = tp::test::fresh_dir(name);
  spec.files = 1;
  spec.samples = 2;
  spec.sample_bytes = int64_t(1) << 30;
  const uint64_t length = uint64_t(spec.sample_bytes);
  const std::vector<uint64_t> records{0, length, 0, length, length, 0};
  std::ofstream(spec.dir + "/" + tp::shard_index_name(0), std::ios::binary)
      .write(reinterpret_cast<const char*>(records.data()), std::streamsize(records.size() * 8));
  std::ofstream(spec.dir + "/" + tp::shard_name(spec, 0)).close();
  fs::resize_file(spec.dir + "/" + tp::shard_name(spec, 0), 2 * length);
  return spec;
}

TEST(LoaderErrors, BuffersBeyondTheHostsMemoryAreRefusedBeforeAllocation) {
  const tp::DatasetSpec spec = giant_samples_dataset("loader-giant-samples");
  tp::LoaderOptions o;
  o.readers = 1;
  o.prefetch = 1024;
  o.last_step = 1;
  try {
    tp::DatasetBatchSource source(spec, {1, 8, 4, 8}, {0, 8}, kTrainSeed, o);
    FAIL() << "1025 batches of 1 GiB samples were accepted";
  } catch (const tp::UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("data.prefetch=1024"));
    EXPECT_THAT(e.what(), HasSubstr(std::to_string(uint64_t(1025) * 8 << 30)));
  }
  fs::remove_all(spec.dir);
}

#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
// Reader threads that cannot all start (a cgroup's pids.max, here an address-space limit that
// leaves room for a few stacks) end in an error naming data.readers, not in std::terminate.
void start_readers_under_a_memory_limit(const std::string& dir) {
  tp::DatasetSpec spec;
  spec.dir = dir;
  spec.files = 1;
  spec.samples = 4;
  spec.sample_bytes = 64;
  tp::write_shard(spec, 0);
  std::ifstream status("/proc/self/status");
  uint64_t mapped_kib = 0;
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmSize:", 0) == 0) mapped_kib = std::stoull(line.substr(7));
  const rlimit limit{(mapped_kib + 64 * 1024) * 1024, (mapped_kib + 64 * 1024) * 1024};
  setrlimit(RLIMIT_AS, &limit);
  tp::LoaderOptions o;
  o.readers = tp::kMaxDataReaders;
  o.last_step = 1;
  try {
    tp::DatasetBatchSource source(spec, {1, 8, 4, 4}, {0, 4}, kTrainSeed, o);
    std::fprintf(stderr, "all %d readers started\n", o.readers);
    std::_Exit(0);
  } catch (const tp::RuntimeError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::_Exit(tp::kExitRuntime);
  }
}

TEST(LoaderErrors, ReaderThreadsThatCannotStartAreAnErrorNotATermination) {
  const std::string dir = tp::test::fresh_dir("loader-thread-limit");
  EXPECT_EXIT(start_readers_under_a_memory_limit(dir), ::testing::ExitedWithCode(tp::kExitRuntime),
              "data.readers=" + std::to_string(tp::kMaxDataReaders) + ": only [0-9]+ reader");
}
#endif

}  // namespace
