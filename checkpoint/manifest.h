#pragma once
// MANIFEST.json as a restore reads it: every field it relies on, type-checked. A manifest that
// fails a check is damage, like a bad checksum: the folder is set aside and the previous
// checkpoint tried (docs/checkpoint.md, "What counts as damage").
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tp {

// One rank's slab of the shared file.
struct ManifestSlab {
  uint64_t begin = 0, end = 0;  // elements [begin, end)
  std::string xxh3_128;
};

struct ManifestFile {
  std::string name;  // a plain name inside the step folder: no separator, never "." or ".."
  uint64_t bytes = 0;
  std::string xxh3_128;  // file-per-rank: of the whole file
  // file-per-rank: the elements [begin, end) the file holds, when the manifest says
  std::optional<std::pair<uint64_t, uint64_t>> elements;
  std::vector<ManifestSlab> slabs;  // shared-file: one per rank
};

struct CheckpointManifest {
  int64_t step = 0;
  int world_size = 0;
  std::string scenario_hash;
  std::string layout;  // "file-per-rank" or "shared-file"
  bool shard_optimizer = false;
  // Absent from manifests written before slices existed: the whole replica is every rank's part.
  std::optional<uint64_t> total_elements;
  // file-per-rank: one per rank, in rank order; shared-file: exactly one.
  std::vector<ManifestFile> files;
};

// Parses the manifest of the folder named `folder_name` (step-NNNNNNNN). "" with `manifest`
// filled, or what is wrong: the field and the value found, or a step other than the folder's.
std::string parse_manifest(const std::string& text, const std::string& folder_name,
                           CheckpointManifest& manifest);
// "" when a parsed manifest lists a file (file-per-rank) or a slab (shared-file) for each of its
// world_size ranks and no more, else what is missing. Checked once the world size is known to be
// the run's, so that a checkpoint of another world size is reported as such.
std::string ranks_not_covered(const CheckpointManifest& manifest);

// "" when a decoded file's step and total element count are the manifest's, else what differs.
// The total is checked here rather than against the model: a restore decodes into an empty state.
std::string decoded_disagrees(const std::string& path, int64_t step, uint64_t total_elements,
                              const CheckpointManifest& manifest);

}  // namespace tp
