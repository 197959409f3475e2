#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>

#include "common/errors.h"
#include "train/faults.h"

TEST(Faults, ParsesSlow) {
  const auto f = tp::parse_fault("slow:rank=3,ms=40");
  EXPECT_EQ(f.rank, 3);
  EXPECT_DOUBLE_EQ(f.ms, 40);
  EXPECT_FALSE(f.step.has_value());
  EXPECT_EQ(tp::parse_fault("slow:ms=1.5,rank=0,step=4").step.value(), 4);
}

TEST(Faults, RejectsMalformedSpecsNamingThem) {
  for (const char* bad : {"slow", "slow:", "slow:rank=1", "slow:rank=x,ms=3", "slow:rank=1,ms=-2",
                          "slow:rank=1,ms=2,colour=red", "slow:rank=1,rank=2,ms=1",
                          "explode:rank=1", "slow:rank=1.5,ms=2", "slow:rank=1,ms"}) {
    try {
      tp::parse_fault(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const tp::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(Faults, AFaultThatCanNeverFireIsRejected) {
  const auto faults = tp::parse_faults({"slow:rank=4,ms=1"});
  EXPECT_THROW(tp::validate_faults(faults, 4, 10, 0), tp::UsageError);
  EXPECT_NO_THROW(tp::validate_faults(faults, 5, 10, 0));
  EXPECT_THROW(tp::validate_faults(tp::parse_faults({"slow:rank=0,ms=1,step=11"}), 2, 10, 0),
               tp::UsageError);
  // A checkpoint phase at a step that takes no checkpoint can never fire.
  const auto commit = tp::parse_faults({"kill:rank=0,step=6,phase=ckpt-commit"});
  EXPECT_THROW(tp::validate_faults(commit, 2, 10, 4), tp::UsageError);
  try {
    tp::validate_faults(commit, 2, 10, 0);
    ADD_FAILURE() << "a ckpt-commit fault without checkpoints must be refused";
  } catch (const tp::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("ckpt-commit needs checkpoints"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(tp::validate_faults(commit, 2, 10, 3));
}

TEST(Faults, ParsesKillHangCorruptAndRandom) {
  const auto kill = tp::parse_fault("kill:rank=2,step=40,phase=ckpt-write");
  EXPECT_EQ(kill.kind, tp::FaultSpec::Kind::kill);
  EXPECT_EQ(kill.rank, 2);
  EXPECT_EQ(kill.step.value(), 40);
  EXPECT_EQ(kill.phase, "ckpt-write");
  EXPECT_EQ(tp::parse_fault("kill:rank=0,step=3").phase, "compute");
  const auto hang = tp::parse_fault("hang:rank=1,step=20");
  EXPECT_EQ(hang.kind, tp::FaultSpec::Kind::hang);
  const auto corrupt = tp::parse_fault("corrupt:rank=1,mode=truncate");
  EXPECT_EQ(corrupt.kind, tp::FaultSpec::Kind::corrupt);
  EXPECT_EQ(corrupt.rank, 1);
  EXPECT_EQ(corrupt.mode, "truncate");
  // rank=R as every other fault; shard=R, its first name, still reads.
  EXPECT_EQ(tp::parse_fault("corrupt:shard=2").rank, 2);
  EXPECT_EQ(tp::parse_fault("random:seed=7").seed, 7u);
  for (const char* bad : {"kill:rank=1", "kill:step=3", "kill:rank=1,step=3,phase=lunch",
                          "hang:rank=1,step=3,phase=ckpt-write", "corrupt:mode=shred",
                          "random:seed=x", "random:colour=1"}) {
    EXPECT_THROW(tp::parse_fault(bad), tp::UsageError) << bad;
  }
}

TEST(Faults, ParsesStopAtEveryPhaseAKillCanName) {
  const auto stop = tp::parse_fault("stop:rank=3,step=7,phase=comm");
  EXPECT_EQ(stop.kind, tp::FaultSpec::Kind::stop);
  EXPECT_EQ(stop.rank, 3);
  EXPECT_EQ(stop.step.value(), 7);
  EXPECT_EQ(stop.phase, "comm");
  EXPECT_EQ(tp::parse_fault("stop:rank=0,step=2").phase, "compute");
  for (const auto& phase : tp::kill_phases())
    EXPECT_EQ(tp::parse_fault("stop:rank=1,step=4,phase=" + phase).phase, phase);
  for (const char* bad : {"stop:rank=1", "stop:step=3", "stop:rank=1,step=3,phase=lunch",
                          "stop:rank=1,step=3,signal=9"})
    EXPECT_THROW(tp::parse_fault(bad), tp::UsageError) << bad;
  // A checkpoint phase is checked against the checkpoint interval, as a kill's is.
  const auto write = tp::parse_faults({"stop:rank=1,step=6,phase=ckpt-write"});
  EXPECT_THROW(tp::validate_faults(write, 2, 10, 4), tp::UsageError);
  EXPECT_THROW(tp::validate_faults(write, 2, 10, 0), tp::UsageError);
  EXPECT_NO_THROW(tp::validate_faults(write, 2, 10, 3));
  EXPECT_THROW(tp::validate_faults(tp::parse_faults({"stop:rank=2,step=1"}), 2, 10, 0),
               tp::UsageError);
}

// The victim records the fault, then stops itself, every thread with it; SIGCONT lets it go on.
TEST(Faults, StopRecordsItselfAndSigstopsItsOwnProcess) {
  const std::string dir = ::testing::TempDir() + "faults-stop";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directory(dir);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    tp::FaultInjector victim(tp::parse_faults({"stop:rank=2,step=5,phase=optimizer"}), 2, "h", dir);
    victim.at(5, tp::Phase::comm);  // not its phase
    victim.at(5, tp::Phase::optimizer);
    _exit(7);  // reached only once continued
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, WUNTRACED), child);
  ASSERT_TRUE(WIFSTOPPED(status)) << "status " << status;
  EXPECT_EQ(WSTOPSIG(status), SIGSTOP);
  const auto fired = tp::read_fired_faults(dir);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].kind, "stop");
  EXPECT_EQ(fired[0].rank, 2);
  EXPECT_EQ(fired[0].step, 5);
  EXPECT_EQ(fired[0].phase, "optimizer");
  kill(child, SIGCONT);
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 7) << "status " << status;
  std::filesystem::remove_all(dir);
}

TEST(Faults, RandomDrawsAKillThatCanFireAndReplaysFromItsSeed) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    const auto random = tp::parse_fault("random:seed=" + std::to_string(seed));
    const tp::FaultSpec kill = tp::resolve_random(random, 4, 20, 5);
    EXPECT_EQ(kill.kind, tp::FaultSpec::Kind::kill);
    EXPECT_EQ(kill.origin, random.text);
    EXPECT_NO_THROW(tp::validate_faults({kill}, 4, 20, 5)) << kill.text;
    EXPECT_EQ(tp::resolve_random(random, 4, 20, 5).text, kill.text);
  }
  // Without checkpoints only the step phases can be drawn.
  for (uint64_t seed = 1; seed <= 50; ++seed)
    EXPECT_EQ(tp::resolve_random(tp::parse_fault("random:seed=" + std::to_string(seed)), 2, 8, 0)
                  .phase.rfind("ckpt-", 0),
              std::string::npos);
}

TEST(Faults, SlowDelaysOnlyComputeOnItsRank) {
  using clock = std::chrono::steady_clock;
  auto time = [](tp::FaultInjector& inj, tp::Phase phase) {
    const auto start = clock::now();
    inj.at(1, phase);
    return std::chrono::duration<double, std::milli>(clock::now() - start).count();
  };
  tp::FaultInjector victim(tp::parse_faults({"slow:rank=1,ms=30"}), 1, "h", "/tmp");
  tp::FaultInjector bystander(tp::parse_faults({"slow:rank=1,ms=30"}), 0, "h", "/tmp");
  EXPECT_GE(time(victim, tp::Phase::compute), 30.0);
  EXPECT_TRUE(bystander.empty());
}

TEST(Faults, ParsesANodeLossByItsHost) {
  const auto node = tp::parse_fault("node:host=node07,step=20,phase=ckpt-write");
  EXPECT_EQ(node.kind, tp::FaultSpec::Kind::node);
  EXPECT_EQ(node.host, "node07");
  EXPECT_EQ(node.rank, -1);
  EXPECT_EQ(node.step.value(), 20);
  EXPECT_EQ(node.phase, "ckpt-write");
  EXPECT_EQ(tp::parse_fault("node:host=a,step=3").phase, "compute");
  for (const char* bad : {"node:step=3", "node:host=a", "node:rank=1,step=3",
                          "node:host=a,step=3,phase=warp", "random:seed=1,kinds=hang"}) {
    try {
      tp::parse_fault(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const tp::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
  // A host that runs no rank of the job can never fire.
  const std::vector<std::string> hosts = {"node01", "node07"};
  EXPECT_NO_THROW(tp::validate_faults({node}, 4, 20, 10, hosts));
  try {
    tp::validate_faults(tp::parse_faults({"node:host=node09,step=2"}), 4, 20, 10, hosts);
    ADD_FAILURE() << "accepted a host outside the job";
  } catch (const tp::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'node09' runs none of this job's ranks"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(tp::validate_faults({node}, 4, 20, 0, hosts), tp::UsageError);  // no checkpoints
}

TEST(Faults, RandomDrawsANodeOnlyWhenAskedAndAPlainSeedReplaysAsBefore) {
  const std::vector<std::string> hosts = {"n1", "n2", "n3"};
  int nodes = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const std::string id = std::to_string(seed);
    // kinds=kill, and no kinds at all, draw exactly what a seed drew before node losses existed.
    const auto plain = tp::resolve_random(tp::parse_fault("random:seed=" + id), 6, 20, 5, hosts);
    EXPECT_EQ(plain.text, tp::resolve_random(tp::parse_fault("random:seed=" + id), 6, 20, 5).text);
    EXPECT_EQ(plain.text, tp::resolve_random(tp::parse_fault("random:seed=" + id + ",kinds=kill"),
                                             6, 20, 5, hosts)
                              .text);
    const auto mixed = tp::resolve_random(tp::parse_fault("random:seed=" + id + ",kinds=kill+node"),
                                          6, 20, 5, hosts);
    EXPECT_NO_THROW(tp::validate_faults({mixed}, 6, 20, 5, hosts)) << mixed.text;
    if (mixed.kind == tp::FaultSpec::Kind::node) {
      ++nodes;
      EXPECT_EQ(mixed.text.rfind("node:host=n", 0), 0u) << mixed.text;
    }
    EXPECT_EQ(
        tp::resolve_random(tp::parse_fault("random:seed=" + id + ",kinds=node"), 6, 20, 5, hosts)
            .kind,
        tp::FaultSpec::Kind::node);
  }
  EXPECT_GT(nodes, 10);  // both kinds are drawn
  EXPECT_LT(nodes, 50);
}

TEST(Faults, ANodeLossKillsEveryRankOfTheNodeAtOnceAndRecordsThem) {
  const std::string dir = ::testing::TempDir() + "faults-node";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directory(dir);
  // Two processes of host "h2": a bystander rank, then the rank that reaches the point first.
  const pid_t bystander = fork();
  ASSERT_GE(bystander, 0);
  if (bystander == 0) {
    pause();
    _exit(0);
  }
  const pid_t victim = fork();
  ASSERT_GE(victim, 0);
  if (victim == 0) {
    tp::FaultInjector faults(tp::parse_faults({"node:host=h2,step=4,phase=comm"}), 3, "h2", dir);
    faults.set_node_processes([bystander] {
      return std::vector<tp::NodeProcess>{{2, int(bystander)}, {3, int(getpid())}};
    });
    faults.at(4, tp::Phase::compute);  // not its phase
    faults.at(4, tp::Phase::comm);
    _exit(7);  // never reached
  }
  int status = 0;
  ASSERT_EQ(waitpid(victim, &status, 0), victim);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  ASSERT_EQ(waitpid(bystander, &status, 0), bystander);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  const auto fired = tp::read_fired_faults(dir);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].kind, "node");
  EXPECT_EQ(fired[0].host, "h2");
  EXPECT_EQ(fired[0].rank, 3);
  EXPECT_EQ(fired[0].node_ranks, (std::vector<int>{2, 3}));
  // A rank of another host holds no part of it.
  EXPECT_TRUE(tp::FaultInjector(tp::parse_faults({"node:host=h2,step=4"}), 0, "h1", dir).empty());
  std::filesystem::remove_all(dir);
}
