// The GPU path's logic that needs no GPU: loader failure, context fields (device assignment:
// test_gpu_assignment.cpp).
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "app/report/context.h"
#include "gpu/gpu_loader.h"

TEST(GpuLogic, VersionStrings) {
  EXPECT_EQ(tp::nccl_version_string(22809), "2.28.9");
  EXPECT_EQ(tp::nccl_version_string(21903), "2.19.3");
  EXPECT_EQ(tp::cuda_version_string(13000), "13.0");
  EXPECT_EQ(tp::cuda_version_string(12040), "12.4");
  EXPECT_EQ(tp::cuda_version_string(0), "");
}

TEST(GpuLogic, ClockAndPersistenceWarnings) {
  const std::string csv =
      "0, Enabled, 1980, 1980\n"
      "1, Disabled, 1980, 1980\n"
      "2, Enabled, 1410, 1980\n"
      "3, Enabled, [N/A], [N/A]\n";
  const auto w = tp::gpu_clock_warnings(csv, "node7");
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NE(w[0].find("GPU 1 on node7: persistence mode is off"), std::string::npos);
  EXPECT_NE(w[1].find("GPU 2 on node7: application clock 1410 MHz"), std::string::npos);
  EXPECT_TRUE(tp::gpu_clock_warnings("", "x").empty());
}

TEST(GpuLogic, InventoryFields) {
  tp::GpuDevice d;
  d.index = 1;
  d.name = "NVIDIA H200";
  d.uuid = "GPU-0123";
  d.pci_bus_id = "0000:1b:00.0";
  d.memory_bytes = 150000000000ull;
  d.sm_count = 132;
  d.sm_clock_mhz = 1980;
  d.memory_clock_mhz = 3201;
  d.compute_capability = 90;
  d.compute_mode = 3;
  tp::GpuDevice second = d;
  second.index = 2;
  second.uuid = "GPU-4567";
  second.pci_bus_id = "0000:2c:00.0";
  const auto j = tp::gpu_inventory({d, second}, "node7");
  ASSERT_EQ(j.size(), 2u);
  // Every field of the device, under its report name, and nothing else.
  const nlohmann::json expected = {{"host", "node7"},
                                   {"index", 1},
                                   {"name", "NVIDIA H200"},
                                   {"uuid", "GPU-0123"},
                                   {"pci_bus_id", "0000:1b:00.0"},
                                   {"memory_bytes", 150000000000ull},
                                   {"sm_count", 132},
                                   {"compute_capability", 90},
                                   {"compute_mode", 3},
                                   {"max_sm_clock_mhz", 1980},
                                   {"max_memory_clock_mhz", 3201}};
  EXPECT_EQ(j[0], expected) << j[0].dump(2);
  // One entry per device, in the order given.
  EXPECT_EQ(j[1]["index"], 2);
  EXPECT_EQ(j[1]["uuid"], "GPU-4567");
  EXPECT_EQ(j[1]["pci_bus_id"], "0000:2c:00.0");
  EXPECT_EQ(j[1]["host"], "node7");
  EXPECT_TRUE(tp::gpu_inventory({}, "node7").empty());
}

// Run last in this process: the loader caches its one attempt.
TEST(GpuLogic, LoaderReportsAMissingLibrary) {
  setenv("TRAINPROOF_GPU_LIB", "/nonexistent/libtrainproof_gpu.so", 1);
  const tp::GpuLibrary& lib = tp::load_gpu_library();
  EXPECT_EQ(lib.api, nullptr);
  EXPECT_EQ(lib.path, "/nonexistent/libtrainproof_gpu.so");
  EXPECT_NE(lib.error.find("libtrainproof_gpu.so"), std::string::npos) << lib.error;
  unsetenv("TRAINPROOF_GPU_LIB");
}
