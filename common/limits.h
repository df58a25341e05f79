// Every bound of opencode-pty, in one place, each with the reason for its number.
// Invariant: no other file hard-codes a size, count or deadline that a peer can
// reach; a test hits every bound at least once (tests/limits_test.cc lists them).
#pragma once

#include <cstddef>
#include <cstdint>

namespace opencode::limits {

// ---- wire format (docs/PROTOCOL.md) ----
// version(1) type(1) reserved(2) length(4, big-endian).
inline constexpr size_t kFrameHeaderBytes = 8;
// Node types interactively; 16 KiB is four pages of keystrokes or one pasted
// screen, and keeps one frame well under the input queue cap.
inline constexpr size_t kMaxInputPayload = 16 * 1024;
// One OUTPUT frame carries at most one read() of the PTY stream; 64 KiB is the
// default pipe/socket chunk and amortises the 8-byte header to 0.01 %.
inline constexpr size_t kMaxOutputPayload = 64 * 1024;
// JSON envelopes are small fixed-shape objects; 4 KiB leaves room for a message
// and bounds what the Node side ever has to parse.
inline constexpr size_t kMaxEnvelopeBytes = 4 * 1024;
// A signal frame is one byte: the signal number (allowlist in frame.h).
inline constexpr size_t kSignalPayload = 1;
// A RESIZE frame and a size message on a unit's resize channel are the same
// four bytes: cols(2) rows(2), big-endian (common/size_message.h).
inline constexpr size_t kResizePayload = 4;

// ---- argv of a PTY command (client helper -> start frame -> launcher) ----
// 1,000 arguments is what a generated command line (xargs-style) may need; the
// launcher tests use exactly 1,000.
inline constexpr size_t kMaxArgs = 1024;
// One argument may be a small script (`sh -c '...'`); 32 KiB encodes to 43 KiB,
// below the kernel's per-string MAX_ARG_STRLEN (128 KiB).
inline constexpr size_t kMaxArgBytes = 32 * 1024;
// The launcher passes the whole encoded argv through ONE environment value,
// which the kernel limits to MAX_ARG_STRLEN = 131072 bytes including its NUL.
inline constexpr size_t kMaxArgvTotalBytes = 64 * 1024;
// The exact maximum of what an accepted argv encodes to, joined by spaces: an
// argument of l bytes costs 'a' + ceil(4l/3) + one separator, and ceil(4l/3) <=
// (4l+2)/3 with equality iff l = 1 (mod 3). So n <= kMaxArgs arguments of
// kMaxArgvTotalBytes in total encode to at most 2n - 1 + (4*total + 2n)/3, and
// kMaxArgs arguments of 64 bytes (64 = 1 mod 3, 1024 x 64 = 65536) reach it:
// 90,111 bytes. The launcher refuses more (exit 104) and nothing the supervisor
// accepts is more (tests/launcher_test.cc, tests/unit_properties_test.cc).
inline constexpr size_t kMaxEncodedArgvBytes = 2 * kMaxArgs - 1 + (4 * kMaxArgvTotalBytes + 2 * kMaxArgs) / 3;
static_assert((4 * kMaxArgvTotalBytes + 2 * kMaxArgs) % 3 == 0 &&
                  kMaxArgvTotalBytes % kMaxArgs == 0 && (kMaxArgvTotalBytes / kMaxArgs) % 3 == 1 &&
                  kMaxArgvTotalBytes / kMaxArgs <= kMaxArgBytes,
              "the bound is reached exactly: kMaxArgs arguments of kMaxArgvTotalBytes/kMaxArgs = 1 (mod 3) bytes");
static_assert(kMaxEncodedArgvBytes + 64 < 131072, "encoded argv must fit MAX_ARG_STRLEN");
// Start payload: cols(2) rows(2) flags(4) argc(4) then argc * (len(4) bytes),
// then, with the detachable flag only, grace(4) scrollback(4).
inline constexpr size_t kStartFixedBytes = 12;
inline constexpr size_t kStartDetachBytes = 8;
inline constexpr size_t kMaxStartPayload = kStartFixedBytes + 4 * kMaxArgs + kMaxArgvTotalBytes + kStartDetachBytes;

// ---- detachable sessions (docs/PROTOCOL.md section 10) ----
// How long a detached session waits for its application to come back: an
// upgrade or a crash-restart of opencode-v2.service takes seconds; an hour
// covers a slow manual cutover, and bounds what a forgotten terminal costs.
inline constexpr uint32_t kMaxDetachGraceSec = 3600;
// The ring of one detachable session's last output. At least one full OUTPUT
// frame, so that an attached session's pump always has room for one read; at
// most 2 MiB, opencode's own per-terminal buffer. The helper's default is 1 MiB.
inline constexpr size_t kMinScrollbackBytes = 64 * 1024;
inline constexpr size_t kMaxScrollbackBytes = 2 * 1024 * 1024;
inline constexpr size_t kDefaultScrollbackBytes = 1024 * 1024;
static_assert(kMinScrollbackBytes >= kMaxOutputPayload, "one OUTPUT read fits the smallest ring");
// Detachable sessions at a time (attached or not). One LIST answers all of
// them at once: 64 entries of at most kMaxEnvelopeBytes fit the output
// queue the answer is written to (below).
inline constexpr size_t kMaxDetachableSessions = 64;
// All rings together: what detachable sessions can make the supervisor hold,
// reserved at START (a spawn past it is scrollback_exhausted, not a silent
// drop). 64 MiB = 32 sessions at the largest ring, 64 at the helper's default;
// it is a term of kSupervisorMemoryBound below.
inline constexpr size_t kMaxScrollbackTotalBytes = 64 * 1024 * 1024;
// ATTACH payload: the session id (32 lowercase hex bytes) then the cursor (u64).
inline constexpr size_t kSessionIdHexBytes = 32;
inline constexpr size_t kAttachPayload = kSessionIdHexBytes + 8;

// ---- the application's environment overlay (ENV frame -> 'V' packet -> command) ----
// A login environment has ~30 variables and a developer's shell a few hundred;
// 1,024 is the argv count again, and bounds the launcher's envp array.
inline constexpr size_t kMaxEnvVars = 1024;
// A name is an identifier; 255 bytes is far above any real one (systemd's
// own names are under 32) and keeps a name compare cheap.
inline constexpr size_t kMaxEnvNameBytes = 255;
// One "NAME=VALUE": an API key, a token or a PEM certificate fits 32 KiB many
// times over; below the kernel's per-string MAX_ARG_STRLEN (128 KiB).
inline constexpr size_t kMaxEnvEntryBytes = 32 * 1024;
// All entries together. The command's execve carries argv and envp against
// one limit, ARG_MAX: a quarter of the stack rlimit (2 MiB with the default
// 8 MiB), never below 128 KiB. At the bounds it holds 64 KiB of argv and
// 64 KiB of overlay, their 2,048 NULs, the fixed variables (HOME up to 4 KiB)
// and 2,066 pointers (16.5 KiB): about 152 KiB, so the command starts unless
// the stack rlimit is below about 608 KiB (then E2BIG: exit 126, like a shell).
inline constexpr size_t kMaxEnvTotalBytes = 64 * 1024;
static_assert(kMaxEnvEntryBytes + 1 < 131072, "one entry must fit MAX_ARG_STRLEN");
// ENV payload and the 'V' packet's list: count(4) then count * (len(4) bytes).
inline constexpr size_t kMaxEnvPayload = 4 + 4 * kMaxEnvVars + kMaxEnvTotalBytes;
// The 'V' packet: its kind byte and the vetted list (common/channel_message.h).
inline constexpr size_t kMaxEnvPacketBytes = 1 + kMaxEnvPayload;
// SO_SNDBUF of the supervisor's end of a unit channel: the 'V' packet waits
// there, written before the unit starts, until --exec reads it, and AF_UNIX
// refuses a packet above sk_sndbuf - 32 (EMSGSIZE). The kernel doubles the
// value: 196,608 B holds the largest 'V' packet (69,637 B) without depending
// on net.core.wmem_default, and stays below 2 x kSocketSendBufferBytes, so the
// supervisor's memory bound below still holds (wmem_max must allow 96 KiB;
// its default is 208 KiB; the supervisor checks the value it got).
inline constexpr size_t kUnitChannelSendBufferBytes = 96 * 1024;
static_assert(2 * kUnitChannelSendBufferBytes >= kMaxEnvPacketBytes + 32, "the 'V' packet must fit");

// The largest payload any frame type may declare; the decoder rejects a larger
// length before buffering a byte of it.
inline constexpr size_t kMaxFramePayload = kMaxStartPayload > kMaxEnvPayload ? kMaxStartPayload : kMaxEnvPayload;

// ---- terminal size ----
// A window larger than 1000x1000 cells is not a terminal anyone can see; the
// bound keeps COLUMNS/LINES to four digits.
inline constexpr uint16_t kMaxCols = 1000;
inline constexpr uint16_t kMaxRows = 1000;
inline constexpr uint16_t kDefaultCols = 80;
inline constexpr uint16_t kDefaultRows = 24;

// ---- supervisor resources (charged per session, released by its destructor) ----
// Output waiting for Node: four full OUTPUT frames. When it is full the
// supervisor stops reading the PTY stream (backpressure), it never grows.
inline constexpr size_t kOutputQueueBytes = 4 * (kFrameHeaderBytes + kMaxOutputPayload);
// One LIST entry (a `session` envelope) holds fixed keys, two ids, a unit
// name and numbers: under 512 bytes (tests/session_test.cc, ListEntry.TheWidestEntryFitsItsBound).
inline constexpr size_t kMaxListEntryBytes = 512;
static_assert(kMaxDetachableSessions * (kFrameHeaderBytes + kMaxListEntryBytes) +
                      kFrameHeaderBytes + kMaxEnvelopeBytes <= kOutputQueueBytes,
              "a LIST answer (every entry and its end) fits the output queue");
// Input waiting for the PTY: four full INPUT frames; when full the supervisor
// stops reading the connection.
inline constexpr size_t kInputQueueBytes = 4 * kMaxInputPayload;
// Control envelopes queued for Node (started, notices, exit, error) have their
// own small reserve so an exit or error can always be queued behind output.
inline constexpr size_t kEnvelopeQueueBytes = 4 * (kFrameHeaderBytes + kMaxEnvelopeBytes);
// Hard cap of all buffers of one session (handshake buffer included); checked
// by tests/pump_test.cc with a client that never reads. The last term is a
// START whose ENV frame is awaited: its parsed argv is held while the ENV
// frame fills the handshake buffer. The vetted overlay (at most
// kMaxEnvPacketBytes) is built and written to the unit channel within the one
// loop callback that decoded the ENV frame, and freed before it returns: one
// at a time in the whole supervisor, not per session.
inline constexpr size_t kSessionMemoryCap =
    kOutputQueueBytes + kInputQueueBytes + kEnvelopeQueueBytes +
    kFrameHeaderBytes + kMaxFramePayload + kMaxStartPayload;
// 1,024 concurrent PTYs. Until the supervisor talked to systemd through the
// system bus, the cap was 128: dbus-daemon allows systemd's connection 512
// match rules, each session cost one (AddRef) plus one per stop job, and ~500
// sessions pushed systemd off the bus. On the direct connection
// (SystemdConnection) no session costs systemd a match rule and no bus quota
// applies; what bounds sessions now is the supervisor's descriptors (4 per
// session: connection, PTY stream, unit channel, the connecting process's
// pidfd; LimitNOFILE=8192 in its unit) and the slice's TasksMax
// (units/opencode-pty.slice). 1,000 idle
// sessions started and closed at once on systemd 252 and 257 (vm.scale.*
// --long, docs/SECURITY.md); the cap keeps room above that.
inline constexpr size_t kMaxSessions = 1024;
// Connections that have not finished authentication + start frame. A small
// number bounds what an unauthenticated (or slow) peer can make us hold.
inline constexpr size_t kMaxPendingHandshakes = 16;
// The start frame follows the helper's exec within milliseconds; 5 s allows a
// loaded host and bounds a silent connection.
inline constexpr uint64_t kStartFrameDeadlineUsec = 5ULL * 1000 * 1000;
// Each D-Bus call of the supervisor (identity, StartTransientUnit, read-back,
// Stop, query). systemd answers in milliseconds; 10 s covers a busy manager.
inline constexpr uint64_t kBusCallTimeoutUsec = 10ULL * 1000 * 1000;
// The direct connection to systemd ends when systemd re-executes
// (daemon-reexec): it is opened again at once and then this often, until the
// deadline (a re-exec of a loaded system takes seconds), after which the
// supervisor exits and its restart's recovery takes over.
inline constexpr uint64_t kSystemdReconnectIntervalUsec = 50ULL * 1000;
inline constexpr uint64_t kSystemdReconnectDeadlineUsec = 120ULL * 1000 * 1000;
// A stopped unit must be proven gone within this time of no progress or the
// supervisor logs it and retries: TimeoutStopSec of the unit
// (kUnitStopTimeoutUsec) plus margin. "No progress" is no PTY unit at all
// proven gone meanwhile: systemd runs stop jobs one after another, so in a
// mass close the last unit's wait grows with the units queued before it
// (systemd 257 stopped about 100 units a second on a slow host: 1,024 units
// took longer than 15 s), while each proof of another unit shows that the
// queue moves.
inline constexpr uint64_t kCleanupDeadlineUsec = 15ULL * 1000 * 1000;
// However much progress there is, a proof ends after this: kMaxSessions
// units stopped at 10 per second (ten times slower than the slowest host
// seen) plus the no-progress window, so a unit that will not go (another
// client holds a reference) is still reported and retried.
inline constexpr uint64_t kCleanupHardDeadlineUsec =
    kCleanupDeadlineUsec + kMaxSessions * 100ULL * 1000;
// TimeoutStopSec of a PTY unit: SIGTERM, then SIGKILL after this.
inline constexpr uint64_t kUnitStopTimeoutUsec = 5ULL * 1000 * 1000;
// Method calls of the supervisor that wait for a reply at the same time; the
// rest wait in FIFO order inside the supervisor, so a mass disconnect of
// kMaxSessions sessions (one StopUnit each) never puts more than this in
// systemd's queue at once (and stays below the 128 replies dbus-daemon would
// allow one connection, should the connection ever be a bus again).
inline constexpr size_t kMaxBusCallsInFlight = 64;
// D-Bus signals (UnitRemoved, JobRemoved, PropertiesChanged) are only hints to
// re-query; they coalesce into a set of at most this many pending unit names.
inline constexpr size_t kSignalQueueCapacity = 64;
// A unit channel holds at most one window size and one signal not yet
// written: that bound is the shape of daemon/session/unit_channel.h (one bool and
// one value each), not a number to tune.
// A pending signal (a `K` packet, 2 bytes) that cannot be written to the
// unit channel for this long is given up (notice signal_failed): the channel
// is full because the monitor does not read it (the command stopped it with
// SIGSTOP, or it is gone while another process holds its end). The client's
// frames behind the signal, STOP and EOF among them, wait at most this long.
// A monitor that runs reads a packet within microseconds; 2 s is far above.
inline constexpr uint64_t kSignalWriteDeadlineUsec = 2ULL * 1000 * 1000;
// Packets the supervisor reads from inside a unit: the command's exec, then
// its exit or a launch failure. The unit is the session user's: anything more,
// repeated or out of order stops the reading (docs/SECURITY.md "The unit channel").
inline constexpr size_t kUnitReports = 2;
// Tasks a PTY unit may have (TasksMax=): an interactive shell with a build.
inline constexpr uint64_t kUnitTasksMax = 512;
// A PTY unit's CPUWeight= while it starts, and once its command runs. Every
// session is a cgroup of opencode-pty.slice, weighed against its siblings: at
// the same weight as 50 streaming sessions, a starting one (systemd's
// executor, the launcher, script and the shells before the command) got 1/51
// of the slice's CPU and took 20 s in the VM, past kUnitStartDeadlineUsec
// (bench/results/20261207T085538Z.md). So a unit starts at the highest weight
// systemd takes and is set to the default one (what every other unit has)
// when the launcher reports its command's exec. The slice's own weight
// against system.slice, where the supervisor and the application run, is
// untouched by either. Where the cpu controller is not systemd's (a cgroup v1
// container) both are accepted and have no effect.
inline constexpr uint64_t kUnitStartCpuWeight = 10000;
inline constexpr uint64_t kUnitCpuWeight = 100;
// Where the kernel schedules by session (autogroup: a cgroup v1 host, or
// cgroup v2 while the cpu controller is off), the nice the launcher's
// monitor gives its command's session group once the command runs
// (launcher/main.cc, AutogroupNice): 110 against the 1,024 of a service's
// group at 0 (the kernel's weight table), so about nine busy commands weigh
// as much as one service, close to what the slice's CPUWeight= makes all of
// them on cgroup v2. The kernel refuses such a write for 100 ms after any
// other on the machine: the monitor tries again after
// kAutogroupNiceFirstRetryMs, doubling up to 64 times that, at most
// kAutogroupNiceAttempts times in all (over 6 minutes; the writes of
// kMaxSessions sessions started at once take 103 s of the kernel's slots).
inline constexpr int kSessionAutogroupNice = 10;
inline constexpr int kAutogroupNiceFirstRetryMs = 100;
inline constexpr int kAutogroupNiceAttempts = 64;
// Concurrent identity lookups over D-Bus are the pending handshakes above.

// ---- supervisor timing and fairness (added by the daemon work) ----
// Safety net while waiting for a unit state change: hints (signals) normally
// arrive within milliseconds; if one is lost the unit is re-queried this often.
inline constexpr uint64_t kRequeryIntervalUsec = 1ULL * 1000 * 1000;
// A tick asks only once every call to systemd has been answered (systemd runs
// its jobs only between requests: daemon/systemd/unit_tracker.cc, OnTick); it
// waits for that at most this long before it asks anyway.
inline constexpr uint64_t kRequeryQuietWaitUsec = 10ULL * 1000 * 1000;
// StartTransientUnit answered, start job done and read-back compared: one bus
// call timeout plus the few milliseconds an exec takes, with margin.
inline constexpr uint64_t kUnitStartDeadlineUsec = kBusCallTimeoutUsec + 5ULL * 1000 * 1000;
// After the terminal envelope is queued, a client that does not read its last
// frames (at most the output queue and one envelope) is closed after this.
inline constexpr uint64_t kTerminalFlushDeadlineUsec = 10ULL * 1000 * 1000;
// A connection refused at admission or while its peer is authenticated ends
// with a lingering close (docs/PROTOCOL.md section 1; daemon/base/lingerer.h):
// the supervisor waits this long for the client's EOF (a client that reads its
// envelope closes within milliseconds), and at most kMaxLingeringRefusals such
// connections wait at a time, so a same-UID connect loop that never closes
// holds at most that many descriptors, each for at most this long (a lingering
// connection holds no kMaxSessions slot: its session has ended). Past the cap
// a refused connection closes at once.
inline constexpr uint64_t kRefusalLingerUsec = 2ULL * 1000 * 1000;
inline constexpr size_t kMaxLingeringRefusals = 64;
// A lingering close reads at most this many 4 KiB segments per wakeup, so a
// refused client that floods takes its turn like any other source.
inline constexpr int kLingerReadsPerWakeup = 16;
// Graceful stop (SIGTERM): every session's unit stopped and proven gone; the
// reapers run in parallel, so the cleanup deadline plus margin, well inside
// the supervisor unit's TimeoutStopSec=30s.
inline constexpr uint64_t kShutdownDeadlineUsec = kCleanupDeadlineUsec + 5ULL * 1000 * 1000;
// A unit not proven gone within kCleanupDeadlineUsec (systemd busy, away from
// the bus, or a stop that hangs) stays on the supervisor's retry list and is
// stopped and proven again this often, and at once when systemd reappears on
// the bus. Each retry costs one StopUnit and a few ResetFailedUnit + GetUnit
// pairs per listed unit; listed units count against kMaxSessions.
inline constexpr uint64_t kUnprovenRetryIntervalUsec = 10ULL * 1000 * 1000;
// A journal line a peer can trigger (a bus signal, a connection, a unit that
// will not go) is written at most kPeerLogBurst times per kPeerLogIntervalUsec
// per call site, then counted and summarised: a flood costs journald ~1 line/s.
inline constexpr size_t kPeerLogBurst = 10;
inline constexpr uint64_t kPeerLogIntervalUsec = 10ULL * 1000 * 1000;
// After a STOP was accepted, the unit must be finished within this time (the
// StopUnit call, then TimeoutStopSec until SIGKILL, plus margin) of no
// progress on any PTY unit, at most kCleanupHardDeadlineUsec after the STOP
// (Session::ExtendStopDeadline), or the session ends with the error
// stop_failed and its unit is reaped.
inline constexpr uint64_t kStopRequestDeadlineUsec = kBusCallTimeoutUsec + kUnitStopTimeoutUsec + 5ULL * 1000 * 1000;
// A finished unit's PTY stream reaches EOF within milliseconds (every holder
// was in the unit's cgroup). If it has not once the unit is reaped, a process
// outside the unit still holds the stream: after this the supervisor stops
// waiting, sends the notice output_incomplete and then the exit envelope.
inline constexpr uint64_t kStreamEofDeadlineUsec = 5ULL * 1000 * 1000;
// Connections accepted per listener wakeup, so a burst of connects cannot
// delay running sessions' pumping by more than this many admissions. After a
// full burst the listener yields until the idle-priority housekeeping (which
// destroys finished sessions) has had its turn.
inline constexpr size_t kAcceptBurst = 16;
// accept4 failing with EMFILE/ENFILE leaves the peer in the backlog and the
// socket readable: the listener pauses and retries after this delay, doubling
// up to the maximum, or at once when a session releases its descriptors.
// 10 ms is far above one loop pass (no spin) and below a client's patience;
// 1 s bounds how late a waiting connection is seen once descriptors are free.
inline constexpr uint64_t kAcceptBackoffMinUsec = 10ULL * 1000;
inline constexpr uint64_t kAcceptBackoffMaxUsec = 1ULL * 1000 * 1000;

// ---- the supervisor's total memory (MemoryMax= of its unit) ----
// What peers can make the supervisor hold, at kMaxSessions sessions (a pending
// handshake is one of them, and its buffer is inside kSessionMemoryCap; a unit
// on the retry list takes a slot and holds no buffer). Each term is an upper
// bound argued from the code; docs/SECURITY.md "The supervisor's memory".
// Session buffers: 1,024 x 483,440 B = 495,042,560 B (472.1 MiB).
inline constexpr size_t kSessionBuffersBound = kMaxSessions * kSessionMemoryCap;
// Sockets the supervisor writes on per session: the connection, the PTY
// stream and the unit channel. What a client or a unit writes is charged to
// the writer's socket (AF_UNIX counts queued data against the sender), so
// only these three count here.
inline constexpr size_t kSocketsWrittenPerSession = 3;
// Their send buffer: net.core.wmem_default, the kernel's default (212,992 B);
// the supervisor sets no SO_SNDBUF except on the unit channel, where the
// kernel's doubling of kUnitChannelSendBufferBytes stays below it. The kernel checks the limit before each
// skb and one skb carries at most half of it, so a socket holds less than
// twice this (truesize). An operator who raises wmem_default raises the bound.
inline constexpr size_t kSocketSendBufferBytes = 212992;
static_assert(2 * kUnitChannelSendBufferBytes <= kSocketSendBufferBytes,
              "the unit channel's SO_SNDBUF keeps it inside the send buffer bound");
// One StartTransientUnit message per session may wait for one of
// kMaxBusCallsInFlight places: the encoded argv, D-Bus's length, NUL and
// padding (at most 8 B) for each of its strings and the launcher's path, the
// other properties (under 4 KiB), twice for sd-bus's growth of the body.
inline constexpr size_t kStartMessageBytes = 2 * (kMaxEncodedArgvBytes + 8 * (kMaxArgs + 1) + 4 * 1024);
// 495,042,560 + 1,308,622,848 (1,248 MiB of socket buffers) + 209,729,536
// (200 MiB of start messages) + 67,108,864 (64 MiB of rings,
// kMaxScrollbackTotalBytes) = 2,080,503,808 B (1,984.1 MiB).
inline constexpr size_t kSupervisorMemoryBound =
    kSessionBuffersBound + kMaxSessions * kSocketsWrittenPerSession * 2 * kSocketSendBufferBytes +
    kMaxSessions * kStartMessageBytes + kMaxScrollbackTotalBytes;
// MemoryMax= of units/opencode-pty-supervisor.service (3G): the bound plus
// more than half again for what has no constant (each session's objects and
// sd-event sources, one read-back at a time, the connection to systemd, the
// code and libraries, malloc's fragmentation). Reaching it is a bug: the
// kernel kills the supervisor, systemd restarts it and its recovery stops
// every PTY unit, instead of the host running out of memory.
inline constexpr size_t kSupervisorMemoryMax = size_t{3} * 1024 * 1024 * 1024;
static_assert(kSupervisorMemoryBound == 2080503808, "the number docs/SECURITY.md states");
static_assert(kSupervisorMemoryMax >= kSupervisorMemoryBound + kSupervisorMemoryBound / 2,
              "MemoryMax= keeps at least half the bound again as margin");

// ---- handshake slots under a same-UID connect loop (issue #21 point 3) ----
// From this many pending handshakes on, a connection whose SO_PEERCRED pid is
// not the MainPID of systemd's latest identity answer is refused at accept
// (too_many_handshakes) without taking a slot: half of kMaxPendingHandshakes
// stays the MainPID's reserve while any same-UID process connects in a loop.
// Below the mark every peer gets a slot, so every identity answer (and with
// it the cached MainPID) stays fresh; the cache never admits anyone.
inline constexpr size_t kHandshakePressure = kMaxPendingHandshakes / 2;

// ---- closing what a peer supplied (daemon/base/async_close.h) ----
// The kernel delivers at most this many descriptors with one SCM_RIGHTS
// message (SCM_MAX_FD); every receive keeps room for all of them, because a
// descriptor that does not fit is dropped by the kernel in the receiving
// thread, where its last close could sleep on the loop.
inline constexpr size_t kMaxRightsPerMessage = 253;
// The listener stops accepting while this many descriptors wait for the
// closer thread (one stuck close, e.g. on a FUSE file, holds the rest), and
// accepts again below the resume mark. 256 is 16 full accept bursts of
// refused connections: far above what a healthy closer ever holds (it closes
// in microseconds), small against LimitNOFILE=8192.
inline constexpr size_t kCloseBacklogPause = 256;
inline constexpr size_t kCloseBacklogResume = kCloseBacklogPause / 2;
// Before its final close, the closer reads a unix socket's queue and defuses
// the descriptors in flight on it (and, in turn, those in flight on them):
// at most kCloseDrainMessages receives per socket and kCloseDrainDescriptors
// descriptors per close. The kernel does not bound the nesting (64 levels
// were accepted on Linux 6.18), so the work is bounded here instead; what is
// left is purged by the close itself, in the closer thread. 1,024 keeps the
// closer's own descriptors well inside LimitNOFILE=8192 next to 1,024
// sessions' four each.
inline constexpr size_t kCloseDrainMessages = 1024;
inline constexpr size_t kCloseDrainDescriptors = 1024;

}  // namespace opencode::limits
