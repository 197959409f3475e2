#include "checkpoint/manifest.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "checkpoint/store.h"
#include "common/json_depth.h"

namespace tp {
namespace {

using nlohmann::json;

// What is wrong with a manifest. Thrown inside this file only; parse_manifest returns it as text.
struct Damage {
  std::string why;
};

// The value as the manifest spells it, cut short: a reason names it without quoting a whole file.
std::string shown(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 48) text = text.substr(0, 45) + "...";
  return text;
}

[[noreturn]] void wrong(const std::string& field, const std::string& expected, const json& value) {
  throw Damage{"MANIFEST.json: " + field + " must be " + expected + ", not " + shown(value)};
}

// A field of `object`, whose own place in the manifest is `where` ("" at the top, "files[0]").
std::string field_name(const std::string& where, const char* key) {
  return where.empty() ? key : where + "." + key;
}

const json& required(const json& object, const std::string& where, const char* key) {
  const auto found = object.find(key);
  if (found == object.end()) throw Damage{"MANIFEST.json has no " + field_name(where, key)};
  return *found;
}

const json* optional(const json& object, const char* key) {
  const auto found = object.find(key);
  return found == object.end() ? nullptr : &*found;
}

uint64_t as_integer(const json& value, const std::string& field, uint64_t least, uint64_t most) {
  // A parsed integer that is not negative is unsigned; a negative one, a fraction, a string or
  // null is not a count.
  if (value.is_number_unsigned()) {
    const uint64_t number = value.get<uint64_t>();
    if (number >= least && number <= most) return number;
  }
  if (most >= uint64_t(std::numeric_limits<int64_t>::max()))
    wrong(field,
          least == 0 ? "a non-negative integer" : "an integer of at least " + std::to_string(least),
          value);
  wrong(field, "an integer from " + std::to_string(least) + " to " + std::to_string(most), value);
}

uint64_t as_count(const json& value, const std::string& field) {
  return as_integer(value, field, 0, uint64_t(std::numeric_limits<int64_t>::max()));
}

std::string as_string(const json& value, const std::string& field) {
  if (!value.is_string()) wrong(field, "a string", value);
  return value.get<std::string>();
}

std::string as_checksum(const json& value, const std::string& field) {
  const bool hex = value.is_string() && value.get_ref<const std::string&>().size() == 32 &&
                   std::all_of(value.get_ref<const std::string&>().begin(),
                               value.get_ref<const std::string&>().end(),
                               [](unsigned char c) { return std::isxdigit(c) != 0; });
  if (!hex) wrong(field, "an xxh3-128 checksum (32 hex digits)", value);
  return value.get<std::string>();
}

// A name the restore opens inside the step folder: anything that could lead elsewhere (a
// separator, "." or "..") or be cut short by the C library (a NUL) is damage.
std::string as_file_name(const json& value, const std::string& field) {
  const bool plain = value.is_string() && [&] {
    const std::string& name = value.get_ref<const std::string&>();
    // A control byte (a newline) would also split the reason lines the ranks agree on.
    return !name.empty() && name != "." && name != ".." &&
           name.find_first_of(std::string("/\0", 2)) == std::string::npos &&
           std::none_of(name.begin(), name.end(),
                        [](unsigned char c) { return c < 0x20 || c == 0x7f; });
  }();
  if (!plain) wrong(field, "a plain file name in the step folder", value);
  return value.get<std::string>();
}

std::pair<uint64_t, uint64_t> as_elements(const json& value, const std::string& field) {
  if (value.is_array() && value.size() == 2 && value[0].is_number_unsigned() &&
      value[1].is_number_unsigned() && value[0].get<uint64_t>() <= value[1].get<uint64_t>())
    return {value[0].get<uint64_t>(), value[1].get<uint64_t>()};
  wrong(field, "[begin, end] with begin <= end", value);
}

void check_rank(const json& entry, const std::string& where, size_t rank) {
  if (const json* found = optional(entry, "rank")) {
    const std::string field = field_name(where, "rank");
    if (!found->is_number_unsigned() || found->get<uint64_t>() != rank)
      wrong(field, std::to_string(rank), *found);
  }
}

const json& as_entry(const json& list, size_t index, const std::string& list_name,
                     std::string& where) {
  where = list_name + "[" + std::to_string(index) + "]";
  if (!list[index].is_object()) wrong(where, "an object", list[index]);
  return list[index];
}

// file-per-rank: one entry per rank, in rank order (whether there is one for each rank is checked
// once the world size is known to be this run's).
std::vector<ManifestFile> rank_files(const json& files) {
  std::vector<ManifestFile> parsed;
  for (size_t r = 0; r < files.size(); ++r) {
    std::string where;
    const json& entry = as_entry(files, r, "files", where);
    ManifestFile file;
    file.name = as_file_name(required(entry, where, "name"), field_name(where, "name"));
    file.bytes = as_count(required(entry, where, "bytes"), field_name(where, "bytes"));
    file.xxh3_128 = as_checksum(required(entry, where, "xxh3_128"), field_name(where, "xxh3_128"));
    check_rank(entry, where, r);
    // Written since slices exist; the decoded file's own range is what the restore checks.
    if (const json* elements = optional(entry, "elements"))
      file.elements = as_elements(*elements, field_name(where, "elements"));
    parsed.push_back(std::move(file));
  }
  return parsed;
}

// shared-file: one entry, with one slab per rank.
std::vector<ManifestFile> shared_file(const json& files) {
  if (files.size() != 1)
    throw Damage{"MANIFEST.json lists " + std::to_string(files.size()) +
                 " files; a shared-file checkpoint has one"};
  std::string where;
  const json& entry = as_entry(files, 0, "files", where);
  ManifestFile file;
  file.name = as_file_name(required(entry, where, "name"), field_name(where, "name"));
  file.bytes = as_count(required(entry, where, "bytes"), field_name(where, "bytes"));
  const json& slabs = required(entry, where, "slabs");
  if (!slabs.is_array()) wrong(field_name(where, "slabs"), "an array", slabs);
  for (size_t r = 0; r < slabs.size(); ++r) {
    std::string at;
    const json& slab = as_entry(slabs, r, field_name(where, "slabs"), at);
    ManifestSlab parsed;
    std::tie(parsed.begin, parsed.end) =
        as_elements(required(slab, at, "elements"), field_name(at, "elements"));
    parsed.xxh3_128 = as_checksum(required(slab, at, "xxh3_128"), field_name(at, "xxh3_128"));
    check_rank(slab, at, r);
    if (const json* bytes = optional(slab, "bytes")) as_count(*bytes, field_name(at, "bytes"));
    file.slabs.push_back(std::move(parsed));
  }
  return {file};
}

// The elements the rank files say they hold must be what a checkpoint of total_elements holds:
// every file the whole state (a full replica), or, with the optimizer sharded, ranges that tile
// [0, total) in rank order. A manifest that disagrees with itself is damage, whatever the files
// hold. The shared file's slabs are checked against the ranks' slices as they are read.
void check_element_ranges(const CheckpointManifest& manifest) {
  if (!manifest.total_elements || manifest.layout != "file-per-rank") return;  // slabs: restore
  const uint64_t total = *manifest.total_elements;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const ManifestFile& file : manifest.files)
    if (file.elements) ranges.push_back(*file.elements);
  if (ranges.empty()) return;  // written before slices existed
  if (ranges.size() != manifest.files.size())
    throw Damage{"MANIFEST.json gives the elements of some files and not of others"};
  uint64_t next = 0;
  for (size_t r = 0; r < ranges.size(); ++r) {
    const auto [begin, end] = ranges[r];
    const bool fits =
        manifest.shard_optimizer ? begin == next && end <= total : begin == 0 && end == total;
    if (!fits)
      throw Damage{"MANIFEST.json says files[" + std::to_string(r) + "] holds elements [" +
                   std::to_string(begin) + ", " + std::to_string(end) + ") of " +
                   std::to_string(total) +
                   (manifest.shard_optimizer ? ", which do not follow the file before"
                                             : ", not the whole state")};
    next = end;
  }
  if (manifest.shard_optimizer && next != total)
    throw Damage{"MANIFEST.json's files hold elements [0, " + std::to_string(next) + ") of " +
                 std::to_string(total)};
}

std::optional<int64_t> step_of_folder_name(const std::string& name) {
  long long step = 0;
  char tail = 0;
  if (std::sscanf(name.c_str(), "step-%lld%c", &step, &tail) != 1 ||
      name != CheckpointStore::folder_name(step))
    return std::nullopt;
  return step;
}

CheckpointManifest parse_fields(const json& top, const std::string& folder_name) {
  if (!top.is_object()) throw Damage{"MANIFEST.json must be an object, not " + shown(top)};
  const json& format = required(top, "", "format");
  if (as_string(format, "format") != kCheckpointFormat)
    throw Damage{"MANIFEST.json has an unknown format " + shown(format)};
  CheckpointManifest manifest;
  manifest.step = int64_t(as_count(required(top, "", "step"), "step"));
  manifest.world_size = int(as_integer(required(top, "", "world_size"), "world_size", 1, INT_MAX));
  manifest.scenario_hash = as_string(required(top, "", "scenario_hash"), "scenario_hash");
  const json& layout = required(top, "", "layout");
  if (layout != "file-per-rank" && layout != "shared-file")
    wrong("layout", "\"file-per-rank\" or \"shared-file\"", layout);
  manifest.layout = layout.get<std::string>();
  // Absent from manifests written before sharding and slices existed.
  if (const json* shard = optional(top, "shard_optimizer")) {
    if (!shard->is_boolean()) wrong("shard_optimizer", "true or false", *shard);
    manifest.shard_optimizer = shard->get<bool>();
  }
  if (const json* total = optional(top, "total_elements"))
    manifest.total_elements = as_count(*total, "total_elements");
  if (const json* created = optional(top, "created")) as_string(*created, "created");
  const json& files = required(top, "", "files");
  if (!files.is_array()) wrong("files", "an array", files);
  manifest.files = manifest.layout == "shared-file" ? shared_file(files) : rank_files(files);
  check_element_ranges(manifest);
  // The folder's name, the manifest and (checked as they are decoded) the files must agree on
  // the step: a step-N folder holding another step's checkpoint would restore as that step.
  const std::optional<int64_t> folder_step = step_of_folder_name(folder_name);
  if (folder_step != manifest.step)
    throw Damage{"MANIFEST.json says step " + std::to_string(manifest.step) + "; the folder is " +
                 folder_name};
  return manifest;
}

}  // namespace

std::string parse_manifest(const std::string& text, const std::string& folder_name,
                           CheckpointManifest& manifest) {
  if (const std::string too_deep = json_depth_problem(text); !too_deep.empty())
    return "MANIFEST.json is " + too_deep;
  json top;
  try {
    top = json::parse(text);
  } catch (const json::exception& e) {
    return std::string("MANIFEST.json does not parse: ") + e.what();
  }
  try {
    manifest = parse_fields(top, folder_name);
  } catch (const Damage& damage) {
    return damage.why;
  }
  return "";
}

std::string ranks_not_covered(const CheckpointManifest& manifest) {
  const size_t ranks = size_t(manifest.world_size);
  if (manifest.layout == "shared-file")
    return manifest.files[0].slabs.size() == ranks
               ? ""
               : "MANIFEST.json does not list one slab per rank";
  if (manifest.files.size() < ranks)
    return "MANIFEST.json lists no file for rank " + std::to_string(manifest.files.size());
  if (manifest.files.size() > ranks)
    return "MANIFEST.json lists " + std::to_string(manifest.files.size()) + " files for " +
           std::to_string(ranks) + " ranks";
  return "";
}

std::string decoded_disagrees(const std::string& path, int64_t step, uint64_t total_elements,
                              const CheckpointManifest& manifest) {
  if (step != manifest.step)
    return path + " holds step " + std::to_string(step) + "; the manifest says step " +
           std::to_string(manifest.step);
  if (manifest.total_elements && total_elements != *manifest.total_elements)
    return path + " holds a state of " + std::to_string(total_elements) +
           " elements; the manifest says total_elements " +
           std::to_string(*manifest.total_elements);
  return "";
}

}  // namespace tp
