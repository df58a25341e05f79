'use strict';
// The fixed helper /usr/local/libexec/opencode-pty-client: spawning it with
// exactly the socket and the directory, and naming how it ended (client/main.cc;
// docs/PROTOCOL.md section 9). Invariant: the helper gets fd 0, 1, 2, fd 3 (the
// connected socket) and fd 4 (the directory) and an empty environment, nothing
// else; every other descriptor of this process is close-on-exec.

const childProcess = require('child_process');
const { HELPER_STATUS } = require('./constants.generated.js');
const { PtyError } = require('./errors.js');
const { limits } = require('./limits.js');

// Throws as child_process.spawn does (the caller reports helper_spawn_failed).
// withEnv: the START frame announces the ENV frame the application sends
// itself once the helper exited 0 (the helper never sees the variables).
// detach: null, or {graceSeconds, scrollbackBytes} (checked by lib/options.js):
// the helper sets START's detachable flag and appends both numbers.
function spawnHelper(helperPath, cols, rows, argv, socket, dirFd, withEnv, detach) {
  const args = ['--cols', String(cols), '--rows', String(rows), ...(withEnv ? ['--env'] : []),
    ...(detach ? ['--detach', String(detach.graceSeconds), '--scrollback', String(detach.scrollbackBytes)] : []),
    '--', ...argv];
  // fd 3 = the connected socket (the runtime dup2()s its handle's fd), fd 4 =
  // the directory; fd 0-2 are replaced as stdio says, in every child, so it
  // does not matter that Bun (unlike Node) leaves its own fd 0-2 inheritable.
  // Every other descriptor the module holds is close-on-exec on both runtimes
  // (the socket, the directory); test/fds.test.js checks the helper's table.
  return childProcess.spawn(helperPath, args, {
    stdio: ['ignore', 'ignore', 'pipe', socket, dirFd],
    env: {},
    cwd: '/',
  });
}

// Keeps the helper's stderr for error messages, bounded by
// limits.maxHelperStderrBytes; the returned function reads what was kept.
function collectStderr(helper) {
  let stderr = '';
  helper.stderr.on('data', (b) => {
    if (stderr.length < limits.maxHelperStderrBytes) stderr += b.toString('utf8');
  });
  return () => stderr.slice(0, limits.maxHelperStderrBytes).trim();
}

// The fields a helper failure carries (on the error, and on a supervisor
// error envelope that explains it): the status's name from HELPER_STATUS.
function helperFailure(status, signal, timedOut, stderr) {
  const reason = timedOut ? 'timeout'
    : (status !== null && HELPER_STATUS[status]) || (signal ? 'signal' : 'unknown');
  return {
    helperStatus: status, helperSignal: signal, helperReason: reason,
    helperStderr: stderr,
  };
}

function helperError(helperPath, f) {
  const how = f.helperStatus !== null ? `exit status ${f.helperStatus}` : `signal ${f.helperSignal}`;
  return new PtyError(f.helperReason === 'timeout' ? 'helper_timeout' : 'helper_failed',
    `helper ${helperPath} failed: ${how} (${f.helperReason})${f.helperStderr ? ': ' + f.helperStderr : ''}`, f);
}

module.exports = { HELPER_STATUS, spawnHelper, collectStderr, helperFailure, helperError };
