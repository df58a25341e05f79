// What the supervisor and the launcher agree on about a PTY unit's start
// (docs/SECURITY.md "The read-back is a gate", "The unit channel"): the two
// bytes the supervisor writes on the PTY stream before the client's input
// (the channel's handoff, the go), the launcher's own failure statuses with
// their stable names, and the two statuses that are the command's.
// Invariants: the supervisor writes the go byte only after systemd's read-back
// of the unit passed, and before any byte of the client's input; the launcher
// execs nothing before it has read exactly this byte. A launcher failure is
// reported as 'F' + status on the unit channel (once the launcher holds it)
// and as the unit's exit status; the supervisor turns it into the error
// `launch_failed` with the status's name, never into a command's exit.
#pragma once

#include <cstdint>
#include <string_view>

namespace opencode {

// The one byte that carries the unit channel's unit end (one SCM_RIGHTS
// descriptor) on the PTY stream, before StartTransientUnit.
inline constexpr char kChannelHandoffByte = 'R';
// The go: written only after the read-back passed.
inline constexpr char kLaunchGoByte = 'G';

// Exit statuses of the launcher's own failures. 98..125 stay clear of a
// shell's 126/127 (which the command's parent reports as the command's exit,
// like a shell), of 128+n and of systemd's 200..245; the unit channel says
// which of a unit's statuses were the launcher's, so a command that exits with
// one of these numbers is never mistaken for a launcher failure.
enum LaunchStatus : uint8_t {
  kLaunchEnv = 98,              // --exec: no 'V' packet first on the unit channel, or its overlay
                                // broke a bound, a name, a NUL or a duplicate (common/env_overlay.h)
  kLaunchShellStep = 99,        // script's "$SHELL -c" step got anything but the fixed command line
  kLaunchNotDirectory = 100,    // fd 2 is not an open directory
  kLaunchChdir = 101,           // fchdir(2) failed
  kLaunchDupStderr = 102,       // dup2(1, 2) failed
  kLaunchArgc = 103,            // no argument, or more than kMaxArgs
  kLaunchEncodedTooLong = 104,  // the encoded argv is above kMaxEncodedArgvBytes
  kLaunchBadPrefix = 105,       // an argument does not start with 'a'
  kLaunchBadAlphabet = 106,     // a character outside [A-Za-z0-9_-] (padding too)
  kLaunchBadLength = 107,       // encoded length = 1 (mod 4)
  kLaunchNonCanonical = 108,    // non-zero trailing bits
  kLaunchArgTooLong = 109,      // one decoded argument above kMaxArgBytes
  kLaunchArgvTooLong = 110,     // all decoded arguments above kMaxArgvTotalBytes
  kLaunchEmptyCommand = 111,    // argv[0] decodes to the empty string
  kLaunchNulByte = 112,         // a decoded argument contains NUL (execve cannot carry it)
  kLaunchWindowSize = 113,      // COLUMNS/LINES not a decimal in 1..1000 (or missing in --exec)
  kLaunchHome = 114,            // HOME is not a bounded absolute path
  kLaunchUserName = 115,        // USER or LOGNAME is not a plain user name
  kLaunchCloseFds = 116,        // close_range failed
  kLaunchSelf = 117,            // /proc/self/exe could not be bound to fd 3
  kLaunchExecScript = 118,      // execve(/usr/bin/script) failed
  kLaunchNoArgv = 119,          // --exec without OPENCODE_PTY_ARGV
  kLaunchNotTty = 120,          // --exec: fd 0, 1 or 2 is not a terminal
  kLaunchWinsize = 121,         // --exec: TIOCSWINSZ failed
  kLaunchSignals = 122,         // --exec: signal mask/dispositions could not be reset
  kLaunchHandoff = 123,         // the supervisor's handoff or go was missing or wrong
  // 124 is unassigned: a status is part of the protocol (the launch_failed
  // envelope carries it), so the ones after it keep their numbers.
  kLaunchMonitor = 125,         // --exec: the monitor could not start the command (pipe, fork,
                                // its process group or the terminal's foreground) or could not
                                // watch it (pidfd_open: the command is killed and reaped first)
};

// Environment names the supervisor and the launcher share. The window size:
// the supervisor puts both in the unit's Environment=, the launcher reads them
// (refusing anything but a decimal in 1..kMaxCols/kMaxRows) and passes them on.
inline constexpr char kColumnsEnvName[] = "COLUMNS";
inline constexpr char kLinesEnvName[] = "LINES";
// The outer launcher's carrier of the encoded argv to its --exec step; never
// a command's (common/env_overlay.h drops it from an overlay).
inline constexpr char kArgvEnvName[] = "OPENCODE_PTY_ARGV";

// Not launcher failures: the command's parent reports them as the command's
// exit status, as a shell does.
inline constexpr uint8_t kCommandCannotExecute = 126;  // the command exists but cannot be executed
inline constexpr uint8_t kCommandNotFound = 127;       // the command does not exist

// The stable name of a launcher status ("" for a number that is not one).
inline constexpr std::string_view LaunchFailureName(uint8_t status) noexcept {
  switch (status) {
    case kLaunchEnv: return "env";
    case kLaunchShellStep: return "shell_step";
    case kLaunchNotDirectory: return "not_directory";
    case kLaunchChdir: return "chdir";
    case kLaunchDupStderr: return "dup_stderr";
    case kLaunchArgc: return "bad_argc";
    case kLaunchEncodedTooLong: return "encoded_too_long";
    case kLaunchBadPrefix: return "bad_prefix";
    case kLaunchBadAlphabet: return "bad_alphabet";
    case kLaunchBadLength: return "bad_length";
    case kLaunchNonCanonical: return "non_canonical";
    case kLaunchArgTooLong: return "arg_too_long";
    case kLaunchArgvTooLong: return "argv_too_long";
    case kLaunchEmptyCommand: return "empty_command";
    case kLaunchNulByte: return "nul_byte";
    case kLaunchWindowSize: return "window_size";
    case kLaunchHome: return "bad_home";
    case kLaunchUserName: return "bad_user_name";
    case kLaunchCloseFds: return "close_fds";
    case kLaunchSelf: return "self";
    case kLaunchExecScript: return "exec_script";
    case kLaunchNoArgv: return "no_argv";
    case kLaunchNotTty: return "not_tty";
    case kLaunchWinsize: return "winsize";
    case kLaunchSignals: return "signals";
    case kLaunchHandoff: return "handoff";
    case kLaunchMonitor: return "monitor";
    default: return "";
  }
}

}  // namespace opencode
