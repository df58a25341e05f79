// Every bound in common/limits.h is hit by at least one test: this test reads
// the header, lists each `inline constexpr` bound, and fails for any bound
// that no test under tests/ names. It prints the table of which test files
// cover which bound (the enumeration the style guide asks for).
#include <dirent.h>

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Derived values and the signal payload size are not bounds a peer reaches
// on their own; each is listed with the bound that covers it.
const std::map<std::string, std::string> kDerived = {
    {"kMaxEncodedArgvBytes", "derived from kMaxArgvTotalBytes and kMaxArgs"},
    {"kStartFixedBytes", "part of kMaxStartPayload"},
    {"kMaxFramePayload", "equals kMaxStartPayload"},
    {"kDefaultCols", "a default, not a bound"},
    {"kDefaultRows", "a default, not a bound"},
};

TEST(Limits, EveryBoundIsNamedByATest) {
  std::string header = Read(std::string(OPENCODE_SOURCE_DIR) + "/common/limits.h");
  ASSERT_FALSE(header.empty());
  std::regex decl(R"(inline\s+constexpr\s+[\w:]+\s+(k\w+)\s*=)");
  std::set<std::string> bounds;
  for (auto it = std::sregex_iterator(header.begin(), header.end(), decl);
       it != std::sregex_iterator(); ++it)
    bounds.insert((*it)[1]);
  ASSERT_GT(bounds.size(), 20u);

  std::map<std::string, std::string> tests;
  std::string dir = std::string(OPENCODE_SOURCE_DIR) + "/tests";
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr);
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() > 8 && name.substr(name.size() - 8) == "_test.cc" && name != "limits_test.cc")
      tests[name] = Read(dir + "/" + name);
  }
  closedir(d);

  std::vector<std::string> uncovered;
  for (const std::string& b : bounds) {
    if (kDerived.contains(b)) {
      std::printf("%-28s (%s)\n", b.c_str(), kDerived.at(b).c_str());
      continue;
    }
    std::string files;
    std::regex use("\\b" + b + "\\b");
    for (const auto& [file, text] : tests)
      if (std::regex_search(text, use)) files += " " + file;
    std::printf("%-28s%s\n", b.c_str(), files.empty() ? " NOT COVERED" : files.c_str());
    if (files.empty()) uncovered.push_back(b);
  }
  EXPECT_TRUE(uncovered.empty()) << "bounds no test names: " << ::testing::PrintToString(uncovered);
}

}  // namespace
