// What a session's end means to the client (daemon/session/exit_report.h), as one
// table: every mapping SessionTest proves end to end has its row here (named
// after that test), with the edges the session cannot reach cheaply.
#include "daemon/session/exit_report.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <optional>
#include <string>
#include <vector>

#include "common/launch.h"

namespace opencode::daemon {
namespace {

UnitExit Unit(int32_t exec_main_code, int32_t exec_main_status, std::string_view result) {
  return UnitExit{.exec_main_code = exec_main_code, .exec_main_status = exec_main_status,
                  .result = UnitResult::Parse(result)};
}

// The facts, built in the order the session learns them.
struct Facts {
  explicit Facts(UnitExit unit) { f.unit = std::move(unit); }
  Facts& Executed() { f.executed = true; return *this; }
  Facts& Exited(uint8_t status) { f.command = CommandExit{ExitHow::kExited, status, 0}; return *this; }
  Facts& Killed(uint8_t signo) { f.command = CommandExit{ExitHow::kKilled, 0, signo}; return *this; }
  Facts& Dumped(uint8_t signo) { f.command = CommandExit{ExitHow::kDumped, 0, signo}; return *this; }
  Facts& Failed(uint8_t status) { f.launch_failure = status; return *this; }
  Facts& Stop() { f.stop_requested = true; return *this; }
  ExitFacts f;
};

struct Want {
  ExitReport::Type type = ExitReport::Type::kExit;
  std::optional<int64_t> code;
  std::string signal;  // "" is null
  std::string result;
  bool exact = false;
  std::string reason;  // kLaunchFailed
  int status = 0;
};

constexpr std::nullopt_t kNull = std::nullopt;

Want Exit(std::optional<int64_t> code, std::string signal, std::string result, bool exact) {
  Want w;
  w.code = code;
  w.signal = std::move(signal);
  w.result = std::move(result);
  w.exact = exact;
  return w;
}
Want LaunchFailed(std::string reason, int status) {
  Want w;
  w.type = ExitReport::Type::kLaunchFailed;
  w.reason = std::move(reason);
  w.status = status;
  return w;
}

struct Row {
  const char* name;
  Facts facts;
  Want want;
};

TEST(ExitReportTest, EveryEndAsTheClientSeesIt) {
  const std::vector<Row> rows = {
      // ---- the cases SessionTest proves end to end
      {"HappyPathStartedOutputInputExitAfterProof",
       Facts(Unit(CLD_EXITED, 7, "exit-code")), Exit(7, "", "exit-code", false)},
      {"ASignalGoesToTheMonitorAndTheExitIsTheCommands",
       Facts(Unit(CLD_EXITED, 128 + 9, "exit-code")).Executed().Killed(9), Exit(kNull, "KILL", "signal", true)},
      {"InputAfterTheCommandsEndIsNotForwarded",
       Facts(Unit(CLD_EXITED, 3, "exit-code")).Exited(3), Exit(3, "", "exit-code", true)},
      {"TheMonitorsReportIsTheExit",
       Facts(Unit(CLD_EXITED, 3, "exit-code")).Executed().Exited(3), Exit(3, "", "exit-code", true)},
      {"AnOomKilledCommandIsKillWithResultOomKill",
       Facts(Unit(CLD_KILLED, 9, "oom-kill")).Executed().Killed(9), Exit(kNull, "KILL", "oom-kill", true)},
      {"AKilledCommandIsSignalUnlessSystemdSawAnOomKill",
       Facts(Unit(CLD_KILLED, 15, "oom-kill")).Executed().Killed(15), Exit(kNull, "TERM", "signal", true)},
      {"ACoreDumpIsTheSignalNotCode139",
       Facts(Unit(CLD_EXITED, 139, "exit-code")).Executed().Dumped(11), Exit(kNull, "SEGV", "core-dump", true)},
      {"ALauncherFailureIsLaunchFailedNotAnExit",
       Facts(Unit(CLD_EXITED, 105, "exit-code")).Failed(kLaunchBadPrefix), LaunchFailed("bad_prefix", 105)},
      {"AnUnreportedLauncherStatusBeforeTheExecIsLaunchFailed",
       Facts(Unit(CLD_EXITED, kLaunchHandoff, "exit-code")), LaunchFailed("handoff", 123)},
      {"ACommandExitingWithALauncherNumberIsItsExit",
       Facts(Unit(CLD_EXITED, 105, "exit-code")).Executed().Exited(105), Exit(105, "", "exit-code", true)},
      {"NoReportAfterAStopIsNeverCodeZero",
       Facts(Unit(CLD_EXITED, 0, "timeout")).Executed().Stop(), Exit(kNull, "KILL", "timeout", false)},
      {"AStopBeforeTheCommandRanIsAStopNotALaunchFailure",
       Facts(Unit(CLD_EXITED, 125, "exit-code")).Stop().Failed(kLaunchMonitor), Exit(kNull, "TERM", "exit-code", false)},
      {"ACollectedUnitEndsWithTheCommandsReport",
       Facts(CollectedUnitExit()).Executed().Exited(7), Exit(7, "", "exit-code", true)},
      {"ACollectedUnitWithoutAReportEndedCleanly",
       Facts(CollectedUnitExit()), Exit(0, "", "success", false)},
      {"ACollectedUnitAfterAStopWithoutAReportIsTerm",
       Facts(CollectedUnitExit()).Stop(), Exit(kNull, "TERM", "signal", false)},
      {"AStoppedCommandIsNeverASuccess",
       Facts(Unit(CLD_EXITED, 0, "success")).Executed().Stop().Killed(1), Exit(kNull, "HUP", "signal", true)},
      {"AStopWithoutAReportIsTermNotSuccess",
       Facts(Unit(CLD_EXITED, 0, "success")).Stop(), Exit(kNull, "TERM", "signal", false)},
      {"ALauncherThatEndedBeforeItsGoIsLaunchFailed",
       Facts(Unit(CLD_EXITED, 101, "exit-code")).Failed(kLaunchChdir), LaunchFailed("chdir", 101)},
      {"NoReportAndScriptsOneTwentyEightPlusNIsTheSignal",
       Facts(Unit(CLD_EXITED, 128 + 9, "exit-code")).Executed(), Exit(kNull, "KILL", "exit-code", false)},
      // A refused packet leaves nothing believed: the unit's view decides.
      {"APacketFromTheUnitThatDoesNotParseStopsTheReading",
       Facts(Unit(CLD_EXITED, 7, "exit-code")), Exit(7, "", "exit-code", false)},
      {"ARepeatedReportStopsTheReading",
       Facts(Unit(CLD_EXITED, 7, "exit-code")).Executed(), Exit(7, "", "exit-code", false)},
      {"FinishedUnitWhoseStreamNeverEndsGetsOutputIncompleteThenExit",
       Facts(Unit(CLD_KILLED, SIGTERM, "success")).Stop(), Exit(kNull, "TERM", "signal", false)},
      // The reaper giving up is a notice before the exit; the exit is the same.
      {"AnExitAfterAReaperThatGaveUpIsPrecededByItsNotice",
       Facts(Unit(CLD_EXITED, 0, "success")), Exit(0, "", "success", false)},

      // ---- edges
      {"an exact exit 0 is a success whatever systemd says",
       Facts(Unit(CLD_EXITED, 0, "exit-code")).Executed().Exited(0), Exit(0, "", "success", true)},
      {"a core dump of KILL in an OOM-killed unit stays core-dump",
       Facts(Unit(CLD_KILLED, 9, "oom-kill")).Executed().Dumped(9), Exit(kNull, "KILL", "core-dump", true)},
      {"a real-time signal has no name: its number",
       Facts(Unit(CLD_EXITED, 0, "success")).Executed().Killed(34), Exit(kNull, "34", "signal", true)},
      {"no report, script killed: systemd's signal and Result",
       Facts(Unit(CLD_KILLED, 9, "signal")).Executed(), Exit(kNull, "KILL", "signal", false)},
      {"no report, script dumped core",
       Facts(Unit(CLD_DUMPED, 11, "core-dump")).Executed(), Exit(kNull, "SEGV", "core-dump", false)},
      {"no report, script killed with Result success is still a signal",
       Facts(Unit(CLD_KILLED, 1, "success")).Executed(), Exit(kNull, "HUP", "signal", false)},
      {"no report after a stop, script killed: its signal, not TERM",
       Facts(Unit(CLD_KILLED, 9, "signal")).Executed().Stop(), Exit(kNull, "KILL", "signal", false)},
      {"the main process never started: neither code nor signal",
       Facts(Unit(0, 0, "resources")), Exit(kNull, "", "resources", false)},
      {"never started, then a stop: TERM",
       Facts(Unit(0, 0, "resources")).Stop(), Exit(kNull, "TERM", "resources", false)},
      {"128+64 is the last signal script can mean",
       Facts(Unit(CLD_EXITED, 128 + 64, "exit-code")).Executed(), Exit(kNull, "64", "exit-code", false)},
      {"128+65 is a code",
       Facts(Unit(CLD_EXITED, 128 + 65, "exit-code")).Executed(), Exit(193, "", "exit-code", false)},
      {"128 is a code",
       Facts(Unit(CLD_EXITED, 128, "exit-code")).Executed(), Exit(128, "", "exit-code", false)},
      {"a launcher status after a stop is the stop",
       Facts(Unit(CLD_EXITED, kLaunchHandoff, "exit-code")).Stop(), Exit(kNull, "TERM", "exit-code", false)},
      {"a launcher status after the exec is the command's",
       Facts(Unit(CLD_EXITED, kLaunchHandoff, "exit-code")).Executed(), Exit(123, "", "exit-code", false)},
      {"a number next to the launcher's is the command's",
       Facts(Unit(CLD_EXITED, 97, "exit-code")), Exit(97, "", "exit-code", false)},
      {"a launcher failure after the exec, with a stop, is still launch_failed",
       Facts(Unit(CLD_EXITED, 125, "exit-code")).Executed().Stop().Failed(kLaunchMonitor), LaunchFailed("monitor", 125)},
      {"the launcher's report wins over the unit's status",
       Facts(Unit(CLD_EXITED, 0, "success")).Failed(kLaunchEnv), LaunchFailed("env", 98)},
      {"a Result systemd added later is passed on as it is",
       Facts(Unit(CLD_EXITED, 3, "frobnicated")).Executed(), Exit(3, "", "frobnicated", false)},
      {"an exact signal is `signal` whatever the Result",
       Facts(Unit(CLD_EXITED, 0, "frobnicated")).Executed().Killed(15), Exit(kNull, "TERM", "signal", true)},
      {"an unknown Result without a report and a stop",
       Facts(Unit(CLD_EXITED, 0, "frobnicated")).Stop(), Exit(kNull, "TERM", "frobnicated", false)},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    ExitReport got = DecideExit(row.facts.f);
    ASSERT_EQ(got.type, row.want.type);
    if (got.type == ExitReport::Type::kLaunchFailed) {
      EXPECT_EQ(got.error, ErrorCode::kLaunchFailed);
      EXPECT_EQ(got.reason, row.want.reason);
      EXPECT_EQ(got.status, row.want.status);
      continue;
    }
    EXPECT_EQ(got.code, row.want.code);
    EXPECT_EQ(got.signal, row.want.signal);
    EXPECT_EQ(got.result, row.want.result);
    EXPECT_EQ(got.exact, row.want.exact);
  }
}

// systemd's Result is parsed once; each word it documents comes back as it
// went in, and so does one it may add.
TEST(ExitReportTest, SystemdResultWordsSurviveTheParse) {
  for (std::string_view word : {"success", "protocol", "timeout", "exit-code", "signal", "core-dump",
                                "watchdog", "start-limit-hit", "resources", "oom-kill",
                                "exec-condition", "cleaned"}) {
    UnitResult r = UnitResult::Parse(word);
    EXPECT_NE(r.kind, UnitResult::Kind::kUnknown) << word;
    EXPECT_EQ(r.Text(), word);
  }
  UnitResult unknown = UnitResult::Parse("frobnicated");
  EXPECT_EQ(unknown.kind, UnitResult::Kind::kUnknown);
  EXPECT_EQ(unknown.Text(), "frobnicated");
  EXPECT_EQ(UnitResult::Parse("").Text(), "");
}

}  // namespace
}  // namespace opencode::daemon
