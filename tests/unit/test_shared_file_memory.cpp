// The shared-file writer's memory cost per save: a save writes the state from where it lives, so
// a second save of the same state touches no fresh memory in proportion to the state. Page faults
// are counted, never timed: speed is the benchmark's job.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "tests/unit/checkpoint_store_case.h"

namespace {

using namespace tp::test;

// 4M elements per tensor, Adam: 48 MiB of state, 12288 pages; far beyond HDF5's own small
// allocations, and far more than a save that copies or zero-fills a state-sized buffer avoids.
tp::TrainingState large_adam_state(int64_t step) {
  constexpr size_t kLarge = size_t(4) << 20;
  tp::TrainingState s;
  s.step = step;
  s.params.assign(kLarge, 1.5f);
  s.moment1.assign(kLarge, -0.25f);
  s.moment2.assign(kLarge, 0.125f);
  return s;
}

class SharedFileMemory : public CheckpointStore {
 protected:
  void SetUp() override {
    CheckpointStore::SetUp();
    options.layout = tp::CheckpointLayout::shared_file;
    options.keep = 1;
  }
};

TEST_F(SharedFileMemory, SecondSaveFaultsInNoMemoryInProportionToTheState) {
  tp::TrainingState state = large_adam_state(1);
  auto writer = store();
  writer.save(state);  // the first save may touch what the run keeps (HDF5, MPI-IO)
  state.step = 2;
  const uint64_t state_pages = tp::state_bytes(state) / 4096;
  const long before = tp::test::minor_page_faults();
  writer.save(state);
  const long faults = tp::test::minor_page_faults() - before;
  EXPECT_LT(uint64_t(faults), state_pages / 16)
      << faults << " minor page faults in a save of " << state_pages << " pages of state";
  tp::TrainingState restored;
  const auto result = store().restore(restored);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->step, 2);
  EXPECT_EQ(restored.params, state.params);
  EXPECT_EQ(restored.moment2, state.moment2);
}

}  // namespace

// Negative controls for the bytes the slab checksums do not cover: HDF5's metadata carries its own
// checksums (newest file format), so a flipped byte there is damage, found on the collective open.
class SharedFileMetadata : public CheckpointStore {
 protected:
  void SetUp() override {
    CheckpointStore::SetUp();
    options.layout = tp::CheckpointLayout::shared_file;
  }
  uint64_t offset_of(const std::string& path, const std::string& text) {
    const std::string bytes = read_text(path);
    const size_t at = bytes.find(text);
    EXPECT_NE(at, std::string::npos) << text << " not in " << path;
    return at == std::string::npos ? 0 : at;
  }
};

TEST_F(SharedFileMetadata, FlippedByteInTheSuperblockFallsBack) {
  const std::string why = restore_after_damaging_8([&] { flip_byte(data_file(8), 12); });
  EXPECT_THAT(why, ::testing::HasSubstr(data_file(8)));
}

// Unchecked, this flip would go unnoticed: the restore compares no scenario hash inside the file.
TEST_F(SharedFileMetadata, FlippedByteInAnAttributeValueFallsBack) {
  const std::string why = restore_after_damaging_8(
      [&] { flip_byte(data_file(8), offset_of(data_file(8), kHash) + 3); });
  EXPECT_THAT(why, ::testing::HasSubstr(data_file(8)));
}
