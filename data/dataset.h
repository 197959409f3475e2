#pragma once
// A synthetic dataset on storage (`trainproof prepare-data`). Sample i's length and bytes are
// functions of (seed, i), so the content needs no storage to be checked, and every sample
// carries an xxh3-64 checksum in its shard's index. Samples are split into `files` shards of
// consecutive samples; each shard is either
//   raw:  shard-NNNNN.bin (the samples back to back) + shard-NNNNN.idx (offset, length, checksum
//         per sample, little-endian u64), or
//   hdf5: shard-NNNNN.h5 with a chunked uint8 dataset `data` and u64 datasets `offsets`,
//         `lengths` and `checksums`.
// index.json at the top records the shape; the same parameters make `prepare-data` a no-op.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tp {

// Bounds on a dataset's shape, for the data.* options and for index.json alike.
inline constexpr int kMaxDatasetFiles = 100000;                  // shard-NNNNN: five digits
inline constexpr int64_t kMaxDatasetSamples = int64_t(1) << 32;  // the loader keeps 32 B each
inline constexpr int64_t kMaxSampleBytes = int64_t(1) << 30;     // 1 GiB
inline constexpr double kMaxSpread = 0.99;
inline constexpr const char* kDatasetIndexFormat = "trainproof.dataset/1";  // index.json "format"

struct DatasetSpec {
  std::string dir;
  std::string format = "raw";  // raw or hdf5
  int files = 4;
  int64_t samples = 1024;
  int64_t sample_bytes = 65536;
  double spread = 0.0;  // lengths vary uniformly within sample_bytes * (1 +- spread)
  uint64_t seed = 0;
};

// What each shard holds: its samples and, per sample, where it is and its checksum.
struct ShardIndex {
  std::string path;
  int64_t first_sample = 0;
  std::vector<uint64_t> offsets, lengths, checksums;  // offsets within the sample bytes
  // hdf5: the file offset of each chunk of `data`; a sample's bytes are read chunk piece by
  // piece. Empty for raw, where the offsets are file offsets.
  uint64_t chunk_bytes = 0;
  std::vector<uint64_t> chunk_address;
};

int64_t sample_length(const DatasetSpec& spec, int64_t sample);
// The longest sample the spec allows: sample_bytes * (1 + spread), rounded.
int64_t max_sample_length(const DatasetSpec& spec);
void fill_sample(const DatasetSpec& spec, int64_t sample, unsigned char* out, int64_t length);
uint64_t sample_checksum(const unsigned char* bytes, size_t length);

// Bytes of all samples (the lengths alone decide it; no content is generated).
uint64_t dataset_bytes(const DatasetSpec& spec);
// What prepare-data will write, without visiting every sample: data.samples times
// data.sample_bytes (exact when data.spread is 0; lengths spread evenly about it otherwise), 24
// bytes of index per sample, and per shard what its format and the filesystem's blocks add.
uint64_t dataset_bytes_on_storage(const DatasetSpec& spec);

// Shard f holds samples [shard_first(f), shard_first(f + 1)).
int64_t shard_first(const DatasetSpec& spec, int shard);
std::string shard_name(const DatasetSpec& spec, int shard);
std::string shard_index_name(int shard);  // raw: the per-sample index beside the data

nlohmann::json index_json(const DatasetSpec& spec, const std::vector<uint64_t>& shard_bytes);
// Reads <dir>/index.json into a spec. UsageError naming the file when it is missing, not a
// regular file or not JSON, and naming the field and its value when one is missing, of the wrong
// type or out of the bounds above.
DatasetSpec read_index(const std::string& dir);
// "" when `existing` describes the same dataset as `wanted`, else the first difference.
std::string index_difference(const DatasetSpec& existing, const DatasetSpec& wanted);

// Writes shard f (its data and index), fsynced. Returns its data bytes.
uint64_t write_shard(const DatasetSpec& spec, int shard);
// Reads shard f's per-sample index (offsets, lengths, checksums) and, for hdf5, translates the
// offsets into file offsets through the chunk layout (H5Dget_chunk_info), so readers need no
// HDF5 call: they pread. Every value is checked against the spec and the shard's real size: a
// damaged or truncated shard is a UsageError naming the file, the sample and the value, before
// anything reads a sample.
ShardIndex load_shard_index(const DatasetSpec& spec, int shard);

// "" when the shape can be read at all (1 <= files <= samples, the bounds above), else why not.
std::string shape_problem(const DatasetSpec& spec);

// A dataset file opened for reading: only a regular file is ever opened. The open uses
// O_NONBLOCK, so that a FIFO (which would wait for a writer) or a device never blocks it, and
// fstat must then say S_ISREG; O_NONBLOCK is cleared again. Anything else there, or nothing, is a
// UsageError naming the path; other failures are RuntimeError with the errno text. `extra_flags`
// (O_DIRECT) join the open.
struct RegularFile {
  int fd = -1;
  uint64_t size = 0;
};
RegularFile open_regular_file(const std::string& path, int extra_flags = 0);

}  // namespace tp
