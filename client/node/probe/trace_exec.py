#!/usr/bin/python3
# trace_exec.py: watches every execve of a process tree from outside, with
# ptrace, and records each new program's descriptor table at its first
# instruction. Used by the Node SEA inheritance probe (probe.py); it needs
# root (or CAP_SYS_PTRACE) and changes nothing in the traced programs.
#
# How: PTRACE_SEIZE the target (the Node MainPID) with TRACEFORK, TRACEVFORK,
# TRACECLONE and TRACEEXEC, so every thread and child it creates is traced too.
# At a PTRACE_EVENT_EXEC stop the new image is loaded, close-on-exec
# descriptors are already closed, and not one instruction of the new program
# has run: its /proc/<pid>/fd is exactly what it inherited. The instruction
# pointer is read and compared with the image's AT_ENTRY (x86_64) to show it.
# At each fork the forking thread is stopped and its table is read too: the
# descriptors the child could have inherited, and whether they are
# close-on-exec (the parent's table at exec time is recorded as well, but by
# then the parent may already have closed some).
#
# Library use: trace(pid, on_seized, timeout) -> dict; the CLI prints JSON.

import ctypes
import json
import os
import platform
import signal
import struct
import sys
import time

PTRACE_CONT = 7
PTRACE_GETREGS = 12
PTRACE_DETACH = 17
PTRACE_GETEVENTMSG = 0x4201
PTRACE_SEIZE = 0x4206
PTRACE_O_TRACEFORK = 0x02
PTRACE_O_TRACEVFORK = 0x04
PTRACE_O_TRACECLONE = 0x08
PTRACE_O_TRACEEXEC = 0x10
PTRACE_EVENT_FORK, PTRACE_EVENT_VFORK, PTRACE_EVENT_CLONE, PTRACE_EVENT_EXEC = 1, 2, 3, 4
PTRACE_EVENT_STOP = 128
WALL = 0x40000000
O_CLOEXEC = 0o2000000
AT_ENTRY = 9

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long


class UserRegs(ctypes.Structure):  # struct user_regs_struct, x86_64
    _fields_ = [(n, ctypes.c_ulonglong) for n in (
        'r15', 'r14', 'r13', 'r12', 'rbp', 'rbx', 'r11', 'r10', 'r9', 'r8', 'rax', 'rcx', 'rdx', 'rsi', 'rdi',
        'orig_rax', 'rip', 'cs', 'eflags', 'rsp', 'ss', 'fs_base', 'gs_base', 'ds', 'es', 'fs', 'gs')]


def ptrace(req, pid, addr=0, data=0):
    r = libc.ptrace(req, pid, ctypes.c_void_p(addr), ctypes.c_void_p(data))
    if r == -1:
        e = ctypes.get_errno()
        raise OSError(e, '%s (ptrace %#x, pid %d)' % (os.strerror(e), req, pid))
    return r


def fd_table(pid):
    """Every open descriptor of pid: target, flags (octal), close-on-exec, dev/ino."""
    table = {}
    base = '/proc/%d/fd' % pid
    for name in os.listdir(base):
        fd = int(name)
        entry = {'fd': fd}
        try:
            entry['target'] = os.readlink('%s/%s' % (base, name))
            with open('/proc/%d/fdinfo/%s' % (pid, name)) as f:
                for line in f:
                    if line.startswith('flags:'):
                        flags = int(line.split()[1], 8)
                        entry['flags'] = '0%o' % flags
                        entry['cloexec'] = bool(flags & O_CLOEXEC)
            st = os.stat('%s/%s' % (base, name))
            entry['dev'], entry['ino'] = st.st_dev, st.st_ino
            entry['kind'] = ('socket' if (st.st_mode & 0o170000) == 0o140000 else
                             'dir' if (st.st_mode & 0o170000) == 0o040000 else 'other')
        except OSError as e:  # closed in the meantime (only possible for a running process)
            entry['error'] = e.strerror
        table[fd] = entry
    return [table[k] for k in sorted(table)]


def at_entry(pid):
    with open('/proc/%d/auxv' % pid, 'rb') as f:
        data = f.read()
    for i in range(0, len(data) - 15, 16):
        key, val = struct.unpack_from('<QQ', data, i)
        if key == AT_ENTRY:
            return val
    return None


def read_cmdline(pid):
    with open('/proc/%d/cmdline' % pid, 'rb') as f:
        return [a.decode('utf-8', 'replace') for a in f.read().split(b'\0')[:-1]]


def ppid_of(pid):
    with open('/proc/%d/stat' % pid) as f:
        s = f.read()
    return int(s[s.rindex(')') + 2:].split()[1])


def at_exec(pid, t0):
    ev = {'pid': pid, 't': round(time.monotonic() - t0, 6)}
    ev['exe'] = os.readlink('/proc/%d/exe' % pid)
    ev['argv'] = read_cmdline(pid)
    ev['ppid'] = ppid_of(pid)
    ev['fds'] = fd_table(pid)
    try:
        ev['parent_fds'] = fd_table(ev['ppid'])
    except OSError as e:
        ev['parent_fds_error'] = e.strerror
    if platform.machine() == 'x86_64':
        regs = UserRegs()
        ptrace(PTRACE_GETREGS, pid, 0, ctypes.addressof(regs))
        ev['rip'], ev['at_entry'] = '%#x' % regs.rip, '%#x' % (at_entry(pid) or 0)
        ev['at_first_instruction'] = regs.rip == at_entry(pid)
    else:
        ev['at_first_instruction'] = None  # not implemented for this architecture
    return ev


def trace(target, on_seized=None, timeout=120.0):
    """Traces target and everything it creates until target exits (or timeout)."""
    t0 = time.monotonic()
    result = {'target': target, 'execs': [], 'exits': {}, 'forks': 0, 'threads': 0, 'signals': 0}
    opts = PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC
    ptrace(PTRACE_SEIZE, target, 0, opts)
    traced = {target}
    at_fork = {}  # child pid -> the parent's descriptor table at the fork
    if on_seized:
        on_seized()
    deadline = t0 + timeout
    while True:
        if time.monotonic() > deadline:
            result['timeout'] = True  # our exit detaches every tracee
            break
        try:
            pid, status = os.waitpid(-1, WALL | os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.0005)
            continue
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            traced.discard(pid)
            result['exits'][str(pid)] = {'t': round(time.monotonic() - t0, 6),
                                         'status': os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                                         'signal': os.WTERMSIG(status) if os.WIFSIGNALED(status) else None}
            if pid == target:
                break
            continue
        if not os.WIFSTOPPED(status):
            continue
        traced.add(pid)
        sig = os.WSTOPSIG(status)
        event = status >> 16
        inject = 0
        if sig == signal.SIGTRAP and event == PTRACE_EVENT_EXEC:
            ev = at_exec(pid, t0)
            ev['at_fork'] = at_fork.get(pid)
            result['execs'].append(ev)
        elif sig == signal.SIGTRAP and event in (PTRACE_EVENT_FORK, PTRACE_EVENT_VFORK):
            # The forking thread is stopped: its table is what the child got.
            result['forks'] += 1
            child = ctypes.c_ulong()
            ptrace(PTRACE_GETEVENTMSG, pid, 0, ctypes.addressof(child))
            at_fork[child.value] = {'t': round(time.monotonic() - t0, 6), 'parent': pid, 'fds': fd_table(pid)}
        elif sig == signal.SIGTRAP and event == PTRACE_EVENT_CLONE:
            result['threads'] += 1
        elif event == PTRACE_EVENT_STOP:
            pass  # a new tracee's first stop, or a group stop: let it run
        else:
            inject = sig  # an ordinary signal: deliver it
            result['signals'] += 1
        try:
            ptrace(PTRACE_CONT, pid, 0, inject)
        except OSError:
            traced.discard(pid)  # gone meanwhile
    # waitpid(-1) may report a new child's first stop (which is continued at
    # once) and then its exec before the parent's fork event: under slow
    # emulation (the TCG VM) the helper's exec was seen first. The parent is
    # stopped at its fork event until it is reaped, so the table recorded then
    # is still the one the child got; attach it now.
    for ev in result['execs']:
        if ev.get('at_fork') is None:
            ev['at_fork'] = at_fork.get(ev['pid'])
    result['duration'] = round(time.monotonic() - t0, 6)
    return result


def main():
    import argparse
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('pid', type=int)
    ap.add_argument('--go', help='create this file once the target is seized')
    ap.add_argument('--timeout', type=float, default=120.0)
    a = ap.parse_args()

    def go():
        if a.go:
            open(a.go, 'w').close()
    json.dump(trace(a.pid, go, a.timeout), sys.stdout, indent=1)
    print()


if __name__ == '__main__':
    main()
