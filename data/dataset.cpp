#include "data/dataset.h"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "common/errors.h"
#include "common/files.h"
#include "common/hdf5_lock.h"
#include "common/hdf5_util.h"
#include "common/number_text.h"
#include "common/philox.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr hsize_t kChunkBytes = hsize_t(1) << 20;

using h5::Handle;

void check(bool ok, const std::string& what) {
  if (!ok) throw RuntimeError(what);
}

// The samples of a shard, generated in buffers of about 8 MiB and handed to `sink` in order.
template <typename Sink>
void generate(const DatasetSpec& spec, int shard, Sink sink, std::vector<uint64_t>& offsets,
              std::vector<uint64_t>& lengths, std::vector<uint64_t>& checksums) {
  const int64_t first = shard_first(spec, shard), last = shard_first(spec, shard + 1);
  std::vector<unsigned char> buffer;
  uint64_t offset = 0;
  for (int64_t s = first; s < last; ++s) {
    const int64_t length = sample_length(spec, s);
    const size_t at = buffer.size();
    buffer.resize(at + size_t(length));
    fill_sample(spec, s, buffer.data() + at, length);
    offsets.push_back(offset);
    lengths.push_back(uint64_t(length));
    checksums.push_back(sample_checksum(buffer.data() + at, size_t(length)));
    offset += uint64_t(length);
    if (buffer.size() >= (size_t(8) << 20)) {
      sink(buffer);
      buffer.clear();
    }
  }
  if (!buffer.empty()) sink(buffer);
}

uint64_t shard_bytes(const DatasetSpec& spec, int shard) {
  uint64_t bytes = 0;
  for (int64_t s = shard_first(spec, shard); s < shard_first(spec, shard + 1); ++s)
    bytes += uint64_t(sample_length(spec, s));
  return bytes;
}

void write_u64_dataset(hid_t file, const char* name, const std::vector<uint64_t>& values,
                       const std::string& path) {
  const hsize_t dims[1] = {values.size()};
  Handle space{H5Screate_simple(1, dims, nullptr), H5Sclose};
  Handle set{H5Dcreate2(file, name, H5T_STD_U64LE, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
             H5Dclose};
  check(set.id >= 0, path + ": cannot create dataset " + name);
  if (!values.empty())
    check(H5Dwrite(set.id, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0,
          path + ": cannot write dataset " + name);
}

}  // namespace

int64_t sample_length(const DatasetSpec& spec, int64_t sample) {
  if (spec.spread <= 0) return spec.sample_bytes;
  const philox::Counter bits =
      philox::block_bits(spec.seed, philox::kSampleLength, uint64_t(sample), 0);
  const double u = double(philox::to_symmetric_unit(bits[0]));
  return std::max<int64_t>(1, std::llround(double(spec.sample_bytes) * (1.0 + spec.spread * u)));
}

int64_t max_sample_length(const DatasetSpec& spec) {
  return std::max<int64_t>(1, std::llround(double(spec.sample_bytes) * (1.0 + spec.spread)));
}

void fill_sample(const DatasetSpec& spec, int64_t sample, unsigned char* out, int64_t length) {
  for (int64_t block = 0; block * 16 < length; ++block) {
    const philox::Counter bits =
        philox::block_bits(spec.seed, philox::kSampleBytes, uint64_t(sample), uint64_t(block));
    unsigned char word[16];
    std::memcpy(word, bits.v, sizeof word);
    std::memcpy(out + block * 16, word, size_t(std::min<int64_t>(16, length - block * 16)));
  }
}

uint64_t sample_checksum(const unsigned char* bytes, size_t length) {
  return XXH3_64bits(bytes, length);
}

uint64_t dataset_bytes(const DatasetSpec& spec) {
  uint64_t bytes = 0;
  for (int f = 0; f < spec.files; ++f) bytes += shard_bytes(spec, f);
  return bytes;
}

uint64_t dataset_bytes_on_storage(const DatasetSpec& spec) {
  constexpr uint64_t kBlock = 4096, kHdf5Metadata = 64 << 10, kIndexPerShard = 128;
  uint64_t bytes = kBlock + kIndexPerShard * uint64_t(spec.files);  // index.json
  for (int f = 0; f < spec.files; ++f) {
    const uint64_t samples = uint64_t(shard_first(spec, f + 1) - shard_first(spec, f));
    uint64_t data = samples * uint64_t(spec.sample_bytes);
    if (spec.format == "hdf5") {
      // Chunks are allocated whole, up front.
      const uint64_t chunk = std::min<uint64_t>(kChunkBytes, std::max<uint64_t>(data, 1));
      data = (data + chunk - 1) / chunk * chunk + kHdf5Metadata;
    }
    bytes += data + 24 * samples + 2 * kBlock;  // each of the two files ends in a partial block
  }
  return bytes;
}

int64_t shard_first(const DatasetSpec& spec, int shard) {
  return spec.samples * int64_t(shard) / int64_t(spec.files);
}

std::string shard_index_name(int shard) {
  char name[32];
  std::snprintf(name, sizeof name, "shard-%05d.idx", shard);
  return name;
}

std::string shard_name(const DatasetSpec& spec, int shard) {
  char name[32];
  std::snprintf(name, sizeof name, "shard-%05d.%s", shard, spec.format == "hdf5" ? "h5" : "bin");
  return name;
}

json index_json(const DatasetSpec& spec, const std::vector<uint64_t>& shard_bytes) {
  json shards = json::array();
  uint64_t total = 0;
  for (int f = 0; f < spec.files; ++f) {
    shards.push_back({{"name", shard_name(spec, f)},
                      {"first_sample", shard_first(spec, f)},
                      {"samples", shard_first(spec, f + 1) - shard_first(spec, f)},
                      {"bytes", shard_bytes[size_t(f)]}});
    total += shard_bytes[size_t(f)];
  }
  return {{"format", kDatasetIndexFormat},
          {"data_format", spec.format},
          {"files", spec.files},
          {"samples", spec.samples},
          {"sample_bytes", spec.sample_bytes},
          {"spread", spec.spread},
          {"seed", spec.seed},
          {"total_bytes", total},
          {"shards", shards}};
}

std::string index_difference(const DatasetSpec& a, const DatasetSpec& b) {
  if (a.format != b.format) return "data.format " + a.format + " vs " + b.format;
  if (a.files != b.files)
    return "data.files " + std::to_string(a.files) + " vs " + std::to_string(b.files);
  if (a.samples != b.samples)
    return "data.samples " + std::to_string(a.samples) + " vs " + std::to_string(b.samples);
  if (a.sample_bytes != b.sample_bytes)
    return "data.sample_bytes " + std::to_string(a.sample_bytes) + " vs " +
           std::to_string(b.sample_bytes);
  if (a.spread != b.spread)
    return "data.spread " + exact_number(a.spread) + " vs " + exact_number(b.spread);
  if (a.seed != b.seed)
    return "train.seed " + std::to_string(a.seed) + " vs " + std::to_string(b.seed);
  return "";
}

uint64_t write_shard(const DatasetSpec& spec, int shard) {
  const std::string path = spec.dir + "/" + shard_name(spec, shard);
  std::vector<uint64_t> offsets, lengths, checksums;
  if (spec.format == "raw") {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    check(fd >= 0, "cannot create " + path + ": " + std::strerror(errno));
    generate(
        spec, shard,
        [&](const std::vector<unsigned char>& bytes) {
          write_all(fd, bytes.data(), bytes.size(), path);
        },
        offsets, lengths, checksums);
    check(::fsync(fd) == 0, "fsync " + path + ": " + std::strerror(errno));
    ::close(fd);
    const std::string index = spec.dir + "/" + shard_index_name(shard);
    std::vector<uint64_t> records;
    for (size_t i = 0; i < offsets.size(); ++i)
      records.insert(records.end(), {offsets[i], lengths[i], checksums[i]});
    const int ifd = ::open(index.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    check(ifd >= 0, "cannot create " + index + ": " + std::strerror(errno));
    write_all(ifd, records.data(), records.size() * sizeof(uint64_t), index);
    check(::fsync(ifd) == 0, "fsync " + index);
    ::close(ifd);
    return offsets.empty() ? 0 : offsets.back() + lengths.back();
  }

  const uint64_t total = shard_bytes(spec, shard);
  {
    std::lock_guard<std::mutex> guard(hdf5_lock());
    Handle file{H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose};
    check(file.id >= 0, "cannot create " + path);
    const hsize_t dims[1] = {std::max<hsize_t>(total, 1)};
    const hsize_t chunk[1] = {std::min(kChunkBytes, dims[0])};
    Handle space{H5Screate_simple(1, dims, nullptr), H5Sclose};
    Handle create{H5Pcreate(H5P_DATASET_CREATE), H5Pclose};
    H5Pset_chunk(create.id, 1, chunk);
    H5Pset_fill_time(create.id, H5D_FILL_TIME_NEVER);
    H5Pset_alloc_time(create.id, H5D_ALLOC_TIME_EARLY);  // chunks in order, next to each other
    Handle data{
        H5Dcreate2(file.id, "data", H5T_STD_U8LE, space.id, H5P_DEFAULT, create.id, H5P_DEFAULT),
        H5Dclose};
    check(data.id >= 0, path + ": cannot create dataset data");
    hsize_t written = 0;
    generate(
        spec, shard,
        [&](const std::vector<unsigned char>& bytes) {
          const hsize_t start[1] = {written}, count[1] = {bytes.size()};
          Handle file_space{H5Dget_space(data.id), H5Sclose};
          H5Sselect_hyperslab(file_space.id, H5S_SELECT_SET, start, nullptr, count, nullptr);
          Handle memory{H5Screate_simple(1, count, nullptr), H5Sclose};
          check(H5Dwrite(data.id, H5T_NATIVE_UCHAR, memory.id, file_space.id, H5P_DEFAULT,
                         bytes.data()) >= 0,
                path + ": cannot write samples");
          written += bytes.size();
        },
        offsets, lengths, checksums);
    write_u64_dataset(file.id, "offsets", offsets, path);
    write_u64_dataset(file.id, "lengths", lengths, path);
    write_u64_dataset(file.id, "checksums", checksums, path);
    check(H5Fflush(file.id, H5F_SCOPE_GLOBAL) >= 0, "cannot flush " + path);
  }
  fsync_path(path);
  return total;
}

}  // namespace tp
