// Capability drop: parsing /proc/<pid>/status, and the drop itself in a
// child process (the supervisor runs as uid 0; so do these tests in CI).
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "daemon/caps.h"

namespace opencode::daemon {
namespace {

TEST(Caps, ParsesTheStatusLines) {
  auto c = ParseCapabilities(
      "Name:\tx\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\n"
      "CapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\nNoNewPrivs:\t0\n");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->effective, 0x1ffffffffffULL);
  EXPECT_EQ(c->ambient, 0u);
  EXPECT_FALSE(ParseCapabilities("CapInh:\t0\nCapPrm:\t0\n").ok()) << "missing lines";
  EXPECT_FALSE(ParseCapabilities("CapInh:\tzz\nCapPrm:\t0\nCapEff:\t0\nCapBnd:\t0\nCapAmb:\t0\n").ok());
}

TEST(Caps, DropLeavesEverySetEmpty) {
  if (geteuid() != 0) GTEST_SKIP() << "needs uid 0 (the supervisor's uid)";
  pid_t pid = fork();
  if (pid == 0) {
    absl::Status st = DropAllCapabilities();
    if (!st.ok()) _exit(1);
    auto c = ReadOwnCapabilities();
    if (!c.ok()) _exit(2);
    _exit(c->effective == 0 && c->bounding == 0 && c->permitted == 0 && c->inheritable == 0 &&
                  c->ambient == 0
              ? 0
              : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace opencode::daemon
