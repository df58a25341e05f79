#!/usr/bin/python3
# vm-tests/acceptance/extract_props.py SOURCE_DIR: prints, as one JSON line,
# the supervisor's PTY unit property table as the source defines it
# (BuildPropertySpecs in daemon/systemd/unit_properties.cc, constants from
# daemon/systemd/constants.h and common/limits.h). The acceptance suite compares a live
# unit against exactly this list, so a property added to the supervisor is
# compared without anyone editing the suite. On a parse failure it prints
# {"error": ...} and exits 1 (the suite then fails its read-back check).
import json
import os
import re
import sys

TYPES = {'uint64_t': 't', 'int64_t': 'x', 'uint32_t': 'u', 'int32_t': 'i'}


def constants(src):
    out = {}
    for rel in ('daemon/systemd/constants.h', 'common/limits.h'):
        text = open(os.path.join(src, rel)).read()
        for m in re.finditer(r'inline\s+constexpr\s+[\w:<>\s]+?\s(k\w+)(?:\[\])?\s*=\s*([^;]+);', text):
            out[m.group(1)] = m.group(2).strip()
    return out


def resolve(expr, consts, depth=0):
    """A string literal or an integer expression of literals and constants."""
    expr = expr.strip()
    m = re.fullmatch(r'(?:limits::|opencode::)?(k\w+)', expr)
    if m and m.group(1) in consts and depth < 4:
        return resolve(consts[m.group(1)], consts, depth + 1)
    if re.fullmatch(r'"(?:[^"\\]|\\.)*"', expr):
        return json.loads(expr)
    arith = re.sub(r'(?<=\d)(?:ULL|LL|UL|U|L)\b', '', expr)
    arith = re.sub(r'(?:limits::)?(k\w+)', lambda mm: '(%s)' % resolve(mm.group(1), consts, depth + 1), arith)
    if re.fullmatch(r'[\d\s()*+\-/]+', arith):
        return int(eval(arith, {'__builtins__': {}}))  # digits and operators only
    raise ValueError('cannot resolve %r' % expr)


def split_top(s, sep=','):
    parts, depth, cur, q = [], 0, '', None
    for i, c in enumerate(s):
        if q:
            cur += c
            if c == q and s[i - 1] != '\\':
                q = None
            continue
        if c in '"\'':
            q = c
        elif c in '({[<':
            depth += 1 if c != '<' or re.match(r'\w', s[i - 1:i] or ' ') else 0
        elif c in ')}]>':
            depth -= 1 if c != '>' or depth > 0 else 0
        if c == sep and depth == 0:
            parts.append(cur.strip())
            cur = ''
        else:
            cur += c
    if cur.strip():
        parts.append(cur.strip())
    return parts


def value(expr, consts):
    expr = expr.strip()
    if expr in ('true', 'false'):
        return {'kind': 'literal', 'type': 'b', 'v': expr == 'true'}
    m = re.fullmatch(r'std::string\((.*)\)', expr, re.S)
    if m:
        try:
            return {'kind': 'literal', 'type': 's', 'v': resolve(m.group(1), consts)}
        except ValueError:
            return {'kind': 'dynamic', 'expr': expr}
    m = re.fullmatch(r'(u?int(?:32|64)_t)\{(.*)\}', expr, re.S)
    if m:
        return {'kind': 'literal', 'type': TYPES[m.group(1)], 'v': resolve(m.group(2), consts)}
    return {'kind': 'dynamic', 'expr': re.sub(r'\s+', ' ', expr)}


def main():
    src = sys.argv[1]
    try:
        consts = constants(src)
        text = open(os.path.join(src, 'daemon/systemd/unit_properties.cc')).read()
        body = text[text.index('std::vector<PropertySpec> BuildPropertySpecs('):]
        body = body[body.index('return {') + len('return {'):]
        # The table ends at the first "};" at depth 0.
        depth, end = 1, None
        for i, c in enumerate(body):
            depth += c == '{'
            depth -= c == '}'
            if depth == 0:
                end = i
                break
        body = re.sub(r'//[^\n]*', '', body[:end])
        props = []
        for item in split_top(body):
            if not item:
                continue
            if not (item.startswith('{') and item.endswith('}')):
                raise ValueError('unexpected table entry %r' % item[:80])
            f = split_top(item[1:-1])
            if len(f) < 3 or not re.fullmatch(r'"\w+"', f[0]):
                raise ValueError('unexpected table entry %r' % item[:80])
            iface = {'I::kUnit': 'unit', 'I::kService': 'service'}.get(f[2].strip())
            if iface is None:
                raise ValueError('unknown interface %r' % f[2])
            request = True
            if len(f) > 3:
                request = re.sub(r'/\*.*?\*/', '', f[3]).strip() != 'false'
            props.append({'name': json.loads(f[0]), 'iface': iface, 'request': request, 'value': value(f[1], consts)})
        if len(props) < 10:
            raise ValueError('only %d properties parsed' % len(props))
        # What the supervisor sets once the launcher reports the command's exec
        # (Session::LowerCpuWeight: SetUnitProperties, runtime), and so what a
        # unit whose command runs reports instead of the requested value.
        after_exec = {'CPUWeight': resolve('kUnitCpuWeight', consts)}
        print(json.dumps({'source': 'daemon/systemd/unit_properties.cc BuildPropertySpecs', 'properties': props,
                          'after_exec': after_exec}))
    except (OSError, ValueError, IndexError) as e:
        print(json.dumps({'error': 'extract_props: %s' % e}))
        sys.exit(1)


if __name__ == '__main__':
    main()
