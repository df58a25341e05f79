#!/usr/bin/python3
# vm-tests/acceptance/props.py: reads a live PTY unit's properties back with
# busctl and compares them with what the supervisor requested.
#
#   props.py compare SPEC.json CONTEXT.json [--literal-only]
#
# SPEC.json is the supervisor's own property table (daemon/systemd/unit_properties.cc,
# BuildPropertySpecs), extracted on the host by extract_props.py: for each
# property its name, the interface it reads back from, whether it is requested
# or read-back only, and its value (a literal, or "dynamic" with the source
# expression). CONTEXT.json names the unit and what the session asked for
# (session id, uid, cols, rows, argv); the dynamic values are computed from it
# here, independently of the supervisor. An unknown dynamic property (one this
# suite has no rule for) is a mismatch: a new property must come with its
# acceptance rule.
#
# Output: JSON {"unit", "path", "compared": [...], "mismatches": [...]} on
# stdout; exit 0 when every property reads back exactly as requested.
import base64
import json
import subprocess
import sys

DEST = 'org.freedesktop.systemd1'
IFACE = {'unit': 'org.freedesktop.systemd1.Unit', 'service': 'org.freedesktop.systemd1.Service'}
LAUNCHER = '/usr/local/libexec/opencode-pty-launcher'


def busctl(*args):
    r = subprocess.run(['busctl', '--system', '--json=short'] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError('busctl %s: %s' % (' '.join(args), r.stderr.strip()))
    return json.loads(r.stdout)


def unit_path(unit):
    return busctl('call', DEST, '/org/freedesktop/systemd1', 'org.freedesktop.systemd1.Manager',
                  'GetUnit', 's', unit)['data'][0]


def get(path, iface, name):
    v = busctl('get-property', DEST, path, IFACE[iface], name)
    return v['type'], v['data']


def enc(arg):
    return 'a' + base64.urlsafe_b64encode(arg.encode('utf-8', 'surrogateescape')).rstrip(b'=').decode()


def dynamic_expectation(name, ctx):
    """The value systemd must report for a property whose request depends on the session."""
    if name == 'Description':
        return 's', 'opencode PTY session %s' % ctx['session']
    if name == 'User':
        return 's', str(ctx['uid'])
    if name == 'Id':
        return 's', ctx['unit']
    if name == 'DropInPaths':
        # A runtime SetUnitProperties is kept as the unit's drop-in, one per property.
        return 'as', ['/run/systemd/transient/%s.d/50-%s.conf' % (ctx['unit'], n)
                      for n in sorted(ctx.get('after_exec', {}))]
    if name == 'FragmentPath':
        return 's', '/run/systemd/transient/%s' % ctx['unit']
    if name == 'Environment':
        return 'as', ['COLUMNS=%d' % ctx['cols'], 'LINES=%d' % ctx['rows']]
    if name == 'ExecStart':
        return 'a(sasbttttuii)', [LAUNCHER, [LAUNCHER] + [enc(a) for a in ctx['argv']], False]
    return None, None


def same(name, want_type, want, got_type, got):
    if name == 'ExecStart':
        # Compare path, argv and the ignore-failure flag; the rest is runtime status.
        return (got_type == want_type and isinstance(got, list) and len(got) == 1
                and got[0][:3] == want)
    return got_type == want_type and got == want


def main():
    if len(sys.argv) < 4 or sys.argv[1] != 'compare':
        sys.exit('usage: props.py compare SPEC.json CONTEXT.json [--literal-only]')
    spec = json.load(open(sys.argv[2]))
    ctx = json.load(open(sys.argv[3]))
    literal_only = '--literal-only' in sys.argv[4:]
    out = {'unit': ctx['unit'], 'compared': [], 'mismatches': []}
    try:
        path = unit_path(ctx['unit'])
    except RuntimeError as e:
        out['error'] = str(e)
        print(json.dumps(out))
        sys.exit(1)
    out['path'] = path
    if not spec.get('properties'):
        out['error'] = 'the property table is empty: %s' % spec.get('error')
        print(json.dumps(out))
        sys.exit(1)
    for p in spec['properties']:
        name, iface, val = p['name'], p['iface'], p['value']
        if val['kind'] == 'literal':
            want_type, want = val['type'], val['v']
            if name in ctx.get('after_exec', {}):
                want = ctx['after_exec'][name]
        else:
            if literal_only:
                continue
            want_type, want = dynamic_expectation(name, ctx)
            if want_type is None:
                out['mismatches'].append({'name': name, 'why': 'no acceptance rule for the dynamic value %s' % val['expr']})
                continue
        try:
            got_type, got = get(path, iface, name)
        except RuntimeError as e:
            out['mismatches'].append({'name': name, 'iface': iface, 'why': str(e)})
            continue
        row = {'name': name, 'iface': iface, 'requested': p.get('request', True), 'want': want,
               'got': got if name != 'ExecStart' else [g[:3] for g in got]}
        out['compared'].append(row)
        if not same(name, want_type, want, got_type, got):
            row['got_type'] = got_type
            out['mismatches'].append(row)
    print(json.dumps(out))
    sys.exit(0 if not out['mismatches'] else 1)


if __name__ == '__main__':
    main()
