#include "app/report/report_text.h"

#include <gtest/gtest.h>

#include "common/text_safety.h"

using nlohmann::json;

namespace {

json report_with_bytes() {
  json report = {{"context", {{"warnings", {"a folder on tmpfs"}}}},
                 {"checkpoint", {{"dir", "/ckpt/r\xe9sum\xe9"}}},
                 {"ranks", {{{"host", "node\xff"}}, {{"host", "node1"}}}}};
  report["context"]["environment"]["SLURM_R\xc9SUM\xc9"] = "1";
  report["context"]["environment"]["a/b~c\xe9"] = "2";
  return report;
}

}  // namespace

TEST(ReportText, TheSerialiserThrowsOnBytesThatAreNotUtf8) {
  // What lost the report of a complete run: the reason for escaping at all.
  EXPECT_THROW((void)report_with_bytes().dump(), json::type_error);
}

TEST(ReportText, EveryInvalidStringAndNameIsEscapedAndListed) {
  json report = report_with_bytes();
  const tp::EscapedText found = tp::escape_invalid_text(report);
  EXPECT_EQ(found.strings, (std::vector<std::string>{"/checkpoint/dir", "/ranks/0/host"}));
  EXPECT_EQ(found.keys, (std::vector<std::string>{"/context/environment/SLURM_R\\xC9SUM\\xC9",
                                                  "/context/environment/a~1b~0c\\xE9"}));
  EXPECT_NO_THROW((void)report.dump());
  EXPECT_EQ(report["checkpoint"]["dir"], "/ckpt/r\\xE9sum\\xE9");
  EXPECT_EQ(tp::unescape_invalid_utf8(report["checkpoint"]["dir"].get<std::string>()),
            "/ckpt/r\xe9sum\xe9");
  EXPECT_EQ(report["context"]["environment"]["SLURM_R\\xC9SUM\\xC9"], "1");
  EXPECT_EQ(report["ranks"][1]["host"], "node1");
  // Every pointer resolves in the escaped tree.
  for (const std::string& pointer : found.strings)
    EXPECT_TRUE(report.at(json::json_pointer(pointer)).is_string()) << pointer;
  for (const std::string& pointer : found.keys)
    EXPECT_TRUE(report.contains(json::json_pointer(pointer))) << pointer;
}

TEST(ReportText, ReportListsWhatWasEscapedAndWarnsOnce) {
  json report = report_with_bytes();
  tp::make_report_text_valid(report);
  const json& context = report["context"];
  EXPECT_EQ(context["escaped_strings"], json({"/checkpoint/dir", "/ranks/0/host"}));
  EXPECT_EQ(context["escaped_keys"].size(), 2u);
  ASSERT_EQ(context["warnings"].size(), 2u);
  EXPECT_EQ(context["warnings"][0], "a folder on tmpfs");
  EXPECT_EQ(context["warnings"][1].get<std::string>().rfind(tp::kEscapedTextWarning, 0), 0u);
  EXPECT_NE(context["warnings"][1].get<std::string>().find("2 string(s) and 2 member name(s)"),
            std::string::npos);

  // A drill's report extends its final run's: the lists grow and the warning is replaced.
  report["drill"]["folder"] = "/ckpt/r\xe9sum\xe9/drill-1";
  tp::make_report_text_valid(report);
  EXPECT_EQ(report["context"]["escaped_strings"],
            json({"/checkpoint/dir", "/ranks/0/host", "/drill/folder"}));
  ASSERT_EQ(report["context"]["warnings"].size(), 2u);
  EXPECT_NE(report["context"]["warnings"][1].get<std::string>().find("3 string(s)"),
            std::string::npos);
}

TEST(ReportText, ValidReportGetsEmptyListsAndNoWarning) {
  json report = {{"context", {{"warnings", json::array()}}}, {"train", {{"steps", 3}}}};
  tp::make_report_text_valid(report);
  EXPECT_EQ(report["context"]["escaped_strings"], json::array());
  EXPECT_EQ(report["context"]["escaped_keys"], json::array());
  EXPECT_EQ(report["context"]["warnings"], json::array());
}

TEST(ReportText, DumpEscapedNeverThrows) {
  EXPECT_EQ(tp::dump_escaped({{"name", "GPU \xe9"}}), R"({"name":"GPU \\xE9"})");
}
