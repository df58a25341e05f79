#!/usr/bin/python3
# vm-tests/acceptance/detach.py: the detachable terminal that lives through the
# cutover's restart of opencode-v2.service (acceptance.sh, "a detachable
# terminal through the cutover"; issue #33, docs/PROTOCOL.md section 10). It
# owns the terminal's command, the bytes that command writes (deterministic,
# so every check is byte for byte and none depends on the host's speed) and
# the checks, printed as ledger lines (result, id, name, evidence; tabs) for
# acceptance.sh's acc.
#
#   detach.py start FLAGDIR W            the relay spec of the terminal (JSON)
#   detach.py attach SESSION W           the relay spec that takes it back
#   detach.py before DT_JSON KEPT_JSON OLD_PID UNIT_STATE OLD_ALIVE
#   detach.py after DT_JSON DTA_JSON OLD_PID NEW_PID HOW
import json
import sys

GRACE = 1800     # far above the stop, the cutover and the start under TCG
RING = 65536     # kMinScrollbackBytes: more than STREAM, so nothing is dropped
LINES = 200
BEFORE = 'ready\r\ngot:before\r\n'
# What the command writes while detached (nothing reaches it then, so this is
# all of it): it starts when the script makes FLAGDIR/dt-go, after the
# MainPID that relayed it is gone.
WHILE_DETACHED = ''.join('written while detached %d\r\n' % i for i in range(1, LINES + 1)) + 'detached-end\r\n'
STREAM = BEFORE + WHILE_DETACHED
AFTER = 'got:after\r\n'
EXIT_CODE = 6


def command(flags):
    # Echo off: the stream is only what the command prints. dt-printed says
    # that every byte of WHILE_DETACHED was written to the terminal.
    return ('stty -echo; echo ready; read l; echo "got:$l"; '
            'while [ ! -e %(f)s/dt-go ]; do sleep 0.1; done; '
            'i=0; while [ $i -lt %(n)d ]; do i=$((i+1)); echo "written while detached $i"; done; '
            'echo detached-end; : > %(f)s/dt-printed; '
            'while read l; do echo "got:$l"; done; exit %(x)d' % {'f': flags, 'n': LINES, 'x': EXIT_CODE})


def start(flags, w):
    w = int(w)
    return {'argv': ['/bin/sh', '-c', command(flags)], 'detachable': {'graceSeconds': GRACE, 'scrollbackBytes': RING},
            'timeout': w * 2,
            'steps': [{'event': 'started', 'timeout': w}, {'expect': 'ready\r\n', 'timeout': w}, {'input': 'before\n'},
                      {'expect': 'got:before\r\n', 'timeout': w}, {'touch': flags + '/dt-ready'},
                      # until the application stops: it closes the relay
                      {'event': 'exit', 'timeout': 1800}]}


def attach(session, w):
    w = int(w)
    return {'attach': {'session': session, 'until_next': len(STREAM)}, 'timeout': w * 2,
            'steps': [{'event': 'attached', 'timeout': w * 2}, {'expect': 'detached-end\r\n', 'timeout': w},
                      {'input': 'after\n'}, {'expect': AFTER, 'timeout': w}, {'eof': True}]}


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {'load_error': '%s: %s' % (path, e)}


def line(ok, cid, name, ev):
    print('%s\t%s\t%s\t%s' % ('pass' if ok else 'fail', cid, name, json.dumps(ev, default=str)[:1900]))


def before(dt_path, kept_path, old_pid, unit_state, old_alive):
    dt, kept, old_pid = load(dt_path), load(kept_path), int(old_pid)
    st = dt.get('started') or {}
    out = dt.get('output_text')
    line(st.get('app_pid') == old_pid and out == BEFORE,
         'detach.terminal-started',
         'before the cutover the application (MainPID %d) opens a detachable terminal (grace %d s, ring %d B) through '
         'the supervisor; typed into, it echoes' % (old_pid, GRACE, RING),
         {'started': {k: st.get(k) for k in ('unit', 'session', 'app_pid', 'node')}, 'output': out,
          'failed_step': dt.get('failed_step')})
    k = kept.get(st.get('session') or '-') if isinstance(kept, dict) else None
    line(k == {'unit': st.get('unit'), 'cursor': len(BEFORE), 'app_pid': old_pid},
         'detach.cursor-kept',
         'the application keeps the terminal\'s cursor in a file of its own: its session, its unit and cursor %d, '
         'the bytes it relayed (all its client got)' % len(BEFORE),
         {'kept': kept, 'client_got': dt.get('output_len')})
    t = dt.get('terminal') or {}
    line(dt.get('eof') is True and (t.get('error') or {}).get('code') == 'closed' and unit_state == 'active' and
         old_alive == 'no',
         'detach.detached-by-stop',
         'opencode-v2.service stopped (tools/cutover requires it inactive): its MainPID is gone, its client saw the '
         'end, and the terminal\'s unit still runs',
         {'unit': st.get('unit'), 'unit_state': unit_state, 'old_mainpid_alive': old_alive, 'terminal': t,
          'eof': dt.get('eof')})


def after(dt_path, dta_path, old_pid, new_pid, how):
    dt, r, old_pid, new_pid = load(dt_path), load(dta_path), int(old_pid), int(new_pid)
    st = dt.get('started') or {}
    a = r.get('attached') or {}
    listed, kept, replay = a.get('listed') or {}, a.get('kept') or {}, a.get('replay') or {}
    out = r.get('output_text') or ''
    line(new_pid > 0 and new_pid != old_pid and a.get('app_pid') == new_pid,
         'detach.restarted', 'the application runs again with a new MainPID (%s)' % how,
         {'before': old_pid, 'after': new_pid, 'attached_by': a.get('app_pid'), 'connect_error': r.get('error')})
    line(listed.get('session') == st.get('session') and listed.get('unit') == st.get('unit') and
         listed.get('state') == 'detached' and listed.get('grace') == GRACE and listed.get('scrollback') == RING and
         listed.get('first') == 0 and listed.get('next') == len(STREAM) and listed.get('exited') is False and
         listed.get('code') is None and isinstance(listed.get('pid'), int),
         'detach.listed',
         'the new MainPID\'s list() shows the terminal detached, with its unit, grace and ring, its command running, '
         'and all %d bytes it wrote in the ring (first 0)' % len(STREAM),
         {'listed': listed, 'error': r.get('terminal') if not a else None})
    line(kept.get('cursor') == len(BEFORE) and kept.get('app_pid') == old_pid and replay.get('cursor') == len(BEFORE) and
         replay.get('dropped') == 0 and replay.get('next') == len(STREAM) and a.get('session') == st.get('session') and
         a.get('unit') == st.get('unit'),
         'detach.attach-cursor',
         'it attaches at the cursor the old MainPID kept in the file: replay.cursor is it, dropped 0, '
         'next is what the command wrote',
         {'kept': kept, 'replay': replay, 'session': a.get('session'), 'unit': a.get('unit')})
    rep = out[:max(0, replay.get('next', 0) - replay.get('cursor', 0))]
    line(rep == WHILE_DETACHED and dt.get('output_text', '') + rep == STREAM,
         'detach.replay-exact',
         'the replay is byte for byte what the command wrote while detached (%d bytes): the old client\'s bytes and '
         'the replay are the command\'s stream, nothing missing or repeated' % len(WHILE_DETACHED),
         {'replay_bytes': len(rep), 'want': len(WHILE_DETACHED), 'head': rep[:60], 'tail': rep[-60:]})
    line(out == WHILE_DETACHED + AFTER,
         'detach.typed-echo',
         'typed into after the attach, the terminal echoes (got:after), right after the replay',
         {'after_replay': out[len(rep):][:300], 'output_len': r.get('output_len')})
    t = r.get('terminal') or {}
    line(t.get('type') == 'exit' and t.get('exitCode') == EXIT_CODE and t.get('signal') is None and
         t.get('error') is None and r.get('eof') is True,
         'detach.exit',
         'end of input ends it: exit code %d reaches the new MainPID\'s client' % EXIT_CODE,
         {'terminal': t, 'failed_step': r.get('failed_step'), 'eof': r.get('eof')})


if __name__ == '__main__':
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == 'start':
        print(json.dumps(start(*args)))
    elif cmd == 'attach':
        print(json.dumps(attach(*args)))
    elif cmd == 'before':
        before(*args)
    elif cmd == 'after':
        after(*args)
    else:
        sys.exit('usage: detach.py start|attach|before|after ...')
