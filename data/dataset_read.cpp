// Reading a dataset back: index.json and each shard's per-sample index, every value checked
// before the loader reads a sample (docs/data.md, "What is checked before the first step").
#include <fcntl.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>

#include "common/errors.h"
#include "common/files.h"
#include "common/hdf5_lock.h"
#include "common/hdf5_util.h"
#include "common/json_depth.h"
#include "data/dataset.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using h5::Handle;
using nlohmann::json;

constexpr uint64_t kMaxIndexJsonBytes = 64 << 20;
constexpr uint64_t kRecordBytes = 3 * sizeof(uint64_t);  // raw .idx: offset, length, checksum

// Damage in a dataset file is bad input from the user, as a bad option is: exit 2.
void refuse(bool ok, const std::string& why) {
  if (!ok) throw UsageError(why);
}

void read_exactly(int fd, void* out, uint64_t bytes, const std::string& path) {
  uint64_t done = 0;
  while (done < bytes) {
    const ssize_t n =
        ::pread(fd, static_cast<char*>(out) + done, size_t(bytes - done), off_t(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw RuntimeError("read " + path + ": " + std::strerror(errno));
    refuse(n > 0, path + " ended after " + std::to_string(done) + " of its " +
                      std::to_string(bytes) + " bytes while it was read");
    done += uint64_t(n);
  }
}

// The fields of index.json, each checked for presence, JSON type and range.
class IndexFields {
 public:
  IndexFields(const json& index, const std::string& path) : index_(index), path_(path) {}

  int64_t integer(const char* name, int64_t low, int64_t high) const {
    const json& value = at(name);
    const std::string expected =
        "an integer in [" + std::to_string(low) + ", " + std::to_string(high) + "]";
    if (value.is_number_unsigned()) {  // any integer >= 0 in the JSON text
      const uint64_t number = value.get<uint64_t>();
      if (number > uint64_t(high) || int64_t(number) < low) bad(name, value, expected);
      return int64_t(number);
    }
    if (!value.is_number_integer()) bad(name, value, expected);
    const int64_t number = value.get<int64_t>();
    if (number < low || number > high) bad(name, value, expected);
    return number;
  }
  uint64_t unsigned_integer(const char* name) const {
    const json& value = at(name);
    if (!value.is_number_unsigned())
      bad(name, value,
          "an integer in [0, " + std::to_string(std::numeric_limits<uint64_t>::max()) + "]");
    return value.get<uint64_t>();
  }
  double number(const char* name, double low, double high) const {
    const json& value = at(name);
    const std::string expected =
        "a number in [" + json(low).dump() + ", " + json(high).dump() + "]";
    if (!value.is_number()) bad(name, value, expected);
    const double number = value.get<double>();
    if (!(number >= low && number <= high)) bad(name, value, expected);
    return number;
  }
  std::string text(const char* name, std::initializer_list<const char*> allowed) const {
    const json& value = at(name);
    std::string expected;
    for (const char* a : allowed) {
      if (value.is_string() && value.get<std::string>() == a) return a;
      expected += (expected.empty() ? "" : " or ") + json(a).dump();
    }
    bad(name, value, expected);
  }

 private:
  const json& at(const char* name) const {
    const auto found = index_.find(name);
    if (found == index_.end())
      throw UsageError(path_ + ": field '" + name + "' is missing; rerun prepare-data");
    return *found;
  }
  [[noreturn]] void bad(const char* name, const json& value, const std::string& expected) const {
    throw UsageError(path_ + ": field '" + name + "' must be " + expected + ", got " +
                     value.dump() + "; rerun prepare-data");
  }

  const json& index_;
  const std::string& path_;
};

json parse_index(const std::string& path) {
  const RegularFile file = open_regular_file(path);
  std::string text;
  try {
    refuse(file.size <= kMaxIndexJsonBytes, path + " holds " + std::to_string(file.size) +
                                                " bytes, more than an index ever needs (" +
                                                std::to_string(kMaxIndexJsonBytes) + ")");
    text.resize(size_t(file.size));
    read_exactly(file.fd, text.data(), file.size, path);
  } catch (...) {
    ::close(file.fd);
    throw;
  }
  ::close(file.fd);
  const std::string too_deep = json_depth_problem(text);
  refuse(too_deep.empty(), path + ": " + too_deep + "; rerun prepare-data");
  try {
    json index = json::parse(text);
    refuse(index.is_object(), path + ": not a JSON object (" + std::string(index.type_name()) +
                                  "); rerun prepare-data");
    return index;
  } catch (const json::parse_error& e) {
    throw UsageError(path + ": not valid JSON (at byte " + std::to_string(e.byte) +
                     "); rerun prepare-data");
  }
}

// Every sample's bytes must lie within the shard's `data_bytes`; its length within the spec's.
void check_samples(const DatasetSpec& spec, const ShardIndex& index, uint64_t data_bytes,
                   const std::string& index_path) {
  const uint64_t longest = uint64_t(max_sample_length(spec));
  for (size_t i = 0; i < index.lengths.size(); ++i) {
    const std::string sample = "sample " + std::to_string(index.first_sample + int64_t(i));
    const uint64_t offset = index.offsets[i], length = index.lengths[i];
    refuse(length >= 1 && length <= longest,
           index_path + ": " + sample + " has length " + std::to_string(length) + ", outside [1, " +
               std::to_string(longest) + "] (index.json: sample_bytes " +
               std::to_string(spec.sample_bytes) + ", spread " + json(spec.spread).dump() +
               "); the shard index is damaged");
    refuse(offset <= data_bytes && length <= data_bytes - offset,
           index.path + " holds " + std::to_string(data_bytes) + " bytes of samples, but " +
               sample + " lies at bytes " + std::to_string(offset) + "+" + std::to_string(length) +
               " (" + index_path + "): the shard is truncated or its index damaged");
  }
}

void load_raw_index(const DatasetSpec& spec, int shard, int64_t samples, ShardIndex& index) {
  const RegularFile data = open_regular_file(index.path);
  ::close(data.fd);
  const std::string path = spec.dir + "/" + shard_index_name(shard);
  const RegularFile file = open_regular_file(path);
  std::vector<uint64_t> records;
  try {
    const uint64_t wanted = uint64_t(samples) * kRecordBytes;
    refuse(file.size == wanted, path + " holds " + std::to_string(file.size) + " bytes, but its " +
                                    std::to_string(samples) + " samples need " +
                                    std::to_string(wanted) + " (24 per sample)");
    records.resize(size_t(samples) * 3);
    read_exactly(file.fd, records.data(), wanted, path);
  } catch (...) {
    ::close(file.fd);
    throw;
  }
  ::close(file.fd);
  for (size_t i = 0; i < records.size(); i += 3) {
    index.offsets.push_back(records[i]);
    index.lengths.push_back(records[i + 1]);
    index.checksums.push_back(records[i + 2]);
  }
  check_samples(spec, index, data.size, path);
}

std::vector<uint64_t> read_u64_dataset(hid_t file, const char* name, const std::string& path,
                                       int64_t samples) {
  Handle set{H5Dopen2(file, name, H5P_DEFAULT), H5Dclose};
  refuse(set.id >= 0, path + ": no dataset " + name);
  Handle space{H5Dget_space(set.id), H5Sclose};
  const hssize_t n = H5Sget_simple_extent_npoints(space.id);
  refuse(n == samples, path + ": dataset " + name + " holds " + std::to_string(n) +
                           " values for the shard's " + std::to_string(samples) + " samples");
  std::vector<uint64_t> values(static_cast<size_t>(n));
  refuse(H5Dread(set.id, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0,
         path + ": cannot read dataset " + name);
  return values;
}

// The file offset of each chunk of `data`, each checked to lie whole within the file.
void locate_chunks(hid_t data, uint64_t extent, uint64_t file_bytes, ShardIndex& index) {
  Handle create{H5Dget_create_plist(data), H5Pclose};
  hsize_t chunk = 0;
  refuse(H5Pget_layout(create.id) == H5D_CHUNKED && H5Pget_chunk(create.id, 1, &chunk) == 1 &&
             chunk >= 1 && H5Pget_nfilters(create.id) == 0,
         index.path + ": dataset data is not chunked without filters");
  Handle space{H5Dget_space(data), H5Sclose};
  hsize_t chunks = 0;
  refuse(H5Dget_num_chunks(data, space.id, &chunks) >= 0, index.path + ": no chunk count");
  const uint64_t needed = (extent + chunk - 1) / chunk;
  refuse(chunks == needed, index.path + ": dataset data has " + std::to_string(chunks) +
                               " chunks allocated of the " + std::to_string(needed) +
                               " its samples need");
  std::vector<haddr_t> address(size_t(chunks), HADDR_UNDEF);
  for (hsize_t c = 0; c < chunks; ++c) {
    hsize_t logical[1] = {0}, size = 0;
    unsigned mask = 0;
    haddr_t at = HADDR_UNDEF;
    refuse(H5Dget_chunk_info(data, space.id, c, logical, &mask, &at, &size) >= 0,
           index.path + ": cannot locate chunk " + std::to_string(c));
    const size_t slot = size_t(logical[0] / chunk);
    if (slot < address.size()) address[slot] = at;
  }
  for (size_t c = 0; c < address.size(); ++c) {
    const uint64_t used = std::min<uint64_t>(chunk, extent - c * chunk);
    refuse(address[c] != HADDR_UNDEF && address[c] <= file_bytes && used <= file_bytes - address[c],
           index.path + " holds " + std::to_string(file_bytes) + " bytes, but chunk " +
               std::to_string(c) + " of its samples lies at bytes " +
               (address[c] == HADDR_UNDEF ? std::string("(none)") : std::to_string(address[c])) +
               "+" + std::to_string(used) + ": the shard is truncated or damaged");
  }
  index.chunk_bytes = chunk;
  index.chunk_address.assign(address.begin(), address.end());
}

void load_hdf5_index(const DatasetSpec& spec, int64_t samples, ShardIndex& index) {
  const RegularFile checked = open_regular_file(index.path);
  ::close(checked.fd);
  std::lock_guard<std::mutex> guard(hdf5_lock());
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  Handle file{H5Fopen(index.path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose};
  refuse(file.id >= 0, index.path + ": not a readable HDF5 shard (truncated or damaged)");
  index.offsets = read_u64_dataset(file.id, "offsets", index.path, samples);
  index.lengths = read_u64_dataset(file.id, "lengths", index.path, samples);
  index.checksums = read_u64_dataset(file.id, "checksums", index.path, samples);
  // Resolve where each chunk of `data` lies in the file, once, so readers can pread.
  Handle data{H5Dopen2(file.id, "data", H5P_DEFAULT), H5Dclose};
  refuse(data.id >= 0, index.path + ": no dataset data");
  Handle space{H5Dget_space(data.id), H5Sclose};
  const hssize_t extent = H5Sget_simple_extent_npoints(space.id);
  refuse(extent >= 1, index.path + ": dataset data is empty");
  check_samples(spec, index, uint64_t(extent), index.path);
  locate_chunks(data.id, uint64_t(extent), checked.size, index);
}

}  // namespace

RegularFile open_regular_file(const std::string& path, int extra_flags) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | extra_flags);
  if (fd < 0) {
    const int error = errno;
    struct stat st {};
    if (error == ENOENT || error == ENOTDIR)
      throw UsageError(path + " is missing; rerun prepare-data");
    if (error == ENXIO && ::stat(path.c_str(), &st) == 0)  // a socket
      throw UsageError(path + " is not a regular file (" + file_kind(st.st_mode) +
                       "); rerun prepare-data");
    if (error == EACCES || error == EPERM || error == ELOOP)  // the user's to fix
      throw UsageError("cannot open " + path + ": " + std::strerror(error));
    throw RuntimeError("cannot open " + path +
                       ((extra_flags & O_DIRECT) ? " with O_DIRECT (data.direct=true)" : "") +
                       ": " + std::strerror(error) +
                       (error == EMFILE ? " (the limit on open files, ulimit -n)" : ""));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string kind = file_kind(st.st_mode);
    ::close(fd);
    throw UsageError(path + " is not a regular file (" + kind + "); rerun prepare-data");
  }
  // Regular files never block; the flag is cleared so nothing later depends on that.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return {fd, uint64_t(st.st_size)};
}

std::string shape_problem(const DatasetSpec& spec) {
  if (spec.files < 1 || spec.files > kMaxDatasetFiles)
    return "files " + std::to_string(spec.files) + " is outside [1, " +
           std::to_string(kMaxDatasetFiles) + "]";
  if (spec.samples < spec.files || spec.samples > kMaxDatasetSamples)
    return "samples " + std::to_string(spec.samples) +
           " is outside [files = " + std::to_string(spec.files) + ", " +
           std::to_string(kMaxDatasetSamples) + "]";
  if (spec.sample_bytes < 1 || spec.sample_bytes > kMaxSampleBytes)
    return "sample_bytes " + std::to_string(spec.sample_bytes) + " is outside [1, " +
           std::to_string(kMaxSampleBytes) + "]";
  if (!(spec.spread >= 0 && spec.spread <= kMaxSpread))
    return "spread " + json(spec.spread).dump() + " is outside [0, " + json(kMaxSpread).dump() +
           "]";
  if (spec.format != "raw" && spec.format != "hdf5")
    return "data_format '" + spec.format + "' is neither raw nor hdf5";
  return "";
}

DatasetSpec read_index(const std::string& dir) {
  const std::string path = dir + "/index.json";
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec)))
    throw UsageError("data.dir '" + dir +
                     "' holds no dataset (no index.json); run trainproof prepare-data first");
  const json index = parse_index(path);
  const IndexFields fields(index, path);
  DatasetSpec spec;
  spec.dir = dir;
  fields.text("format", {kDatasetIndexFormat});
  spec.format = fields.text("data_format", {"raw", "hdf5"});
  spec.files = int(fields.integer("files", 1, kMaxDatasetFiles));
  spec.samples = fields.integer("samples", 1, kMaxDatasetSamples);
  refuse(spec.samples >= spec.files, path + ": field 'samples' is " + std::to_string(spec.samples) +
                                         ", fewer than 'files' (" + std::to_string(spec.files) +
                                         "): every shard holds at least one sample");
  spec.sample_bytes = fields.integer("sample_bytes", 1, kMaxSampleBytes);
  spec.spread = fields.number("spread", 0.0, kMaxSpread);
  spec.seed = fields.unsigned_integer("seed");
  return spec;
}

ShardIndex load_shard_index(const DatasetSpec& spec, int shard) {
  const std::string problem = shape_problem(spec);
  refuse(problem.empty(), "dataset in " + spec.dir + ": " + problem);
  refuse(shard >= 0 && shard < spec.files, "dataset in " + spec.dir + ": no shard " +
                                               std::to_string(shard) + " of " +
                                               std::to_string(spec.files));
  ShardIndex index;
  index.path = spec.dir + "/" + shard_name(spec, shard);
  index.first_sample = shard_first(spec, shard);
  const int64_t samples = shard_first(spec, shard + 1) - index.first_sample;
  if (spec.format == "raw")
    load_raw_index(spec, shard, samples, index);
  else
    load_hdf5_index(spec, samples, index);
  return index;
}

}  // namespace tp
