// What a restore treats as damage beyond a bad checksum: something other than a regular file where
// a checkpoint file should be (a FIFO must not block it), file names and symlinks that leave the
// step folder, manifest fields of the wrong type, and steps that disagree. Each is set aside,
// named, and the previous checkpoint restored (docs/checkpoint.md, "What counts as damage").
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "checkpoint/rank_file.h"
#include "checkpoint/store.h"
#include "common/digest.h"
#include "common/hdf5_lock.h"
#include "tests/unit/checkpoint_store_case.h"

namespace {

using namespace tp::test;
using ::testing::HasSubstr;

// A restore that blocks opening a FIFO would hang the test. After `patience` this guard keeps
// opening the FIFO's write end and closing it again, which releases an open blocked for reading
// (a read then sees end of file), and remembers that it had to: the test fails instead.
class FifoRelease {
 public:
  explicit FifoRelease(std::string path, std::chrono::seconds patience = std::chrono::seconds(10))
      : path_(std::move(path)), thread_([this, patience] { run(patience); }) {}
  ~FifoRelease() { finish(); }
  // Stops the guard; true when it had to release a blocked open.
  bool finish() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    return released_;
  }

 private:
  void run(std::chrono::seconds patience) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (wake_.wait_for(lock, patience, [this] { return done_; })) return;
    while (!done_) {
      // Succeeds only while a reader has the FIFO open, that is, while the restore waits in it.
      const int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) {
        released_ = true;
        ::close(fd);
      }
      wake_.wait_for(lock, std::chrono::milliseconds(20), [this] { return done_; });
    }
  }

  std::string path_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  bool released_ = false;
  std::thread thread_;  // last: starts once the members it uses exist
};

void make_fifo(const std::string& path) {
  fs::remove(path);
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0) << path;
}

// Points the manifest's entry at another file, with that file's size and checksum, so that only
// the check under test can catch it.
void vouch_for(const std::string& manifest_path, const std::string& name, const std::string& file) {
  json m = json::parse(read_text(manifest_path));
  const std::string bytes = read_text(file);
  m["files"][0]["name"] = name;
  m["files"][0]["bytes"] = bytes.size();
  m["files"][0]["xxh3_128"] = tp::digest_of(bytes.data(), bytes.size()).hex();
  write_text(manifest_path, m.dump(2));
}

TEST_F(CheckpointStore, FifoInPlaceOfTheRankFileFallsBackWithoutBlocking) {
  options.cold_read = true;  // the page-cache drop opens the file too
  FifoRelease guard(data_file(8));
  const std::string why = restore_after_damaging_8([&] { make_fifo(data_file(8)); });
  EXPECT_FALSE(guard.finish()) << "the restore blocked opening a FIFO";
  EXPECT_EQ(why, folder(8) + ": " + data_file(8) + " is not a regular file (a FIFO)");
}

TEST_F(CheckpointStore, FifoInPlaceOfTheManifestFallsBackWithoutBlocking) {
  FifoRelease guard(manifest(8));
  const std::string why = restore_after_damaging_8([&] { make_fifo(manifest(8)); });
  EXPECT_FALSE(guard.finish()) << "the restore blocked opening a FIFO";
  EXPECT_EQ(why, folder(8) + ": " + manifest(8) + " is not a regular file (a FIFO)");
}

TEST_F(CheckpointStore, AManifestNestedTooDeepIsDamageAndFallsBack) {
  const std::string why = restore_after_damaging_8([&] {
    std::ofstream(manifest(8), std::ios::trunc)
        << std::string(50000, '[') << std::string(50000, ']');
  });
  EXPECT_EQ(why,
            folder(8) + ": MANIFEST.json is nested more than 256 levels deep (arrays and objects)");
}

TEST_F(CheckpointStore, FolderInPlaceOfTheRankFileFallsBack) {
  const std::string why = restore_after_damaging_8([&] {
    fs::remove(data_file(8));
    fs::create_directory(data_file(8));
  });
  EXPECT_EQ(why, folder(8) + ": " + data_file(8) + " is not a regular file (a folder)");
}

TEST_F(CheckpointStore, ManifestNameLeavingTheFolderFallsBack) {
  // A valid file outside the step folder, named through "..", with its true size and checksum.
  const std::string why = restore_after_damaging_8([&] {
    fs::create_directories(dir + "/x");
    fs::copy_file(data_file(8), dir + "/x/rank-00000.h5");
    vouch_for(manifest(8), "../x/rank-00000.h5", dir + "/x/rank-00000.h5");
  });
  EXPECT_EQ(why, folder(8) +
                     ": MANIFEST.json: files[0].name must be a plain file name in the step "
                     "folder, not \"../x/rank-00000.h5\"");
}

TEST_F(CheckpointStore, ManifestNamesThatAreNotPlainFallBack) {
  const std::string names[] = {"..",
                               ".",
                               "",
                               "sub/rank-00000.h5",
                               std::string("rank\0.h5", 8),
                               "rank-00000.h5\n",
                               "rank\x1b[2J.h5",
                               "rank\x7f.h5"};
  for (const std::string& name : names) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string why = restore_after_damaging_8(
        [&] { edit_manifest(8, [&](json& m) { m["files"][0]["name"] = name; }); });
    EXPECT_THAT(why, HasSubstr("files[0].name must be a plain file name")) << json(name).dump();
  }
}

TEST_F(CheckpointStore, RankFileSymlinkedOutOfTheFolderFallsBack) {
  const std::string why = restore_after_damaging_8([&] {
    const std::string outside = dir + "/elsewhere.h5";
    fs::rename(data_file(8), outside);
    fs::create_symlink(outside, data_file(8));
  });
  EXPECT_EQ(why, folder(8) + ": " + data_file(8) + " is a symbolic link");
}

TEST_F(CheckpointStore, StepFolderThatIsASymlinkFallsBack) {
  const std::string why = restore_after_damaging_8([&] {
    fs::rename(folder(8), dir + "/elsewhere");
    fs::create_directory_symlink(dir + "/elsewhere", folder(8));
  });
  EXPECT_EQ(why, folder(8) + ": " + folder(8) + " is a symbolic link");
}

TEST_F(CheckpointStore, ManifestThatIsASymlinkFallsBack) {
  const std::string why = restore_after_damaging_8([&] {
    fs::rename(manifest(8), dir + "/MANIFEST.json");
    fs::create_symlink(dir + "/MANIFEST.json", manifest(8));
  });
  EXPECT_EQ(why, folder(8) + ": " + manifest(8) + " is a symbolic link");
}

TEST_F(CheckpointStore, ManifestStepOtherThanTheFoldersFallsBack) {
  const std::string why =
      restore_after_damaging_8([&] { edit_manifest(8, [](json& m) { m["step"] = 9; }); });
  EXPECT_EQ(why, folder(8) + ": MANIFEST.json says step 9; the folder is step-00000008");
}

TEST_F(CheckpointStore, FolderHoldingAnotherStepsCheckpointFallsBack) {
  const std::string why = restore_after_damaging_8([&] {
    save_steps({6});  // retention keeps 4 and 6; 8 is a later step and is left alone
    fs::remove_all(folder(8));
    fs::rename(folder(6), folder(8));
  });
  EXPECT_EQ(why, folder(8) + ": MANIFEST.json says step 6; the folder is step-00000008");
}

TEST_F(CheckpointStore, RankFileOfAnotherStepFallsBack) {
  const std::string why = restore_after_damaging_8([&] {
    save_steps({6});
    fs::copy_file(data_file(6), data_file(8), fs::copy_options::overwrite_existing);
    fs::remove_all(folder(6));
    vouch_for(manifest(8), "rank-00000.h5", data_file(8));
  });
  EXPECT_EQ(why, folder(8) + ": " + data_file(8) + " holds step 6; the manifest says step 8");
}

// A rank file's metadata, data and padding are all covered by its checksum. The states are large
// enough that HDF5 aligns each dataset, leaving padding before it; each flipped byte leaves a file
// that still opens and decodes, so only the checksum can catch it.
class RankFileBytes : public CheckpointStore {
 protected:
  static tp::TrainingState large_state_at(int64_t step) {
    tp::TrainingState s;
    s.step = step;
    const size_t n = size_t(tp::kDatasetAlignment / sizeof(float)) + 1000;
    for (size_t i = 0; i < n; ++i) {
      s.params.push_back(float(step) * 1e6f + float(i));
      s.moment1.push_back(-float(step));
    }
    return s;
  }
  // Where the params dataset's bytes start, as HDF5 says.
  static uint64_t params_offset(const std::string& path) {
    std::lock_guard<std::mutex> guard(tp::hdf5_lock());
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t set = H5Dopen2(file, "params", H5P_DEFAULT);
    const haddr_t offset = H5Dget_offset(set);
    H5Dclose(set);
    H5Fclose(file);
    return offset == HADDR_UNDEF ? 0 : uint64_t(offset);
  }
  std::string restore_after_flipping_8(const std::function<uint64_t()>& where) {
    auto s = store();
    s.save(large_state_at(4));
    s.save(large_state_at(8));
    flip_byte(data_file(8), where());
    tp::TrainingState restored;
    const auto result = store().restore(restored);
    EXPECT_TRUE(result.has_value());
    if (!result) return "";
    EXPECT_EQ(result->step, 4) << "must fall back to exactly the previous checkpoint";
    EXPECT_EQ(restored.params, large_state_at(4).params);
    EXPECT_TRUE(fs::is_directory(folder(8) + ".corrupt"));
    return result->rejected.empty() ? "" : result->rejected[0];
  }
};

TEST_F(RankFileBytes, AFlippedByteInTheMetadataFallsBack) {
  const std::string why = restore_after_flipping_8([&] {
    // The scenario hash attribute's value: metadata a decode would accept as another value.
    const std::string bytes = read_text(data_file(8));
    const size_t at = bytes.find(kHash);
    EXPECT_NE(at, std::string::npos);
    return uint64_t(at);
  });
  EXPECT_EQ(why, folder(8) + ": " + data_file(8) + " fails its xxh3-128 checksum");
}

TEST_F(RankFileBytes, AFlippedByteInTheDataFallsBack) {
  const std::string why =
      restore_after_flipping_8([&] { return params_offset(data_file(8)) + 4 * 777 + 1; });
  EXPECT_EQ(why, folder(8) + ": " + data_file(8) + " fails its xxh3-128 checksum");
}

TEST_F(RankFileBytes, AFlippedByteInThePaddingFallsBack) {
  const std::string why = restore_after_flipping_8([&] {
    const uint64_t params = params_offset(data_file(8));
    EXPECT_EQ(params % tp::kDatasetAlignment, 0u) << "the dataset is aligned";
    const std::string bytes = read_text(data_file(8));
    EXPECT_GE(params, tp::kDatasetAlignment) << "HDF5's metadata comes first";
    // The byte right before the aligned dataset: padding, zero as written.
    EXPECT_EQ(bytes[params - 1], '\0');
    return params - 1;
  });
  EXPECT_EQ(why, folder(8) + ": " + data_file(8) + " fails its xxh3-128 checksum");
}

TEST_F(CheckpointStore, AFolderSetAsideBeforeIsSetAsideAgainUnderAnotherName) {
  save_steps({4, 8});
  fs::create_directories(folder(8) + ".corrupt/left-by-an-earlier-restore");
  flip_byte(data_file(8), 100);
  tp::TrainingState restored;
  const auto result = store().restore(restored);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->step, 4);
  EXPECT_FALSE(fs::exists(folder(8))) << "the damaged folder stays where every resume finds it";
  EXPECT_TRUE(fs::exists(folder(8) + ".corrupt/left-by-an-earlier-restore"));
  EXPECT_TRUE(fs::exists(folder(8) + ".corrupt.1/MANIFEST.json"));
}

// A manifest field of the wrong type, out of range, or missing: damage naming the field.
struct FieldCase {
  const char* label;
  const char* pointer;        // JSON pointer to the field
  std::optional<json> value;  // nullopt: the field is removed
  const char* named;          // what the reason must name
};

void PrintTo(const FieldCase& c, std::ostream* out) {
  *out << c.label;
}

class ManifestField : public CheckpointStore, public ::testing::WithParamInterface<FieldCase> {};

TEST_P(ManifestField, IsDamageNamingTheField) {
  const FieldCase& c = GetParam();
  const std::string why = restore_after_damaging_8([&] {
    edit_manifest(8, [&](json& m) {
      const json::json_pointer at(c.pointer);
      if (c.value)
        m[at] = *c.value;
      else
        m[at.parent_pointer()].erase(at.back());
    });
  });
  EXPECT_THAT(why, HasSubstr(std::string("MANIFEST.json")));
  EXPECT_THAT(why, HasSubstr(c.named));
}

INSTANTIATE_TEST_SUITE_P(
    Types, ManifestField,
    ::testing::Values(
        FieldCase{"world_size_string", "/world_size", json("1"), "world_size must be an integer"},
        FieldCase{"world_size_null", "/world_size", json(nullptr), "world_size must be"},
        FieldCase{"world_size_fraction", "/world_size", json(1.5), "world_size must be"},
        FieldCase{"world_size_zero", "/world_size", json(0), "world_size must be"},
        FieldCase{"world_size_missing", "/world_size", std::nullopt, "has no world_size"},
        FieldCase{"layout_number", "/layout", json(1), "layout must be"},
        FieldCase{"layout_unknown", "/layout", json("sideways"), "layout must be"},
        FieldCase{"step_string", "/step", json("8"), "step must be"},
        FieldCase{"step_negative", "/step", json(-8), "step must be"},
        FieldCase{"step_missing", "/step", std::nullopt, "has no step"},
        FieldCase{"format_number", "/format", json(1), "format must be a string"},
        FieldCase{"scenario_hash_number", "/scenario_hash", json(12), "scenario_hash must be"},
        FieldCase{"shard_optimizer_string", "/shard_optimizer", json("false"),
                  "shard_optimizer must be"},
        FieldCase{"total_elements_negative", "/total_elements", json(-1), "total_elements must be"},
        FieldCase{"created_number", "/created", json(5), "created must be"},
        FieldCase{"files_object", "/files", json::object(), "files must be"},
        FieldCase{"file_string", "/files/0", json("rank-00000.h5"), "files[0] must be"},
        FieldCase{"name_number", "/files/0/name", json(7), "files[0].name must be"},
        FieldCase{"name_missing", "/files/0/name", std::nullopt, "has no files[0].name"},
        FieldCase{"bytes_string", "/files/0/bytes", json("123"), "files[0].bytes must be"},
        FieldCase{"bytes_negative", "/files/0/bytes", json(-5), "files[0].bytes must be"},
        FieldCase{"checksum_null", "/files/0/xxh3_128", json(nullptr), "files[0].xxh3_128 must be"},
        FieldCase{"checksum_short", "/files/0/xxh3_128", json("abc"), "files[0].xxh3_128 must be"},
        FieldCase{"rank_string", "/files/0/rank", json("0"), "files[0].rank must be"},
        FieldCase{"rank_other", "/files/0/rank", json(1), "files[0].rank must be"},
        FieldCase{"elements_string", "/files/0/elements", json("all"), "files[0].elements must be"},
        FieldCase{"elements_reversed", "/files/0/elements", json::array({300, 0}),
                  "files[0].elements must be"},
        FieldCase{"elements_beyond_the_state", "/files/0/elements", json::array({0, 1000000000000}),
                  "not the whole state"},
        FieldCase{"elements_short_of_the_state", "/files/0/elements", json::array({0, 1}),
                  "not the whole state"},
        FieldCase{"total_elements_other", "/total_elements", json(3),
                  "files[0] holds elements [0, 300) of 3,"},
        FieldCase{"not_an_object", "", json::array(), "must be an object"}),
    [](const ::testing::TestParamInfo<FieldCase>& info) { return std::string(info.param.label); });

class SharedFileDamage : public CheckpointStore {
 protected:
  void SetUp() override {
    CheckpointStore::SetUp();
    options.layout = tp::CheckpointLayout::shared_file;
  }
};

TEST_F(SharedFileDamage, FifoInPlaceOfTheSharedFileFallsBackWithoutBlocking) {
  options.cold_read = true;
  FifoRelease guard(data_file(8));
  const std::string why = restore_after_damaging_8([&] { make_fifo(data_file(8)); });
  EXPECT_FALSE(guard.finish()) << "the restore blocked opening a FIFO";
  EXPECT_EQ(why, folder(8) + ": " + data_file(8) + " is not a regular file (a FIFO)");
}

TEST_F(SharedFileDamage, SharedFileSymlinkedOutOfTheFolderFallsBack) {
  const std::string why = restore_after_damaging_8([&] {
    const std::string outside = dir + "/elsewhere.h5";
    fs::rename(data_file(8), outside);
    fs::create_symlink(outside, data_file(8));
  });
  EXPECT_EQ(why, folder(8) + ": " + data_file(8) + " is a symbolic link");
}

TEST_F(SharedFileDamage, SharedFileOfAnotherStepFallsBack) {
  const std::string why = restore_after_damaging_8([&] {
    save_steps({6});
    const json six = json::parse(read_text(manifest(6)));
    fs::copy_file(data_file(6), data_file(8), fs::copy_options::overwrite_existing);
    edit_manifest(8, [&](json& m) { m["files"] = six["files"]; });
    fs::remove_all(folder(6));
  });
  EXPECT_EQ(why, folder(8) + ": " + data_file(8) + " holds step 6; the manifest says step 8");
}

TEST_F(SharedFileDamage, SlabWithAWrongTypeFallsBack) {
  const std::string why = restore_after_damaging_8(
      [&] { edit_manifest(8, [](json& m) { m["files"][0]["slabs"][0]["elements"] = "all"; }); });
  EXPECT_THAT(why, HasSubstr("MANIFEST.json: files[0].slabs[0].elements must be"));
}

TEST_F(SharedFileDamage, SharedFileNameLeavingTheFolderFallsBack) {
  const std::string why = restore_after_damaging_8([&] {
    fs::create_directories(dir + "/x");
    fs::copy_file(data_file(8), dir + "/x/state.h5");
    edit_manifest(8, [](json& m) { m["files"][0]["name"] = "../x/state.h5"; });
  });
  EXPECT_THAT(why, HasSubstr("files[0].name must be a plain file name"));
}

}  // namespace
