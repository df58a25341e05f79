// Every bound in common/limits.h is hit by at least one test: this test reads
// the header, lists each `inline constexpr` bound, and fails for any bound
// that no test under tests/ names. It prints the table of which test files
// cover which bound (the enumeration the style guide asks for). The
// supervisor's memory bound is tied to MemoryMax= in its unit file.
#include <dirent.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "common/limits.h"

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
    {"kMaxFramePayload", "the larger of kMaxStartPayload and kMaxEnvPayload; Limits.EnvironmentBounds"},
    {"kMaxEnvPayload", "derived from kMaxEnvVars and kMaxEnvTotalBytes; Limits.EnvironmentBounds"},
    {"kMaxEnvPacketBytes", "kMaxEnvPayload plus the kind byte; Limits.EnvironmentBounds"},
    {"kDefaultCols", "a default, not a bound"},
    {"kDefaultRows", "a default, not a bound"},
    {"kSessionBuffersBound", "kMaxSessions x kSessionMemoryCap; Limits.SupervisorMemoryMaxIsAboveTheBound"},
    {"kSocketsWrittenPerSession", "part of kSupervisorMemoryBound"},
    {"kSocketSendBufferBytes", "the kernel's default, part of kSupervisorMemoryBound"},
    {"kStartMessageBytes", "derived from kMaxEncodedArgvBytes and kMaxArgs"},
    {"kSupervisorMemoryBound", "Limits.SupervisorMemoryMaxIsAboveTheBound"},
    {"kSupervisorMemoryMax", "Limits.SupervisorMemoryMaxIsAboveTheBound"},
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

// MemoryMax= of the supervisor's unit, in bytes (systemd's suffixes are
// powers of 1024); 0 when the line is missing or not a plain size.
uint64_t UnitMemoryMax(const std::string& unit) {
  std::smatch m;
  const std::regex line(R"((?:^|\n)MemoryMax=([0-9]+)([KMGT]?)[ \t]*(?=\n|$))");
  if (!std::regex_search(unit, m, line)) return 0;
  const std::string suffixes = "KMGT";
  size_t shift = m[2].length() == 0 ? 0 : 10 * (suffixes.find(m[2].str()) + 1);
  return std::stoull(m[1]) << shift;
}

TEST(Limits, SupervisorMemoryMaxIsAboveTheBound) {
  std::string unit = Read(std::string(OPENCODE_SOURCE_DIR) + "/units/opencode-pty-supervisor.service");
  ASSERT_FALSE(unit.empty());
  uint64_t max = UnitMemoryMax(unit);
  std::printf("MemoryMax=%llu, bound %zu (sessions %zu, sockets %zu, start messages %zu)\n",
              static_cast<unsigned long long>(max), opencode::limits::kSupervisorMemoryBound,
              opencode::limits::kSessionBuffersBound,
              opencode::limits::kMaxSessions * opencode::limits::kSocketsWrittenPerSession * 2 *
                  opencode::limits::kSocketSendBufferBytes,
              opencode::limits::kMaxSessions * opencode::limits::kStartMessageBytes);
  EXPECT_EQ(max, opencode::limits::kSupervisorMemoryMax) << "the unit and limits.h say the same";
  EXPECT_GE(max, opencode::limits::kSupervisorMemoryBound);
  EXPECT_EQ(opencode::limits::kSessionBuffersBound,
            opencode::limits::kMaxSessions * opencode::limits::kSessionMemoryCap);
}

// The environment overlay's bounds: every entry fits the kernel's
// MAX_ARG_STRLEN, the ENV frame fits the handshake buffer (kMaxFramePayload),
// the largest 'V' packet fits the unit channel's send buffer, and argv plus
// overlay at their bounds stay inside ARG_MAX's floor plus the fixed part at
// a quarter of a 608 KiB stack (tests/frame_test.cc, tests/unit_channel_test.cc
// and tests/launcher_test.cc hit each bound).
TEST(Limits, EnvironmentBounds) {
  using namespace opencode::limits;
  EXPECT_LT(kMaxEnvEntryBytes + 1, size_t{131072});
  EXPECT_LE(kMaxEnvNameBytes + 1, kMaxEnvEntryBytes);
  EXPECT_EQ(kMaxEnvPayload, 4 + 4 * kMaxEnvVars + kMaxEnvTotalBytes);
  EXPECT_EQ(kMaxEnvPacketBytes, 1 + kMaxEnvPayload);
  EXPECT_GE(kMaxFramePayload, kMaxEnvPayload);
  EXPECT_GE(kMaxFramePayload, kMaxStartPayload);
  EXPECT_GE(2 * kUnitChannelSendBufferBytes, kMaxEnvPacketBytes + 32);
  EXPECT_LE(2 * kUnitChannelSendBufferBytes, kSocketSendBufferBytes);
  // argv and overlay strings, their NULs, HOME and the envp/argv pointers.
  size_t exec_bytes = kMaxArgvTotalBytes + kMaxArgs + kMaxEnvTotalBytes + kMaxEnvVars + 4096 + 256 +
                      8 * (kMaxArgs + 1 + kMaxEnvVars + 16 + 1);
  EXPECT_LE(exec_bytes, size_t{608} * 1024 / 4);
}

}  // namespace
