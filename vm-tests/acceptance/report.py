#!/usr/bin/python3
# vm-tests/acceptance/report.py LEDGER CONTEXT OUT_JSON OUT_TXT: writes the
# acceptance report from the suite's ledger (one line per check: id, result,
# name, evidence, separated by tabs) and its context (target, versions, artifact hashes,
# revision, times). The JSON is what tools/cutover reads; the text is the
# summary for people.
#
# Results of a check: "pass", "fail", "not-applicable" (the check cannot run on
# this target; the reason is its evidence) and "not-satisfied" (it ran and the
# deployment gate it stands for is not met, e.g. the SEA's Node is not 26.4).
# Only "pass" is a pass. The report's "result" is "pass" only when every check
# passed, "fail" when one failed, otherwise "incomplete"; "suite_result" says
# whether the run itself found a failure (what ctest reports).
#
# The writer adds one check of its own, report.node-sea-exact: the report is
# one of the exact Node 26.4 SEA only if its context names a SEA of Node
# v26.4.x whose probe gate is satisfied for that version and for the SEA hash
# in "artifacts" (not-satisfied for another Node, fail for another hash). So a
# report of a Node 20 SEA, or of a SEA other than the one installed and probed,
# never has result "pass", whatever the suite's checks say.
import json
import os
import re
import sys
import time


def sea_check(ctx):
    arts = ctx.get('artifacts') or {}
    nv = (ctx.get('versions') or {}).get('node_sea')
    g = ctx.get('node_sea_gate') or {}
    ev = 'SEA %s Node %s; gate %s' % (arts.get('sea'), nv, json.dumps(g)[:600])
    c = {'id': 'report.node-sea-exact',
         'name': 'the report is one of the exact Node 26.4 SEA: the probed, installed SEA hash and its Node v26.4.x, gate satisfied',
         'evidence': ev}
    if not isinstance(nv, str) or not re.match(r'^v26\.4\.[0-9]+$', nv) or g.get('node_version') != nv:
        c['result'] = 'not-satisfied'
    elif (g.get('satisfied') is True and isinstance(arts.get('sea'), str) and len(arts['sea']) == 64 and
          g.get('sea_sha256') == arts['sea']):
        c['result'] = 'pass'
    else:
        c['result'] = 'fail'
    return c


def main():
    ledger, context, out_json, out_txt = sys.argv[1:5]
    checks = []
    with open(ledger, encoding='utf-8', errors='replace') as f:
        for line in f:
            line = line.rstrip('\n')
            if not line:
                continue
            parts = line.split('\t', 3)
            if len(parts) != 4 or parts[1] not in ('pass', 'fail', 'not-applicable', 'not-satisfied'):
                # A broken ledger line is a failure, never dropped.
                parts = ['ledger.broken-line', 'fail', 'a ledger line the report writer cannot read', line[:500]]
            checks.append({'id': parts[0], 'result': parts[1], 'name': parts[2], 'evidence': parts[3]})
    ctx = json.load(open(context))
    checks.append(sea_check(ctx))
    counts = {}
    for c in checks:
        counts[c['result']] = counts.get(c['result'], 0) + 1
    nfail = counts.get('fail', 0)
    npass = counts.get('pass', 0)
    if nfail:
        result = 'fail'
    elif npass and npass == len(checks):
        result = 'pass'
    else:
        result = 'incomplete'
    blocking = [{'id': c['id'], 'result': c['result'], 'evidence': c['evidence'][:300]}
                for c in checks if c['result'] != 'pass']
    doc = {
        'schema': 'opencode-pty-acceptance/1',
        'target': ctx.get('target'),
        'revision': ctx.get('revision'),
        'artifacts': ctx.get('artifacts'),
        'versions': ctx.get('versions'),
        'node_sea_gate': ctx.get('node_sea_gate'),
        'result': result,
        'suite_result': 'pass' if (nfail == 0 and npass > 0) else 'fail',
        'counts': counts,
        'blocking': blocking,
        'started': ctx.get('started'),
        'finished': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
        'duration_s': round(time.time() - ctx.get('started_epoch', time.time()), 1),
        'notes': ctx.get('notes', []),
        'checks': checks,
    }
    tmp = out_json + '.tmp'
    with open(tmp, 'w') as f:
        f.write(json.dumps(doc, indent=1) + '\n')
    os.chmod(tmp, 0o644)
    os.rename(tmp, out_json)

    a = doc['artifacts'] or {}
    v = doc['versions'] or {}
    g = doc['node_sea_gate'] or {}
    lines = [
        'opencode-pty acceptance report: %s' % doc['target'],
        'result: %s (suite %s): %s' % (doc['result'].upper(), doc['suite_result'],
                                       ', '.join('%d %s' % (n, k) for k, n in sorted(counts.items()))),
        'revision: %s' % doc['revision'],
        'artifacts (sha256 of the installed files):',
    ]
    for k in ('supervisor', 'launcher', 'client', 'verifier', 'sea'):
        if k in a:
            lines.append('  %-10s %s' % (k, a[k]))
    lines += [
        'systemd: %s' % v.get('systemd'),
        'kernel: %s (Yama ptrace_scope: %s)' % (v.get('kernel'), v.get('yama_ptrace_scope')),
        'kernel and systemd features relied on: %s' % ('; '.join(
            '%s: %s' % kv for kv in sorted((v.get('kernel_features') or {}).items())) or 'not recorded'),
        'os: %s' % v.get('os'),
        'node: SEA %s, application stand-in %s' % (v.get('node_sea'), v.get('node_app')),
        'node gate: %s' % g.get('statement', 'not recorded'),
        'time: %s, %s s' % (doc['finished'], doc['duration_s']),
        '',
        'checks:',
    ]
    for c in checks:
        lines.append('  %-14s %-36s %s' % (c['result'].upper(), c['id'], c['name']))
        if c['result'] != 'pass':
            lines.append('  %14s %s' % ('', c['evidence'][:400]))
    if doc['notes']:
        lines += ['', 'notes:'] + ['  - %s' % n for n in doc['notes']]
    if result != 'pass':
        lines += ['', 'tools/cutover accepts only a report whose result is "pass" (every check "pass"); '
                      'this one is "%s".' % result]
    tmp = out_txt + '.tmp'
    with open(tmp, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    os.chmod(tmp, 0o644)
    os.rename(tmp, out_txt)
    print('\n'.join(lines[:12]))


if __name__ == '__main__':
    main()
