#pragma once
// Golden-output checks: a rendered text is a user interface, so any change to it is deliberate.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace tp::test {

// Compares `text` with tests/data/NAME; TRAINPROOF_UPDATE_GOLDEN=1 rewrites the file instead.
inline void expect_golden(const std::string& text, const std::string& name) {
  const std::string path = std::string(TRAINPROOF_TEST_DATA) + "/" + name;
  if (std::getenv("TRAINPROOF_UPDATE_GOLDEN")) std::ofstream(path) << text;
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing " << path;
  std::stringstream golden;
  golden << in.rdbuf();
  EXPECT_EQ(text, golden.str());
}

}  // namespace tp::test
