// Every bound in common/limits.h is hit by at least one test and enforced by
// code: this test reads the header, lists each `inline constexpr` bound, and
// fails for any bound that no test under tests/ names, or that no source of
// the supervisor, the helpers or common/ uses (comments do not count). It
// prints the table of which test files cover which bound (the enumeration the
// style guide asks for). The supervisor's memory bound is tied to MemoryMax=
// in its unit file.
#include <dirent.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

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
    {"kAutogroupNiceFirstRetryMs", "the retry schedule; Limits.AutogroupRetriesOutlastAStartOfEverySession"},
    {"kAutogroupNiceAttempts", "the retry schedule's end; Limits.AutogroupRetriesOutlastAStartOfEverySession"},
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

// The code of a C++ source without its comments; string and character
// literals stay (a bound named inside one is still named, harmlessly).
std::string WithoutComments(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 2, "//") == 0) {
      i = text.find('\n', i);
      if (i == std::string::npos) break;
    } else if (text.compare(i, 2, "/*") == 0) {
      size_t end = text.find("*/", i + 2);
      i = end == std::string::npos ? text.size() : end + 2;
      out += ' ';
    } else if (text[i] == 'R' && i + 1 < text.size() && text[i + 1] == '"' &&
               (i == 0 || !(isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '_'))) {
      size_t open = text.find('(', i + 2);
      if (open == std::string::npos) break;
      std::string close = ")" + text.substr(i + 2, open - i - 2) + "\"";
      size_t end = text.find(close, open);
      end = end == std::string::npos ? text.size() : end + close.size();
      out.append(text, i, end - i);
      i = end;
    } else if (text[i] == '"' || text[i] == '\'') {
      char quote = text[i];
      size_t j = i + 1;
      while (j < text.size() && text[j] != quote && text[j] != '\n') j += text[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, text.size());
      out.append(text, i, j - i);
      i = j;
    } else {
      out += text[i++];
    }
  }
  return out;
}

// Every .cc and .h under `dir`, recursively, by path.
void ReadSources(const std::string& root, const std::string& dir, std::map<std::string, std::string>* out) {
  DIR* d = opendir((root + "/" + dir).c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    std::string path = dir + "/" + name;
    // client/node is the Node module (JavaScript and its node_modules).
    if (name == "." || name == ".." || name == "node_modules" || path == "client/node") continue;
    struct stat st {};
    if (stat((root + "/" + path).c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      ReadSources(root, path, out);
    } else if (name.ends_with(".cc") || name.ends_with(".h")) {
      (*out)[path] = WithoutComments(Read(root + "/" + path));
    }
  }
  closedir(d);
}

// Bounds that systemd enforces, not our code: each is checked against the
// unit file by Limits.SupervisorMemoryMaxIsAboveTheBound.
const std::map<std::string, std::string> kEnforcedBySystemd = {
    {"kSupervisorMemoryMax", "MemoryMax= of units/opencode-pty-supervisor.service"},
    {"kSupervisorMemoryBound", "at most MemoryMax= of units/opencode-pty-supervisor.service"},
};

// A bound that is only named is not a bound: each is used by the code of the
// supervisor, a helper or common/ (comments do not count), or defines one in
// limits.h that is.
TEST(Limits, EveryBoundIsUsedByTheCode) {
  const std::string root = OPENCODE_SOURCE_DIR;
  std::string header = WithoutComments(Read(root + "/common/limits.h"));
  ASSERT_FALSE(header.empty());
  // Each bound with the text of its definition (up to its ';').
  std::regex decl(R"(inline\s+constexpr\s+[\w:]+\s+(k\w+)\s*=([^;]*);)");
  std::map<std::string, std::string> definitions;
  for (auto it = std::sregex_iterator(header.begin(), header.end(), decl);
       it != std::sregex_iterator(); ++it)
    definitions[(*it)[1]] = (*it)[2];
  ASSERT_GT(definitions.size(), 20u);
  for (const auto& [name, why] : kEnforcedBySystemd) EXPECT_TRUE(definitions.contains(name)) << name;

  std::map<std::string, std::string> sources;
  for (const char* dir : {"daemon", "launcher", "client", "common"}) ReadSources(root, dir, &sources);
  sources.erase("common/limits.h");
  ASSERT_GT(sources.size(), 20u);

  std::map<std::string, std::string> used;  // bound -> where
  for (const auto& [name, definition] : definitions) {
    if (kEnforcedBySystemd.contains(name)) {
      used[name] = kEnforcedBySystemd.at(name);
      continue;
    }
    std::regex use("\\b" + name + "\\b");
    for (const auto& [path, code] : sources)
      if (std::regex_search(code, use)) {
        used[name] = path;
        break;
      }
  }
  // A bound that defines a used one is used through it.
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [name, definition] : definitions) {
      if (!used.contains(name)) continue;
      for (const auto& [other, unused] : definitions)
        if (!used.contains(other) && std::regex_search(definition, std::regex("\\b" + other + "\\b"))) {
          used[other] = "through " + name;
          grew = true;
        }
    }
  }
  std::vector<std::string> dead;
  for (const auto& [name, definition] : definitions) {
    std::printf("%-28s %s\n", name.c_str(), used.contains(name) ? used[name].c_str() : "NOT USED");
    if (!used.contains(name)) dead.push_back(name);
  }
  EXPECT_TRUE(dead.empty()) << "bounds no code uses: " << ::testing::PrintToString(dead);
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

// The launcher's monitor tries its autogroup write again after
// kAutogroupNiceFirstRetryMs, doubling up to 64 times that, at most
// kAutogroupNiceAttempts times (launcher/main.cc, AutogroupNice): that
// outlasts the kernel's 100 ms per write for kMaxSessions sessions started
// at once, one write each. LauncherTest.AnAutogroupWriteTheKernelRefusedIsTriedAgain
// proves the retry itself.
TEST(Limits, AutogroupRetriesOutlastAStartOfEverySession) {
  using namespace opencode::limits;
  int64_t total_ms = 0;
  for (int attempt = 1; attempt < kAutogroupNiceAttempts; ++attempt)
    total_ms += int64_t{kAutogroupNiceFirstRetryMs} << (attempt < 7 ? attempt - 1 : 6);
  std::printf("retries span %lld ms; %zu sessions' writes need %zu ms\n", static_cast<long long>(total_ms),
              kMaxSessions, kMaxSessions * 100);
  EXPECT_GE(total_ms, int64_t(kMaxSessions * 100));
  EXPECT_GE(kAutogroupNiceFirstRetryMs, 100) << "no try before the kernel's 100 ms";
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
