// The crash report's text: what the signal handler formats into fixed buffers
// (common/signal_safe_text.h) and what `trainproof report` reads back and prints
// (app/report/crash_text.h).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "app/report/crash_text.h"
#include "common/crash_report.h"
#include "common/crash_stack.h"
#include "common/errors.h"
#include "common/signal_safe_text.h"

namespace fs = std::filesystem;
using nlohmann::json;

TEST(SignalSafeText, FormatsWithoutOverflowing) {
  char buffer[32];
  tp::SignalSafeText text(buffer, sizeof buffer);
  text.add("rank ").add_decimal(-42).add(" at ").add_hex(0x1f).add_char('!');
  EXPECT_STREQ(text.text(), "rank -42 at 0x1f!");
  EXPECT_FALSE(text.cut());
  text.add(" and a tail far longer than the buffer holds");
  EXPECT_TRUE(text.cut());
  EXPECT_EQ(text.size(), sizeof buffer - 1);
  EXPECT_EQ(std::string(text.text()).size(), sizeof buffer - 1);  // still terminated
}

TEST(SignalSafeText, NumbersAtTheirLimits) {
  char buffer[64];
  tp::SignalSafeText text(buffer, sizeof buffer);
  text.add_decimal(0).add(" ").add_decimal(LLONG_MIN).add(" ").add_hex(0).add(" ").add_hex(
      UINTPTR_MAX);
  EXPECT_STREQ(text.text(), "0 -9223372036854775808 0x0 0xffffffffffffffff");
}

TEST(SignalSafeText, JsonStringsEscapeWhatAHostileNameHolds) {
  char buffer[256];
  tp::SignalSafeText text(buffer, sizeof buffer);
  text.add_json_string("a\"b\\c\nd\x01\xc3\xa9</script>");
  const json parsed = json::parse(text.text());
  EXPECT_EQ(parsed.get<std::string>().substr(0, 8), "a\"b\\c\nd\x01");
  // Non-ASCII bytes are escaped one by one, so a cut never leaves half a UTF-8 sequence.
  EXPECT_EQ(std::string(text.text()).find('\xc3'), std::string::npos);
}

TEST(SignalSafeText, ACutJsonStringIsNeverHalfAnEscape) {
  for (size_t capacity = 2; capacity < 24; ++capacity) {
    char buffer[24];
    tp::SignalSafeText text(buffer, capacity);
    text.add_json_string("\n\n\n\x02\x02\x02");
    const std::string written = text.text();
    // Whatever was cut, no backslash is left dangling at the end.
    size_t backslashes = 0;
    for (size_t i = written.size(); i > 0 && written[i - 1] == '\\'; --i) ++backslashes;
    EXPECT_EQ(backslashes % 2, 0u) << "capacity " << capacity << ": " << written;
  }
}

// The frames of a crash no unwinder can walk: a call through a null pointer, as its context holds
// it (the instruction at 0, the return address at the stack pointer), named by module and offset.
TEST(CrashStack, WithoutAnUnwinderTheInterruptedContextStillNamesWhereItWas) {
  ucontext_t context{};
  greg_t stack[4] = {};
  stack[0] = greg_t(reinterpret_cast<uintptr_t>(&tp::prepare_crash_stack) + 4);
  context.uc_mcontext.gregs[REG_RIP] = 0;
  context.uc_mcontext.gregs[REG_RSP] = greg_t(reinterpret_cast<uintptr_t>(stack));
  tp::CrashFrame frames[4];
  ASSERT_EQ(tp::interrupted_frames(&context, frames, 4), 2);
  EXPECT_EQ(frames[0].ip, 0u);
  EXPECT_STREQ(frames[0].module, "");
  EXPECT_EQ(frames[1].ip, uintptr_t(stack[0]));
  EXPECT_NE(std::string(frames[1].module).find("unit_tests"), std::string::npos)
      << frames[1].module;
  EXPECT_GT(frames[1].module_offset, 0u);
  // An instruction in code needs no return address: one frame.
  context.uc_mcontext.gregs[REG_RIP] = greg_t(stack[0]);
  EXPECT_EQ(tp::interrupted_frames(&context, frames, 4), 1);
  EXPECT_EQ(tp::interrupted_frames(nullptr, frames, 4), 0);
}

TEST(CrashReport, SignalsByNameNeverByNumber) {
  EXPECT_STREQ(tp::crash_signal_name(SIGSEGV), "SIGSEGV");
  EXPECT_STREQ(tp::crash_signal_name(SIGBUS), "SIGBUS");
  EXPECT_STREQ(tp::crash_signal_name(SIGFPE), "SIGFPE");
  EXPECT_STREQ(tp::crash_signal_name(SIGILL), "SIGILL");
  EXPECT_STREQ(tp::crash_signal_name(SIGABRT), "SIGABRT");
  EXPECT_EQ(tp::crash_record_name(17), "crash-rank17.json");
}

namespace {

json crash_sample_record(int rank, const std::string& signal = "SIGSEGV") {
  return {{"format", "trainproof-crash/1"},
          {"signal", signal},
          {"signal_number", 11},
          {"code", "address not mapped"},
          {"address", "0x0"},
          {"sent_by_pid", 0},
          {"rank", rank},
          {"host", "node-" + std::to_string(rank / 8)},
          {"subcommand", "prepare-data"},
          {"pid", 100 + rank},
          {"thread", 100 + rank},
          {"unix_time_s", 1796321000},
          {"uncaught_exception", ""},
          {"frames",
           {{{"ip", "0x401000"},
             {"function", "_ZN2tp15on_fatal_signalEiP9siginfo_tPv"},
             {"function_offset", "0x53"},
             {"module", "/opt/tp/bin/trainproof"},
             {"module_offset", "0x1000"}},
            {{"ip", "0x0"}, {"function", ""}, {"module", ""}}}}};
}

}  // namespace

class CrashRecords : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ("crash-records-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (root_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  fs::path root_;
};

TEST_F(CrashRecords, AFolderIsReadByRankAndRenderedDemangled) {
  write("crash-rank3.json", crash_sample_record(3).dump());
  write("crash-rank1.json", crash_sample_record(1).dump());
  write("crash-rank2.json.part", "{half a rec");  // a record being written is not one yet
  write("rank-1.beat", "beats");
  ASSERT_TRUE(tp::is_crash_evidence(root_.string()));
  const auto records = tp::read_crash_records(root_.string());
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["rank"], 1);
  const std::string text = tp::render_crash_records(records);
  EXPECT_NE(text.find("crashed: 2 ranks"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 1 on node-0 (prepare-data): SIGSEGV at 0x0 (address not mapped)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tp::on_fatal_signal(int, siginfo_t*, void*)"), std::string::npos) << text;
  EXPECT_NE(text.find("(trainproof +0x1000)"), std::string::npos) << text;
  EXPECT_NE(text.find("  #1 0x0 ??"), std::string::npos) << text;
}

TEST_F(CrashRecords, AFolderWithoutRecordsIsNotCrashEvidence) {
  write("rank-0.beat", "beats");
  write("abort.json", R"({"format":"trainproof-abort/1"})");
  EXPECT_FALSE(tp::is_crash_evidence(root_.string()));
  EXPECT_FALSE(tp::is_crash_evidence(write("report.json", R"({"verdict":"PASS"})")));
}

TEST_F(CrashRecords, ABadRecordIsAUsageErrorNamingIt) {
  const std::string wrong_type = [&] {
    json record = crash_sample_record(0);
    record["rank"] = "zero";
    return write("crash-rank0.json", record.dump());
  }();
  try {
    tp::read_crash_records(wrong_type);
    FAIL() << "a rank that is a string was read";
  } catch (const tp::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("crash-rank0.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      tp::read_crash_records(write("crash-rank1.json", "{\"format\":\"trainproof-crash/1\"")),
      tp::UsageError);
  EXPECT_THROW(tp::read_crash_records(write(
                   "crash-rank2.json", "[" + std::string(5000, '[') + "\"trainproof-crash/1\"")),
               tp::UsageError);
}

TEST_F(CrashRecords, ASymlinkInTheFolderIsNotFollowed) {
  const fs::path outside = root_ / "elsewhere";
  fs::create_directories(outside);
  std::ofstream(outside / "crash-rank5.json") << crash_sample_record(5).dump();
  write("crash-rank1.json", crash_sample_record(1).dump());
  fs::create_symlink(outside / "crash-rank5.json", root_ / "crash-rank5.json");
  const auto records = tp::read_crash_records(root_.string());
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["rank"], 1);
}

TEST_F(CrashRecords, HostileTextIsPrintedInert) {
  json record = crash_sample_record(0);
  record["host"] = "n1\x1b]0;owned\x07\n$(reboot)";
  record["uncaught_exception"] = "std::runtime_error: \x1b[2J";
  const std::string text = tp::render_crash_records({record});
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find("\n$(reboot)"), std::string::npos) << text;
}

TEST(CrashRecordText, ThousandsOfRanksStayAPage) {
  std::vector<json> records;
  for (int rank = 0; rank < 4096; ++rank)
    records.push_back(crash_sample_record(rank, rank % 3 ? "SIGSEGV" : "SIGABRT"));
  const std::string text = tp::render_crash_records(records);
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  EXPECT_LT(lines, 60u) << text;
  EXPECT_NE(text.find("crashed: 4096 ranks"), std::string::npos);
  EXPECT_NE(text.find("4076 more ranks: 1359 SIGABRT, 2717 SIGSEGV"), std::string::npos) << text;
}
