#include <gtest/gtest.h>

#include "checkpoint/folder_facts.h"

namespace {

TEST(FolderFacts, NamesTheFilesystemOfAPath) {
  const std::string type = tp::filesystem_type("/proc");
  EXPECT_EQ(type, "unknown (0x9fa0)");  // procfs is deliberately not in the table
  EXPECT_EQ(tp::filesystem_type("/no/such/folder"), "unknown");
}

TEST(FolderFacts, NodeLocalFilesystemWarnsOnlyWhenTheRunSpansNodes) {
  const tp::CheckpointFolderFacts local{"/scratch/ckpt", "xfs", {}};
  EXPECT_TRUE(tp::checkpoint_folder_warnings(local, 1).empty());
  const auto warnings = tp::checkpoint_folder_warnings(local, 4);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("node-local filesystem (xfs)"), std::string::npos);
  EXPECT_NE(warnings[0].find("4 nodes"), std::string::npos);
  const tp::CheckpointFolderFacts lustre{"/lustre/ckpt", "lustre", {}};
  EXPECT_TRUE(tp::checkpoint_folder_warnings(lustre, 64).empty());
}

TEST(FolderFacts, TmpfsAlwaysWarns) {
  const tp::CheckpointFolderFacts memory{"/dev/shm/ckpt", "tmpfs", {}};
  const auto warnings = tp::checkpoint_folder_warnings(memory, 1);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("tmpfs"), std::string::npos);
}

TEST(FolderFacts, WhatThePreflightFoundIsReported) {
  const tp::CheckpointFolderFacts facts{"/lustre/ckpt", "lustre", {"refuses flock"}};
  EXPECT_EQ(tp::checkpoint_folder_warnings(facts, 1), std::vector<std::string>{"refuses flock"});
}

}  // namespace
