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
void fill_sample(const DatasetSpec& spec, int64_t sample, unsigned char* out, int64_t length);
uint64_t sample_checksum(const unsigned char* bytes, size_t length);

// Bytes of all samples (the lengths alone decide it; no content is generated).
uint64_t dataset_bytes(const DatasetSpec& spec);

// Shard f holds samples [shard_first(f), shard_first(f + 1)).
int64_t shard_first(const DatasetSpec& spec, int shard);
std::string shard_name(const DatasetSpec& spec, int shard);
std::string shard_index_name(int shard);  // raw: the per-sample index beside the data

nlohmann::json index_json(const DatasetSpec& spec, const std::vector<uint64_t>& shard_bytes);
// Reads <dir>/index.json into a spec; UsageError naming the file when it is missing or malformed.
DatasetSpec read_index(const std::string& dir);
// "" when `existing` describes the same dataset as `wanted`, else the first difference.
std::string index_difference(const DatasetSpec& existing, const DatasetSpec& wanted);

// Writes shard f (its data and index), fsynced. Returns its data bytes.
uint64_t write_shard(const DatasetSpec& spec, int shard);
// Reads shard f's per-sample index (offsets, lengths, checksums) and, for hdf5, translates the
// offsets into file offsets through the chunk layout (H5Dget_chunk_info), so readers need no
// HDF5 call: they pread. RuntimeError naming the file when it cannot.
ShardIndex load_shard_index(const DatasetSpec& spec, int shard);

}  // namespace tp
