#!/usr/bin/python3
# probe.py SEA [--out FILE] [--leak-fd N] [--dry-run SOCKET HELPER] [--bun APP_JS]
#
# The Node SEA descriptor-inheritance probe. Runs the given, unmodified SEA
# binary (client/node/sea/app.js built by build.sh) as the real application
# service and proves from outside, with ptrace (trace_exec.py):
#   (a) the fixed helper's descriptor table at its first instruction is exactly
#       0,1,2 + 3 (a socket the Node process holds) + 4 (the approved directory),
#       and both are close-on-exec in the Node process at that moment;
#   (b) every other program the Node process executes (unrelated children from
#       the main thread and, concurrently, from a worker thread) has only 0,1,2
#       and neither descriptor.
# It records the SEA's exact Node version and whether that version satisfies
# the deployment gate (Node 26.4); any other version does not, and the report
# says so. Exit status: 0 if every inheritance check passed, 1 if one failed,
# 2 if the probe could not run.
#
# Service mode (default; root, inside the vm-tests harness with the product
# installed): installs SEA as /usr/local/bin/opencode-v2 (the reference unit's
# ExecStart), adds a runtime drop-in to opencode-v2.service that clears
# ExecCondition (the readiness gate is proven by vm.gate.*; containers have no
# Yama so it would deny) and selects the app's probe mode, starts the service
# (User=byk) and traces its MainPID. --leak-fd N is the negative control: the
# drop-in starts the SEA through `bash -c 'exec N</dev/null; exec SEA'`, so the
# SEA inherits a stray descriptor; the probe must then report the leak.
#
# --bun APP_JS (issue #31): SEA is the pinned Bun binary instead, installed as
# /usr/local/bin/opencode-v2 and run as `opencode-v2 APP_JS` (APP_JS is
# client/sea/app.js staged by build.sh): the same probe with Bun as the
# MainPID. The report names the Bun version; the Node 26.4 gate does not apply
# to it (gate.satisfied is false, and the statement says why).
#
# --dry-run SOCKET HELPER (host, root): runs the SEA as a plain child against a
# stand-in supervisor on SOCKET and the given helper binary; it exercises the
# tracer and the app only and is never acceptance evidence.

import argparse
import json
import os
import pwd
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_exec  # noqa: E402

HELPER = '/usr/local/libexec/opencode-pty-client'
APP_PATH = '/usr/local/bin/opencode-v2'
SERVICE = 'opencode-v2.service'
DROPIN_DIR = '/run/systemd/system/opencode-v2.service.d'
DROPIN = DROPIN_DIR + '/50-node-probe.conf'
PROBE_DIR = '/run/opencode-node-probe'
APP_USER = 'byk'
GATE = '26.4'
# What a wait for the app or the service allows before it calls it a hang: far
# above the seconds they take, in a TCG VM on a slow host included.
HANG_S = 120
# The supervisor allows a connection kStartFrameDeadlineUsec (5 s) from its
# accept to its START frame. Traced, every fork of the Node process stops for
# the tracer, which reads descriptor tables; in a TCG VM on a loaded host that
# has taken longer than 5 s between the module's connect and the helper's
# exec, and the session then ended start_timeout (the helper exits 27). That
# is the tracer's cost, not the module's: such a run is repeated, at most
# ATTEMPTS times in all, and the report lists those that ended so. Any other
# outcome is the verdict.
ATTEMPTS = 3


def sh(*argv, check=True):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check and r.returncode != 0:
        raise RuntimeError('%s: exit %d: %s' % (' '.join(argv), r.returncode, r.stdout.strip()))
    return r.stdout.strip()


def wait_for(pred, what, timeout):
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise RuntimeError('timed out after %ss waiting for %s' % (timeout, what))
        time.sleep(0.02)


def read_json(path):
    """The JSON document at path, or None while it is missing or incomplete.

    The app writes its files whole (rename), but the probe must not depend on
    the program it examines: a half-written file reads as not there yet."""
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return None


def stop_service():
    """SERVICE stopped and its failure state cleared, whatever a run left behind."""
    sh('systemctl', 'stop', SERVICE, check=False)
    sh('systemctl', 'reset-failed', SERVICE, check=False)


def gate_verdict(version):
    m = re.match(r'^v(\d+)\.(\d+)\.(\d+)$', version or '')
    ok = bool(m) and '%s.%s' % (m.group(1), m.group(2)) == GATE
    return {
        'required': 'Node %s (exactly)' % GATE,
        'node_version': version,
        'satisfied': ok,
        'statement': ('Node %s satisfies the Node %s gate' % (version, GATE)) if ok else
                     ('Node %s does not satisfy the Node %s gate: this result is evidence for %s only and '
                      'never counts for the deployment gate' % (version, GATE, version)),
    }


# ------------------------------------------------------------ dry-run fake ----

def _envelope(obj):
    b = json.dumps(obj, separators=(',', ':')).encode()
    return struct.pack('>BBHI', 1, 0x82, 0, len(b)) + b


def _answer(c):
    c.settimeout(10)
    _, fds, _, _ = socket.recv_fds(c, 70000, 4)
    for fd in fds:
        os.close(fd)
    h = '0123456789abcdef' * 2
    c.sendall(_envelope({'type': 'started', 'session': h, 'unit': 'opencode-pty-%s.service' % h,
                         'invocation': h, 'revision': 'a' * 40, 'source': 'b' * 64}))
    out = b'dry-run\r\n'
    c.sendall(struct.pack('>BBHI', 1, 0x81, 0, len(out)) + out)
    c.sendall(_envelope({'type': 'exit', 'code': 3, 'signal': None, 'result': 'exit-code'}))
    c.shutdown(socket.SHUT_WR)
    time.sleep(0.1)


def fake_supervisor(path, stop):
    """Stand-in for the dry run: accepts connections, takes START (+ its fd), answers."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)
    srv.settimeout(0.2)
    while not stop.is_set():
        try:
            c, _ = srv.accept()
        except socket.timeout:
            continue
        with c:
            try:
                _answer(c)
            except OSError:
                pass  # the client went away (e.g. the helper refused to send)
    srv.close()


# ------------------------------------------------------------------ checks ----

def evaluate(trace, app, ctx):
    checks = []

    bun = ctx.get('runtime') == 'bun'

    def check(name, ok, evidence):
        if bun:  # the same check, named for the runtime it ran on
            name = name.replace('the Node process', 'the Bun process').replace('node: ', 'bun: ').replace(
                'the SEA, running as', 'Bun, running as')
        checks.append({'name': name, 'ok': bool(ok), 'evidence': evidence})

    target = trace['target']
    execs = trace['execs']
    helper_path = ctx['helper']
    helpers = [e for e in execs if e['exe'] == helper_path]
    others = [e for e in execs if e['exe'] != helper_path]
    dir_st = os.stat(ctx['dir'])
    if not ctx.get('dry_run'):
        ready = ctx.get('ready') or {}
        check('app: the traced process is the MainPID of %s, the SEA, running as %s' % (SERVICE, APP_USER),
              ctx.get('main_exe') == APP_PATH and ctx.get('main_uid') == pwd.getpwnam(APP_USER).pw_uid and
              ready.get('pid') == target and ('/%s' % SERVICE) in ctx.get('main_cgroup', ''),
              {'pid': target, 'exe': ctx.get('main_exe'), 'uid': ctx.get('main_uid'),
               'cgroup': ctx.get('main_cgroup', '').splitlines()[-1:]})
    check('trace: the Node process was traced until it exited',
          not trace.get('timeout') and str(target) in trace['exits'],
          'execs=%d forks=%d threads=%d duration=%ss' % (len(execs), trace['forks'], trace['threads'], trace['duration']))
    check('helper: executed exactly once, by the Node process',
          len(helpers) == 1 and helpers[0]['ppid'] == target,
          [(e['pid'], e['ppid'], e['argv'][:6]) for e in helpers])
    sock_ino = None
    if helpers:
        h = helpers[0]
        fds = {f['fd']: f for f in h['fds']}
        check('helper: stopped at its first instruction (rip == AT_ENTRY) when its table was read',
              h.get('at_first_instruction') is True, 'rip=%s AT_ENTRY=%s' % (h.get('rip'), h.get('at_entry')))
        check('helper: descriptor table is exactly 0,1,2,3,4',
              sorted(fds) == [0, 1, 2, 3, 4], ['%d -> %s' % (f['fd'], f.get('target')) for f in h['fds']])
        f3, f4 = fds.get(3, {}), fds.get(4, {})
        fork = h.get('at_fork') or {}
        parent = {f['fd']: f for f in fork.get('fds', [])}
        node_sock = [f for f in parent.values() if f.get('kind') == 'socket' and f.get('ino') == f3.get('ino')]
        check('helper: fd 3 is a socket the Node process holds (a duplicate of its connection)',
              f3.get('kind') == 'socket' and len(node_sock) == 1,
              'fd3=%s, node fd(s) %s' % (f3.get('target'), [f['fd'] for f in node_sock]))
        sock_ino = f3.get('ino')
        check('helper: fd 4 is the approved directory (%s)' % ctx['dir'],
              f4.get('kind') == 'dir' and (f4.get('dev'), f4.get('ino')) == (dir_st.st_dev, dir_st.st_ino),
              'fd4=%s' % f4.get('target'))
        node_dir = [f for f in parent.values() if (f.get('dev'), f.get('ino')) == (dir_st.st_dev, dir_st.st_ino)]
        check('node: its socket and directory descriptors are close-on-exec when it forks the helper',
              len(node_sock) == 1 and node_sock[0].get('cloexec') is True and
              len(node_dir) >= 1 and all(f.get('cloexec') is True for f in node_dir),
              'socket %s; directory %s' % ([(f['fd'], f.get('flags')) for f in node_sock],
                                           [(f['fd'], f.get('flags')) for f in node_dir]))
        non_cloexec = [f['fd'] for f in parent.values() if f.get('cloexec') is False]
        if bun:
            # Bun leaves its own fd 0-2 inheritable; spawn replaces 0-2 in every
            # child (stdio), so only a descriptor above 2 could leak.
            check('bun: no descriptor of the Bun process above 2 lacks close-on-exec at that fork '
                  '(its own 0-2 are inheritable, and replaced in every child)',
                  not [n for n in non_cloexec if n > 2], 'inheritable bun fds: %s' % non_cloexec)
        else:
            check('node: no descriptor of the Node process lacks close-on-exec at that fork (nothing else can leak)',
                  not non_cloexec, 'inheritable node fds: %s' % non_cloexec)
        hexit = trace['exits'].get(str(h['pid']), {})
        check('helper: exited 0 (START frame and directory sent)', hexit.get('status') == 0, hexit)
    leaks = []
    for e in others:
        nums = [f['fd'] for f in e['fds']]
        bad = [f for f in e['fds'] if f['fd'] > 2 or f.get('ino') == sock_ino or
               (f.get('dev'), f.get('ino')) == (dir_st.st_dev, dir_st.st_ino)]
        if bad or nums != [0, 1, 2]:
            leaks.append({'pid': e['pid'], 'exe': e['exe'], 'fds': ['%d -> %s' % (f['fd'], f.get('target')) for f in e['fds']]})
    # Unrelated children forked while the Node process held the socket, and
    # while it held the directory too (the worker thread forks concurrently).
    def held(e, pred):
        return any(pred(f) for f in (e.get('at_fork') or {}).get('fds', []))
    with_socket = [e for e in others if sock_ino is not None and held(e, lambda f: f.get('ino') == sock_ino)]
    with_dir = [e for e in others if held(e, lambda f: (f.get('dev'), f.get('ino')) == (dir_st.st_dev, dir_st.st_ino))]
    who = 'bun' if bun else 'node'
    concurrent = {'forked while %s held the socket' % who: len(with_socket),
                  'forked while %s held the directory' % who: len(with_dir)}
    by_thread = {'main': len([e for e in others if e['argv'][-1:] == ['ls -l /proc/self/fd'] or e['exe'].endswith('/ls')]),
                 'worker': len([e for e in others if e['argv'][-2:] == ['-c', 'true']])}
    check('unrelated children: at least one from the main thread and one from a worker thread were observed',
          by_thread['main'] >= 1 and by_thread['worker'] >= 1, by_thread)
    check('unrelated children: every one has exactly 0,1,2 and neither the socket nor the directory',
          not leaks and len(others) > 0, dict(children=len(others), leaks=leaks[:5], **concurrent))
    check('unrelated children: at least one was forked while the Node process held the socket and the directory',
          len(with_socket) >= 1 and len(with_dir) >= 1, concurrent)
    if app is not None:
        rep = [u for u in app.get('unrelated', [])]
        check("unrelated children: their own view (ls -l /proc/self/fd) is 0,1,2",
              rep and all([f['fd'] for f in u.get('fds', [])] == [0, 1, 2] for u in rep),
              [(u.get('label'), u.get('state'), [f['fd'] for f in u.get('fds', [])]) for u in rep])
        if bun:
            check('app: ran on Bun %s (process.versions.bun)' % ctx.get('bun_version'),
                  app.get('bun') is not None and app.get('bun') == ctx.get('bun_version'),
                  {'bun': app.get('bun'), 'version': app.get('version'), 'execPath': app.get('execPath')})
        else:
            check('app: ran as a SEA', app.get('isSea') is True, {'isSea': app.get('isSea'), 'execPath': app.get('execPath')})
        if not ctx.get('dry_run'):
            ex = app.get('exit', {})
            check('app: the PTY session ran to its exit status (3) with no error',
                  ex.get('exitCode') == 3 and ex.get('error') is None, ex)
            want = 'probe-ok cwd=%s size=30 100' % ctx['dir']
            check('app: the PTY ran in the approved directory with the requested size',
                  want in app.get('output', ''), app.get('output', '')[:200])
            check('app: started envelope named a transient unit',
                  re.match(r'^opencode-pty-[0-9a-f]{32}\.service$', (app.get('session') or {}).get('unit') or '') is not None,
                  app.get('session'))
    return checks


# ------------------------------------------------------------------- runs ----

def ended_by_start_deadline(app):
    """True if the app's session ended with the supervisor's start_timeout."""
    error = ((app or {}).get('exit') or {}).get('error') or {}
    return error.get('code') == 'start_timeout'


def run_attempts(run):
    """run() until its session did not end by the START deadline, at most ATTEMPTS times."""
    ends = []
    for _ in range(ATTEMPTS):
        trace, app, ctx = run()
        if not ended_by_start_deadline(app):
            break
        ends.append({'trace_duration_s': trace.get('duration'), 'exit': app.get('exit')})
    ctx['start_deadline_ends'] = ends
    return trace, app, ctx


def run_service(sea, leak_fd, app_js=None):
    u = pwd.getpwnam(APP_USER)
    # A run starts from a stopped service: `systemctl start` of one still
    # active (a previous run that failed half way) would start nothing.
    stop_service()
    shutil.rmtree(PROBE_DIR, ignore_errors=True)
    os.mkdir(PROBE_DIR, 0o700)
    os.chown(PROBE_DIR, u.pw_uid, u.pw_gid)
    os.makedirs(os.path.dirname(APP_PATH), exist_ok=True)
    shutil.copyfile(sea, APP_PATH + '.tmp')
    os.chmod(APP_PATH + '.tmp', 0o755)
    os.chown(APP_PATH + '.tmp', 0, 0)
    os.rename(APP_PATH + '.tmp', APP_PATH)
    os.makedirs(DROPIN_DIR, exist_ok=True)
    lines = ['# vm-tests/node probe (runtime only): the app under test, no readiness gate (vm.gate.* proves it).',
             '[Service]', 'ExecCondition=', 'Restart=no',
             'Environment=OPENCODE_PTY_APP_MODE=probe OPENCODE_PTY_PROBE_DIR=%s' % PROBE_DIR]
    exe = APP_PATH + (' ' + app_js if app_js else '')
    if leak_fd is not None:
        # bash: dash takes one-digit descriptors only, and Node itself marks
        # 0..15 close-on-exec at start, so the stray one must be above 15.
        lines += ['ExecStart=', "ExecStart=/bin/bash -c 'exec %d</dev/null; exec %s'" % (leak_fd, exe)]
    elif app_js:
        lines += ['ExecStart=', 'ExecStart=' + exe]
    with open(DROPIN, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    sh('systemctl', 'daemon-reload')
    try:
        return trace_service()
    finally:
        # Whatever happened, the next run (the negative control) and the
        # suite's later checks find the service stopped and without the drop-in.
        stop_service()
        os.unlink(DROPIN)
        sh('systemctl', 'daemon-reload')


def trace_service():
    """Starts SERVICE (its drop-in installed) and traces its MainPID through one session."""
    sh('systemctl', 'start', SERVICE)
    # Hang guards (HANG_S): the app is ready in seconds, under TCG too.
    ready = wait_for(lambda: read_json(PROBE_DIR + '/ready.json'), 'the app to be ready', HANG_S)
    main_pid = int(sh('systemctl', 'show', '-p', 'MainPID', '--value', SERVICE))
    ctx = {'helper': HELPER, 'dir': PROBE_DIR, 'service': SERVICE, 'main_pid': main_pid, 'ready': ready}
    ctx['main_exe'] = os.readlink('/proc/%d/exe' % main_pid)
    with open('/proc/%d/cgroup' % main_pid) as f:
        ctx['main_cgroup'] = f.read().strip()
    ctx['main_uid'] = os.stat('/proc/%d' % main_pid).st_uid
    ctx['main_fds_before'] = trace_exec.fd_table(main_pid)
    go = PROBE_DIR + '/go'
    trace = trace_exec.trace(main_pid, lambda: open(go, 'w').close(), timeout=120)
    wait_for(lambda: sh('systemctl', 'show', '-p', 'ActiveState', '--value', SERVICE, check=False) in ('inactive', 'failed'),
             'the service to stop', HANG_S)
    ctx['service_result'] = sh('systemctl', 'show', '-p', 'Result', '--value', SERVICE, check=False)
    ctx['service_status'] = sh('systemctl', 'show', '-p', 'ExecMainStatus', '--value', SERVICE, check=False)
    app = read_json(PROBE_DIR + '/app.json')
    return trace, app, ctx


def run_dry(sea, sock_path, helper, leak_fd, app_js=None):
    tmp = '/run/opencode-node-probe-dry'
    shutil.rmtree(tmp, ignore_errors=True)
    os.mkdir(tmp, 0o700)
    if os.path.exists(sock_path):
        os.unlink(sock_path)
    stop = threading.Event()
    t = threading.Thread(target=fake_supervisor, args=(sock_path, stop), daemon=True)
    t.start()
    wait_for(lambda: os.path.exists(sock_path), 'the stand-in supervisor', HANG_S)
    env = {'OPENCODE_PTY_APP_MODE': 'probe', 'OPENCODE_PTY_PROBE_DIR': tmp,
           'OPENCODE_PTY_TEST_SOCKET': sock_path, 'OPENCODE_PTY_TEST_HELPER': helper, 'PATH': '/usr/bin:/bin'}
    # Like a service: stdio only (close_fds), whatever this process inherited.
    pass_fds = ()
    if leak_fd is not None:  # the negative control: one stray inherited descriptor
        null = os.open('/dev/null', os.O_RDONLY)
        os.dup2(null, leak_fd, inheritable=True)
        os.close(null)
        pass_fds = (leak_fd,)
    p = subprocess.Popen([sea] + ([app_js] if app_js else []), env=env, stdin=subprocess.DEVNULL, close_fds=True, pass_fds=pass_fds)
    if leak_fd is not None:
        os.close(leak_fd)
    wait_for(lambda: read_json(tmp + '/ready.json'), 'the app to be ready', HANG_S)
    trace = trace_exec.trace(p.pid, lambda: open(tmp + '/go', 'w').close(), timeout=60)
    stop.set()
    t.join()
    app = read_json(tmp + '/app.json')
    return trace, app, {'helper': helper, 'dir': tmp, 'main_pid': p.pid, 'dry_run': True}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('sea')
    ap.add_argument('--out')
    ap.add_argument('--leak-fd', type=int)
    ap.add_argument('--dry-run', nargs=2, metavar=('SOCKET', 'HELPER'))
    ap.add_argument('--bun', metavar='APP_JS')
    a = ap.parse_args()
    sea = os.path.abspath(a.sea)
    app_js = os.path.abspath(a.bun) if a.bun else None
    report = {'probe': 'bun-inheritance' if app_js else 'node-sea-inheritance', 'sea': sea,
              'runtime': 'bun' if app_js else 'node'}
    try:
        with open(sea, 'rb') as f:
            import hashlib
            report['sea_sha256'] = hashlib.sha256(f.read()).hexdigest()
        v = json.loads(subprocess.run([sea] + ([app_js] if app_js else []), env={'OPENCODE_PTY_APP_MODE': 'version'},
                                      stdout=subprocess.PIPE, check=True).stdout)
        report['node_version'] = v['version']
        report['gate'] = gate_verdict(v['version'])
        if app_js:
            report['bun_version'] = sh(sea, '--version')
            report['gate']['satisfied'] = False
            report['gate']['statement'] = ('Bun %s (process.version %s) is not Node: the Node %s gate does not apply, '
                                           'and this result is evidence for Bun %s only'
                                           % (report['bun_version'], v['version'], GATE, report['bun_version']))
        if a.dry_run:
            report['mode'] = 'dry-run (not acceptance evidence)' + (
                ' with a leaked fd %d (negative control)' % a.leak_fd if a.leak_fd is not None else '')
            trace, app, ctx = run_attempts(
                lambda: run_dry(sea, a.dry_run[0], os.path.abspath(a.dry_run[1]), a.leak_fd, app_js))
        else:
            report['mode'] = 'service' + (' with a leaked fd %d (negative control)' % a.leak_fd
                                          if a.leak_fd is not None else '')
            trace, app, ctx = run_attempts(lambda: run_service(sea, a.leak_fd, app_js))
        if app_js:
            ctx.update(runtime='bun', bun_version=report['bun_version'], app_js=app_js)
        report['context'] = ctx
        report['checks'] = evaluate(trace, app, ctx)
        if app is not None and app.get('version') != report['node_version']:
            report['checks'].append({'name': 'app: the traced process reports the same %s version'
                                             % ('process.version' if app_js else 'Node'), 'ok': False,
                                     'evidence': app.get('version')})
        report['app'] = app
        report['trace'] = trace
        report['inheritance_ok'] = all(c['ok'] for c in report['checks'])
        status = 0 if report['inheritance_ok'] else 1
    except Exception as e:  # the probe itself could not run
        report['error'] = '%s: %s' % (type(e).__name__, e)
        report['inheritance_ok'] = False
        status = 2
    text = json.dumps(report, indent=1)
    if a.out:
        with open(a.out, 'w') as f:
            f.write(text + '\n')
    for c in report.get('checks', []):
        print('%s  %s' % ('PASS' if c['ok'] else 'FAIL', c['name']))
    g = report.get('gate', {})
    print('node %s: %s' % (report.get('node_version'), g.get('statement', '?')))
    ends = report.get('context', {}).get('start_deadline_ends', [])
    if ends:
        print('%d of the attempts ended start_timeout while traced' % len(ends))
    print('inheritance: %s%s' % ('PROVEN' if report['inheritance_ok'] else 'NOT PROVEN',
                                 (' (' + report['error'] + ')') if 'error' in report else ''))
    return status


if __name__ == '__main__':
    sys.exit(main())
