#!/usr/bin/python3
# vm-tests/demo/relay_client.py: a client of the application stand-in's relay
# (vm-tests/demo/relay-app.js, running as opencode-v2.service). It asks the
# application for one PTY and talks to it; the application asks the supervisor.
#
#   relay_client.py [--socket PATH] --interactive [ARGV...]
#       The terminal on stdin/stdout becomes the PTY's (raw mode): typing goes
#       to the command (default /bin/bash -i), Ctrl-D at an empty prompt ends
#       the shell. Exit status: the command's, 1 if the session failed.
#   relay_client.py [--socket PATH] --steps JSON [--out FILE] [--transcript FILE]
#       A scripted session: JSON is {"argv": [...], "cwd"?, "cols"?, "rows"?,
#       "detachable"?, "timeout"?, "steps": [...]}, or {"attach": {"session",
#       "until_next"?}, "timeout"?, "steps": [...]} to attach to a detachable
#       terminal the application kept (relay-app.js: an "attached" event, then
#       the replay and live output); each step is one of
#         {"event": TYPE}            wait for an event (started, notice, exit...)
#         {"expect": REGEX}          wait until the output after the previous
#                                    match matches (Python re, bytes as latin-1)
#         {"input": TEXT} / {"input_hex": HEX}
#         {"signal": NAME} {"stop": true} {"eof": true} {"close": true}
#         {"touch": PATH} {"wait_file": PATH} {"sleep": SECONDS}
#       ("timeout" on a waiting step, default 30 s). After the steps it waits
#       for the session's end (exit or error event, then EOF). The result (JSON:
#       events, output, terminal event, step failures) goes to --out or stdout;
#       exit status 0 when every step completed and the session ended.
import json
import os
import pwd
import re
import select
import socket
import struct
import sys
import time

MAX_FRAME = 1024 * 1024


def default_socket():
    user = os.environ.get('OPENCODE_V2_USER', 'byk')
    return os.path.join(pwd.getpwnam(user).pw_dir, '.opencode-v2', 'relay.sock')


def frame(t, payload):
    if not isinstance(payload, bytes):
        payload = json.dumps(payload).encode()
    return t.encode('latin-1') + struct.pack('>I', len(payload)) + payload


class Relay:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        self.sock.connect(path)
        self.buf = b''
        self.eof = False
        self.events = []
        self.output = bytearray()
        self.terminal = None
        self.on_output = None
        self.on_event = None

    def send(self, t, payload=b''):
        self.sock.sendall(frame(t, payload))

    def fileno(self):
        return self.sock.fileno()

    def read_some(self):
        try:
            b = self.sock.recv(65536)
        except ConnectionResetError:
            b = b''
        if not b:
            self.eof = True
            return
        self.buf += b
        while len(self.buf) >= 5:
            n = struct.unpack('>I', self.buf[1:5])[0]
            if n > MAX_FRAME:
                raise RuntimeError('relay frame of %d bytes' % n)
            if len(self.buf) < 5 + n:
                break
            t, payload, self.buf = chr(self.buf[0]), self.buf[5:5 + n], self.buf[5 + n:]
            if t == 'O':
                self.output += payload
                if self.on_output:
                    self.on_output(payload)
            elif t == 'V':
                ev = json.loads(payload.decode('utf-8'))
                ev['_t'] = round(time.monotonic(), 3)
                ev['_output_before'] = len(self.output)
                self.events.append(ev)
                if ev.get('type') == 'exit' or (ev.get('type') == 'error' and ev.get('fatal') is not False):
                    self.terminal = self.terminal or ev
                if self.on_event:
                    self.on_event(ev)

    def pump(self, pred, timeout):
        end = time.monotonic() + timeout
        while not pred():
            if self.eof:
                return pred()
            left = end - time.monotonic()
            if left <= 0:
                return False
            r, _, _ = select.select([self.sock], [], [], min(left, 0.5))
            if r:
                self.read_some()
        return True


def scripted(path, spec, out, transcript):
    res = {'argv': spec.get('argv'), 'steps_done': 0, 'failed_step': None}
    t0 = time.monotonic()
    try:
        r = Relay(path)
    except OSError as e:
        res['connect_error'] = e.errno
        res['error'] = str(e)
        return res, 1
    if 'attach' in spec:
        r.send('A', spec['attach'])
    else:
        r.send('S', {k: spec[k] for k in ('argv', 'cwd', 'cols', 'rows', 'detachable') if k in spec})
    cursor = 0
    ok = True
    for i, st in enumerate(spec.get('steps', [])):
        to = st.get('timeout', 30)
        done = True
        if 'event' in st:
            want = st['event']
            done = r.pump(lambda: any(e.get('type') == want for e in r.events), to)
        elif 'expect' in st:
            rx = re.compile(st['expect'].encode('latin-1'), re.S)
            m = [None]

            def seen():
                m[0] = rx.search(bytes(r.output), cursor)
                return m[0] is not None
            done = r.pump(seen, to)
            if done:
                cursor = m[0].end()
        elif 'input' in st:
            r.send('I', st['input'].encode('utf-8'))
        elif 'input_hex' in st:
            r.send('I', bytes.fromhex(st['input_hex']))
        elif 'signal' in st:
            r.send('K', st['signal'].encode())
        elif st.get('stop'):
            r.send('T')
        elif st.get('eof'):
            r.send('E')
        elif st.get('close'):
            r.sock.close()
            res['closed_by_client'] = True
            res['steps_done'] = i + 1
            break
        elif 'touch' in st:
            open(st['touch'], 'w').close()
        elif 'wait_file' in st:
            end = time.monotonic() + to
            while not os.path.exists(st['wait_file']) and time.monotonic() < end:
                r.pump(lambda: False, 0.1)
            done = os.path.exists(st['wait_file'])
        elif 'sleep' in st:
            r.pump(lambda: False, st['sleep'])
        else:
            done = False
        if not done:
            ok = False
            res['failed_step'] = {'index': i, 'step': st}
            break
        res['steps_done'] = i + 1
    if not res.get('closed_by_client'):
        total = spec.get('timeout', 60)
        r.pump(lambda: r.terminal is not None, total)
        r.pump(lambda: False, 10)  # until EOF (pump returns early on it)
        res['eof'] = r.eof
        res['eof_after_terminal'] = r.eof and r.terminal is not None
        r.sock.close()
    res['events'] = r.events
    res['started'] = next((e for e in r.events if e.get('type') == 'started'), None)
    res['attached'] = next((e for e in r.events if e.get('type') == 'attached'), None)
    res['terminal'] = r.terminal
    res['output_len'] = len(r.output)
    res['output_text'] = bytes(r.output).decode('utf-8', 'replace')[-200000:]
    res['elapsed_s'] = round(time.monotonic() - t0, 3)
    if transcript:
        with open(transcript, 'wb') as f:
            f.write(bytes(r.output))
    if res.get('closed_by_client'):
        return res, 0 if ok else 1
    return res, 0 if (ok and r.terminal is not None) else 1


def utf8_complete(b):
    """Length of the prefix of b that ends on a UTF-8 character boundary."""
    i = len(b)
    for k in range(1, min(4, len(b)) + 1):
        c = b[-k]
        if c & 0xC0 == 0x80:
            continue
        need = 1 if c < 0x80 else 2 if c >> 5 == 6 else 3 if c >> 4 == 14 else 4 if c >> 3 == 30 else 1
        return i if need <= k else i - k
    return i


def interactive(path, argv):
    import termios
    import tty
    is_tty = os.isatty(0)
    try:
        cols, rows = os.get_terminal_size(1 if os.isatty(1) else 0)
    except OSError:
        cols, rows = 80, 24
    r = Relay(path)
    r.send('S', {'argv': argv, 'cols': cols, 'rows': rows})
    r.on_output = lambda b: (os.write(1, b))
    if not r.pump(lambda: any(e.get('type') == 'started' for e in r.events) or r.terminal, 60):
        print('\r\n[demo] no answer from the application within 60 s', file=sys.stderr)
        return 1
    st = next((e for e in r.events if e.get('type') == 'started'), None)
    if st is None:
        print('[demo] the PTY did not start: %s' % json.dumps(r.terminal), file=sys.stderr)
        return 1
    sys.stderr.write('[demo] %s started (session %s); you are in a shell on its PTY. '
                     'Ctrl-D at an empty prompt ends it.\r\n' % (st['unit'], st['session']))
    saved = termios.tcgetattr(0) if is_tty else None
    try:
        if is_tty:
            tty.setraw(0, termios.TCSANOW)  # keep what was typed ahead
        pending = b''
        stdin_open = True
        while r.terminal is None and not r.eof:
            fds = [r.sock] + ([0] if stdin_open else [])
            rd, _, _ = select.select(fds, [], [], 1.0)
            if r.sock in rd:
                r.read_some()
            if 0 in rd:
                b = os.read(0, 4096)
                if not b:
                    stdin_open = False
                    r.send('E')
                    continue
                pending += b
                n = utf8_complete(pending)
                if n:
                    r.send('I', pending[:n])
                    pending = pending[n:]
        r.pump(lambda: False, 5)
    finally:
        if saved is not None:
            termios.tcsetattr(0, termios.TCSADRAIN, saved)
    t = r.terminal or {}
    sys.stderr.write('\n[demo] session ended: %s\n' % json.dumps({k: t.get(k) for k in ('type', 'exitCode', 'signal', 'result', 'error', 'code')}))
    if t.get('type') == 'exit' and isinstance(t.get('exitCode'), int):
        return t['exitCode']
    return 1


def main():
    args = sys.argv[1:]
    path = default_socket()
    steps = out = transcript = None
    argv = None
    while args:
        a = args.pop(0)
        if a == '--socket' and args:
            path = args.pop(0)
        elif a == '--steps' and args:
            steps = json.loads(args.pop(0))
        elif a == '--out' and args:
            out = args.pop(0)
        elif a == '--transcript' and args:
            transcript = args.pop(0)
        elif a == '--interactive':
            argv, args = args or ['/bin/bash', '-i'], []
        else:
            sys.exit('usage: relay_client.py [--socket PATH] --interactive [ARGV...] | '
                     '--steps JSON [--out FILE] [--transcript FILE]')
    if argv is not None:
        sys.exit(interactive(path, argv))
    if steps is None:
        sys.exit('relay_client.py: --steps JSON or --interactive is required')
    res, rc = scripted(path, steps, out, transcript)
    text = json.dumps(res, indent=1)
    if out:
        with open(out, 'w') as f:
            f.write(text + '\n')
    else:
        print(text)
    sys.exit(rc)


if __name__ == '__main__':
    main()
