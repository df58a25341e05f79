#!/usr/bin/python3
# vm-tests/acceptance/isolation.py: same-UID isolation probe. Run as a process
# of the application's uid (an ordinary one, or one inside a PTY session), it
# tries every way the acceptance suite knows to reach the application's
# supervisor connection or to be taken for the application, and reports each
# attempt as JSON on stdout: {"name", "blocked": bool, "errno", "detail"}.
# It never decides pass or fail itself; acceptance.sh does (any attempt with
# "blocked": false fails the run).
#
#   isolation.py [--target NAME:PID[:FD,FD...]]... [--ancestors]
#                [--supervisor PATH] [--helper PATH] [--only KIND,...]
#
# Per target: PTRACE_ATTACH, PTRACE_SEIZE, process_vm_readv, pidfd_getfd of
# each FD (default: every descriptor /proc/PID/fd lists), open() of each
# socket FD through /proc/PID/fd/N (read-write, and O_PATH then SO_TYPE on it).
# --ancestors adds this process's parent chain up to the session's launcher
# (the PTY stream socket is their stdin/stdout). Then: connect to the
# supervisor and read its first envelope (must be an "unauthenticated"
# error), the same with the real client helper sending a START, and every
# socket this process inherited handed to the helper as its fd 3.
# KIND: ptrace, vmread, getfd, procfd, connect, helper, inherited.
import ctypes
import errno
import fcntl
import json
import os
import socket
import struct
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]

SYS_pidfd_open = 434
SYS_pidfd_getfd = 438
SYS_process_vm_readv = 310
PTRACE_ATTACH = 16
PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
O_PATH = 0o10000000

results = []


def en(e):
    return errno.errorcode.get(e, str(e))


def record(name, blocked, err=None, detail=None):
    results.append({'name': name, 'blocked': bool(blocked), 'errno': en(err) if err else None, 'detail': detail})


def fd_table(pid):
    out = {}
    try:
        for n in os.listdir('/proc/%d/fd' % pid):
            try:
                out[int(n)] = os.readlink('/proc/%d/fd/%s' % (pid, n))
            except OSError as e:
                out[int(n)] = '?' + en(e.errno)
    except OSError as e:
        return None, en(e.errno)
    return out, None


def try_ptrace(name, pid):
    for req, label in ((PTRACE_ATTACH, 'PTRACE_ATTACH'), (PTRACE_SEIZE, 'PTRACE_SEIZE')):
        r = libc.ptrace(req, pid, None, None)
        if r == 0:
            # A hole: leave the tracee as it was, then report.
            if req == PTRACE_SEIZE:
                libc.ptrace(PTRACE_INTERRUPT, pid, None, None)
            try:
                os.waitpid(pid, 0x40000000)  # __WALL
            except OSError:
                pass
            libc.ptrace(PTRACE_DETACH, pid, None, None)
            record('%s: %s' % (name, label), False, None, 'attached to pid %d' % pid)
        else:
            e = ctypes.get_errno()
            record('%s: %s' % (name, label), e in (errno.EPERM, errno.EACCES), e, 'pid %d' % pid)


def try_vmread(name, pid):
    addr = None
    try:
        with open('/proc/%d/maps' % pid) as f:
            for line in f:
                rng, perms = line.split()[:2]
                if perms.startswith('r'):
                    addr = int(rng.split('-')[0], 16)
                    break
    except OSError as e:
        detail = 'maps unreadable (%s); tried address 0x400000' % en(e.errno)
        addr = 0x400000
    else:
        detail = 'address 0x%x' % (addr or 0)
    buf = ctypes.create_string_buffer(8)

    class iovec(ctypes.Structure):
        _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]
    local = iovec(ctypes.cast(buf, ctypes.c_void_p), 8)
    remote = iovec(addr or 0x400000, 8)
    r = libc.syscall(SYS_process_vm_readv, pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    if r >= 0:
        record('%s: process_vm_readv' % name, False, None, 'read %d bytes at %s' % (r, detail))
    else:
        e = ctypes.get_errno()
        record('%s: process_vm_readv' % name, e in (errno.EPERM, errno.EACCES), e, detail)


def is_socket_fd(fd):
    try:
        s = socket.socket(fileno=os.dup(fd))
    except OSError:
        return None
    try:
        return {'family': int(s.family), 'type': int(s.type)}
    finally:
        s.close()


def try_getfd(name, pid, fds):
    pidfd = libc.syscall(SYS_pidfd_open, pid, 0)
    if pidfd < 0:
        e = ctypes.get_errno()
        # pidfd_open itself needs no privilege; failing here proves nothing.
        record('%s: pidfd_open (needed for pidfd_getfd)' % name, False, e, 'pidfd_open failed: the probe cannot run')
        return
    try:
        for fd in fds:
            r = libc.syscall(SYS_pidfd_getfd, pidfd, fd, 0)
            if r >= 0:
                kind = is_socket_fd(r)
                os.close(r)
                record('%s: pidfd_getfd fd %d' % (name, fd), False, None, 'obtained a copy (%s)' % (
                    'socket %s' % kind if kind else 'not a socket'))
            else:
                e = ctypes.get_errno()
                record('%s: pidfd_getfd fd %d' % (name, fd), e in (errno.EPERM, errno.EACCES), e, 'pid %d' % pid)
    finally:
        os.close(pidfd)


def try_procfd(name, pid, fds, table):
    for fd in fds:
        link = (table or {}).get(fd, '?')
        p = '/proc/%d/fd/%d' % (pid, fd)
        try:
            f = os.open(p, os.O_RDWR | os.O_CLOEXEC)
        except OSError as e:
            record('%s: open %s read-write' % (name, p), True, e.errno, link)
        else:
            kind = is_socket_fd(f)
            os.close(f)
            # A regular file of the app opened again is not its socket; only a
            # usable socket (or any descriptor of a socket fd) is a hole.
            record('%s: open %s read-write' % (name, p), not link.startswith('socket:') and kind is None,
                   None, 'opened (%s; %s)' % (link, 'a socket' if kind else 'not a socket'))
        try:
            f = os.open(p, O_PATH | os.O_CLOEXEC)
        except OSError as e:
            record('%s: open %s O_PATH' % (name, p), True, e.errno, link)
            continue
        # Python's socket object checks the descriptor with getsockopt(SO_TYPE);
        # on an O_PATH handle that fails (EBADF): the handle is not a socket.
        g = os.dup(f)
        try:
            sk = socket.socket(fileno=g)
        except OSError as e:
            os.close(g)
            usable = False
            link += ' (%s)' % en(e.errno)
        else:
            try:
                sk.send(b'')
                usable = True
            except OSError as e2:
                usable = e2.errno not in (errno.EBADF, errno.ENOTSOCK)
            finally:
                sk.close()
        os.close(f)
        record('%s: use %s through O_PATH' % (name, p), not usable, None,
               '%s: %s' % (link, 'usable as a socket' if usable else 'an O_PATH handle, not usable for I/O'))


def read_envelope(s, timeout=20):
    s.settimeout(timeout)
    buf = b''
    try:
        while len(buf) < 8 or len(buf) < 8 + struct.unpack('>I', buf[4:8])[0]:
            b = s.recv(65536)
            if not b:
                break
            buf += b
    except socket.timeout:
        return {'timeout': True, 'bytes': len(buf)}
    except OSError as e:
        return {'recv_error': en(e.errno)}
    if len(buf) >= 8 and buf[1] == 0x82:
        n = struct.unpack('>I', buf[4:8])[0]
        try:
            return json.loads(buf[8:8 + n].decode())
        except ValueError:
            return {'raw': buf[:64].hex()}
    return {'raw': buf[:64].hex(), 'eof': True}


def try_connect(name, path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        s.connect(path)
    except OSError as e:
        # Not connecting at all is not the case under test (the app's uid may
        # connect); report it as not proven.
        record('%s: connect and be taken for the MainPID' % name, False, e.errno, 'connect failed: nothing proven')
        return
    env = read_envelope(s)
    s.close()
    record('%s: connect and be taken for the MainPID' % name,
           env.get('type') == 'error' and env.get('code') == 'unauthenticated', None, env)


def run_helper(helper, sock_fd, argv):
    """Runs the client helper exactly as the module does: fd 3 = the socket,
    fd 4 = a directory, stdio otherwise; returns (exit status, stderr)."""
    d = os.open('/', os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    # Out of the way of 0..4 first, so the dup2s below cannot clobber each other.
    hs = fcntl.fcntl(sock_fd, fcntl.F_DUPFD_CLOEXEC, 100)
    hd = fcntl.fcntl(d, fcntl.F_DUPFD_CLOEXEC, 100)
    os.close(d)
    # Whatever this process inherited stays out of the helper (it refuses any
    # descriptor >= 5): mark everything close-on-exec.
    for n in os.listdir('/proc/self/fd'):
        try:
            fcntl.fcntl(int(n), fcntl.F_SETFD, fcntl.FD_CLOEXEC)
        except OSError:
            pass
    r, w = os.pipe2(os.O_CLOEXEC)
    null = os.open('/dev/null', os.O_RDWR | os.O_CLOEXEC)
    try:
        pid = os.posix_spawn(helper, [helper, '--cols', '80', '--rows', '24', '--'] + argv, {}, file_actions=[
            (os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, w, 2),
            (os.POSIX_SPAWN_DUP2, hs, 3), (os.POSIX_SPAWN_DUP2, hd, 4)])
    finally:
        for fd in (hs, hd, w, null):
            os.close(fd)
    err = b''
    while True:
        b = os.read(r, 4096)
        if not b:
            break
        err += b[:4096]
    os.close(r)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), err.decode('utf-8', 'replace').strip()[:200]


def try_helper(name, path, helper):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        s.connect(path)
    except OSError as e:
        record('%s: START by the real helper on a connection it inherited from this process' % name, False, e.errno, 'connect failed: nothing proven')
        return
    rc, err = run_helper(helper, s.fileno(), ['/bin/sh', '-c', 'echo impersonated'])
    env = read_envelope(s)
    s.close()
    record('%s: START by the real helper on a connection it inherited from this process' % name,
           env.get('type') == 'error' and env.get('code') == 'unauthenticated', None,
           {'helper_exit': rc, 'helper_stderr': err, 'envelope': env})


def try_inherited(name, path, helper, table):
    """table: this process's descriptors as it started (before any attempt)."""
    mine = dict(table or {})
    sockets = []
    for fd, link in sorted(mine.items()):
        if link.startswith('socket:'):
            try:
                os.fstat(fd)
            except OSError:
                continue  # the listing's own descriptor, gone
            sockets.append(fd)
    if not sockets:
        record('%s: a PTY through an inherited descriptor' % name, True, None,
               'no inherited socket: descriptors %s' % json.dumps(mine))
        return
    for fd in sockets:
        try:
            kind = is_socket_fd(fd)
            rc, errtxt = run_helper(helper, fd, ['/bin/sh', '-c', 'echo delegated'])
            s = socket.socket(fileno=os.dup(fd))
            env = read_envelope(s, timeout=5)
            s.close()
        except OSError as e:
            # The descriptor cannot even be used as a socket by its holder.
            record('%s: a PTY through inherited fd %d' % (name, fd), True, e.errno,
                   {'link': mine[fd], 'kind': kind, 'table': mine})
            continue
        started = env.get('type') == 'started'
        record('%s: a PTY through inherited fd %d' % (name, fd), not started, None,
               {'link': mine[fd], 'kind': kind, 'helper_exit': rc, 'helper_stderr': errtxt, 'envelope': env})


def ancestors():
    out = []
    pid = os.getppid()
    while pid > 1 and len(out) < 8:
        try:
            exe = os.readlink('/proc/%d/exe' % pid)
        except OSError as e:
            exe = '?' + en(e.errno)
        try:
            st = os.stat('/proc/%d' % pid)
        except OSError:
            break
        if st.st_uid != os.getuid():
            break
        out.append((pid, exe))
        with open('/proc/%d/stat' % pid) as f:
            pid = int(f.read().rsplit(')', 1)[1].split()[1])
    return out


def main():
    args = sys.argv[1:]
    targets = []
    only = None
    sup = '/run/opencode-pty/supervisor.sock'
    helper = '/usr/local/libexec/opencode-pty-client'
    anc = False
    while args:
        a = args.pop(0)
        if a == '--target':
            parts = args.pop(0).split(':')
            fds = [int(x) for x in parts[2].split(',') if x] if len(parts) > 2 else None
            targets.append((parts[0], int(parts[1]), fds))
        elif a == '--ancestors':
            anc = True
        elif a == '--supervisor':
            sup = args.pop(0)
        elif a == '--helper':
            helper = args.pop(0)
        elif a == '--only':
            only = set(args.pop(0).split(','))
        else:
            sys.exit('unknown argument %s' % a)
    want = lambda k: only is None or k in only  # noqa: E731
    # What this process inherited, before any attempt opens anything.
    inherited, _ = fd_table(os.getpid())
    inherited = {fd: l for fd, l in (inherited or {}).items() if not l.startswith('?')}
    if anc:
        for pid, exe in ancestors():
            targets.append(('ancestor %s' % os.path.basename(exe), pid, None))
    info = {'uid': os.getuid(), 'pid': os.getpid(), 'cgroup': open('/proc/self/cgroup').read().strip(),
            'tty': os.ttyname(0) if os.isatty(0) else None, 'targets': []}
    try:
        info['ptrace_scope'] = open('/proc/sys/kernel/yama/ptrace_scope').read().strip()
    except OSError:
        info['ptrace_scope'] = None
    for name, pid, fds in targets:
        table, err = fd_table(pid)
        if fds is None:
            fds = sorted(table) if table else []
        info['targets'].append({'name': name, 'pid': pid, 'fds': fds, 'fd_table': table, 'fd_table_error': err})
        if want('ptrace'):
            try_ptrace(name, pid)
        if want('vmread'):
            try_vmread(name, pid)
        if want('getfd'):
            try_getfd(name, pid, fds)
        if want('procfd'):
            socks = [fd for fd in fds if (table or {}).get(fd, 'socket:').startswith('socket:')]
            try_procfd(name, pid, socks, table)
    if want('connect'):
        try_connect('supervisor', sup)
    if want('helper'):
        try_helper('supervisor', sup, helper)
    if want('inherited'):
        try_inherited('self', sup, helper, inherited)
    info['attempts'] = results
    print(json.dumps(info))


if __name__ == '__main__':
    main()
