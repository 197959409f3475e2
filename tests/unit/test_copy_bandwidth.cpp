// node-check's memory and copy figures judged against their peers (node/copy_bandwidth.h), on
// synthetic figures for one 8-GPU node: a healthy spread gives nothing, a GPU whose host-to-device
// copies run at 60% of its peers' is named with that figure, and a slow or missing peer path is
// named with its pair.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "node/copy_bandwidth.h"
#include "node/inventory_spec.h"

namespace {

using ::testing::HasSubstr;

tp::CopyRecord healthy_node() {
  tp::CopyRecord r;
  r.backend = "cuda";
  r.pairs_alike = true;  // an NVSwitch baseboard
  const double spread[] = {1.00, 0.98, 1.02, 0.99, 1.01, 0.97, 1.03, 1.00};
  for (int g = 0; g < 8; ++g) {
    tp::CopyDevice d;
    d.gpu = g;
    d.uuid = "GPU-" + std::to_string(100 + g);
    d.device_gbps = 3900 * spread[g];
    d.h2d_gbps = 55 * spread[7 - g];
    d.d2h_gbps = 54 * spread[g];
    r.devices.push_back(d);
  }
  for (int s = 0; s < 8; ++s)
    for (int t = 0; t < 8; ++t)
      if (s != t) r.pairs.push_back({s, t, 370 * spread[(s + t) % 8]});
  return r;
}

std::vector<std::string> reasons(const tp::CopyRecord& r) {
  std::vector<std::string> out;
  for (const tp::HealthFinding& f : tp::judge_copies("n7", r, {}))
    out.push_back(f.status + " " + f.reason);
  return out;
}

TEST(CopyBandwidth, AHealthyNodeWithinThreePercentGivesNothing) {
  EXPECT_TRUE(reasons(healthy_node()).empty());
}

TEST(CopyBandwidth, AGpuWithSlowHostCopiesIsNamedWithThatFigureAlone) {
  tp::CopyRecord r = healthy_node();
  r.devices[5].h2d_gbps = 0.6 * 55;
  const auto found = reasons(r);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_THAT(found[0], HasSubstr("fail n7: GPU 5 (GPU-105): host-to-device copy 33"));
  EXPECT_THAT(found[0], HasSubstr("of the best GPU of its node"));
}

TEST(CopyBandwidth, ASlowPairAndAMissingPeerPathAreNamedWithTheirPair) {
  tp::CopyRecord r = healthy_node();
  r.pairs[9].gbps = 0.5 * 370;  // GPU 1 -> GPU 3
  r.pairs[20].gbps = 0;         // GPU 2 -> GPU 7: no peer path
  const auto found = reasons(r);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0], "warn n7: GPU 2 -> GPU 7: no peer path, while 55 other pair(s) have one");
  EXPECT_THAT(found[1], HasSubstr("fail n7: GPU 1 -> GPU 3: peer copy 185.0 GB/s, 49% of the "
                                  "node's best pair"));
  // Where pairs run over different paths (sockets, NVLink bridges), they are only recorded.
  r.pairs_alike = false;
  EXPECT_TRUE(reasons(r).empty());
}

TEST(CopyBandwidth, ANodeWithoutPeerPathsIsNoFindingAndAFailedDeviceIs) {
  tp::CopyRecord r = healthy_node();
  for (tp::PeerCopy& p : r.pairs) p.gbps = 0;  // a PCIe node without P2P: normal
  r.devices[2].error = "cudaMalloc: out of memory";
  const auto found = reasons(r);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0], "fail n7: GPU 2: the copies failed: cudaMalloc: out of memory");
}

TEST(CopyBandwidth, AHostFilesFloorFailsEveryFigureBelowIt) {
  tp::CopyRecord r = healthy_node();
  r.floors.h2d = 54;  // GPUs 2 and 6 copy just under it, at 53.4 and 53.9 GB/s
  r.floors.peer = 375;
  r.pairs_alike = false;  // a floor holds whatever the paths
  const auto found = reasons(r);
  int h2d = 0, peer = 0;
  for (const std::string& f : found) {
    h2d += f.find("host-to-device copy") != std::string::npos;
    peer += f.find("below the host file's floor of 375.0 GB/s") != std::string::npos;
    EXPECT_EQ(f.rfind("fail ", 0), 0u) << f;
  }
  EXPECT_EQ(h2d, 2);
  EXPECT_GT(peer, 0);
  EXPECT_EQ(size_t(h2d + peer), found.size());
}

TEST(CopyBandwidth, TheFloorsAndRulesAreReadFromAHostFilesHealthSection) {
  const tp::InventoryLines lines = {{"health.min_gemm_tflops", {"700", 3}},
                                    {"health.min_h2d_gbps", {"50", 4}},
                                    {"health.min_peer_copy_gbps", {"350.5", 5}},
                                    {"health.fatal_xids", {"13, 31", 6}}};
  const tp::InventorySpec spec = tp::parse_inventory("h.ini", lines);
  EXPECT_EQ(spec.min_gemm_tflops, 700);
  EXPECT_EQ(spec.min_h2d_gbps, 50);
  EXPECT_EQ(spec.min_peer_copy_gbps, 350.5);
  EXPECT_EQ(spec.min_d2h_gbps, 0);
  EXPECT_EQ(spec.xids.fatal, (std::vector<long long>{13, 31}));
  EXPECT_TRUE(spec.empty());  // [health] alone states no inventory
  EXPECT_THROW(tp::parse_inventory("h.ini", {{"health.min_h2d_gbps", {"fast", 4}}}),
               std::exception);
}

TEST(CopyBandwidth, PairsAreJudgedTogetherWhereTheDriverSeesNvlinkEverywhereOrTheHostFileSaysSo) {
  tp::DriverView driver;
  driver.gpus.resize(8);
  EXPECT_FALSE(driver.every_pair_nvlink()) << "the driver could not say";
  driver.nvlink_pairs = 28;
  EXPECT_TRUE(driver.every_pair_nvlink());
  driver.nvlink_pairs = 21;  // one GPU reaches no peer over NVLink
  EXPECT_FALSE(driver.every_pair_nvlink());
  driver.gpus.resize(1);
  driver.nvlink_pairs = 0;
  EXPECT_FALSE(driver.every_pair_nvlink()) << "one GPU has no pair";
  EXPECT_FALSE(tp::copy_options_of(60, nullptr, "/sys", false).pairs_alike);
  EXPECT_TRUE(tp::copy_options_of(60, nullptr, "/sys", true).pairs_alike);
  tp::InventorySpec spec;
  spec.nvlinks_per_gpu = 18;
  spec.min_peer_copy_gbps = 300;
  const tp::CopyOptions stated = tp::copy_options_of(60, &spec, "/sys", false);
  EXPECT_TRUE(stated.pairs_alike);
  EXPECT_DOUBLE_EQ(stated.floors.peer, 300);
  EXPECT_DOUBLE_EQ(stated.seconds, 1.0);
  EXPECT_DOUBLE_EQ(tp::copy_options_of(1, nullptr, "/sys", false).seconds, 0.1);
}

}  // namespace
