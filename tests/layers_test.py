#!/usr/bin/env python3
# layers_test: the layer rule of daemon/ (daemon/README.md). Every source under
# daemon/ belongs to exactly one layer, bottom to top:
#   base     daemon/base/
#   systemd  daemon/systemd/
#   auth     daemon/auth/
#   session  daemon/session/
#   top      daemon/*.cc, daemon/*.h
# A file includes (#include "daemon/...") only files of its own layer or a
# lower one, and no two files include each other, directly or through others:
# no cycle between files, and none between modules (x.h with its x.cc).
# Usage: layers_test.py [ROOT]. Exit 1 names every breach with its file and line.
import os
import re
import sys

LAYERS = ["base", "systemd", "auth", "session", "top"]
SOURCE_EXT = (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".inc")
# Files of daemon/ that are not C++ sources.
NOT_SOURCES = {"daemon/CMakeLists.txt", "daemon/README.md"}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def layer_of(path):
    """The layer of a repository path under daemon/, or None."""
    parts = path.split("/")
    if len(parts) == 2:
        return "top"
    if len(parts) == 3 and parts[1] in LAYERS and parts[1] != "top":
        return parts[1]
    return None


def module_of(path):
    return os.path.splitext(path)[0]


def find_cycle(graph):
    """One cycle of `graph` (node -> {neighbour: where}) as a node list, or None."""
    white, grey, black = 0, 1, 2
    color = {n: white for n in graph}
    stack = []

    def visit(n):
        color[n] = grey
        stack.append(n)
        for m in sorted(graph.get(n, {})):
            if color.get(m, white) == grey:
                return stack[stack.index(m):] + [m]
            if color.get(m, white) == white:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        color[n] = black
        return None

    for n in sorted(graph):
        if color[n] == white:
            found = visit(n)
            if found:
                return found
    return None


def describe(cycle, graph):
    """a -> b (a:line) -> a (b:line): each step with the include that makes it."""
    return cycle[0] + "".join(
        " -> %s (%s)" % (cycle[i + 1], graph[cycle[i]][cycle[i + 1]]) for i in range(len(cycle) - 1))


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    daemon = os.path.join(root, "daemon")
    files = []
    for dirpath, dirnames, filenames in os.walk(daemon):
        dirnames.sort()
        for name in sorted(filenames):
            files.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
    bad = []
    sources = []
    for f in files:
        if f in NOT_SOURCES:
            continue
        if not f.endswith(SOURCE_EXT):
            bad.append("%s: neither a C++ source nor one of %s" % (f, ", ".join(sorted(NOT_SOURCES))))
        elif layer_of(f) is None:
            bad.append("%s: in no layer (the layers: daemon/{%s}/ and daemon/ itself)" %
                       (f, ",".join(l for l in LAYERS if l != "top")))
        else:
            sources.append(f)
    if not sources:
        print("layers_test: no sources under %s" % daemon)
        return 1

    files_graph = {f: {} for f in sources}    # file -> {included file: "file:line"}
    modules_graph = {}                         # module -> {module: "file:line"}
    n_includes = 0
    for f in sources:
        with open(os.path.join(root, f), encoding="utf-8") as fh:
            lines = fh.read().split("\n")
        for no, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            where = "%s:%d" % (f, no)
            if not target.startswith("daemon/"):
                # Another tree (common/, absl/) or a generated header; a daemon
                # file named relative to the includer would escape the check.
                rel = os.path.normpath(os.path.join(os.path.dirname(f), target)).replace(os.sep, "/")
                if rel.startswith("daemon/") and os.path.exists(os.path.join(root, rel)):
                    bad.append('%s: #include "%s" names %s by a relative path; write "%s"' %
                               (where, target, rel, rel))
                continue
            n_includes += 1
            if target not in files_graph:
                if os.path.exists(os.path.join(root, target)):
                    bad.append('%s: #include "%s": a file in no layer' % (where, target))
                else:
                    bad.append('%s: #include "%s": no such file' % (where, target))
                continue
            src_layer, dst_layer = layer_of(f), layer_of(target)
            if LAYERS.index(dst_layer) > LAYERS.index(src_layer):
                bad.append('%s: #include "%s": layer %s includes the higher layer %s' %
                           (where, target, src_layer, dst_layer))
            files_graph[f].setdefault(target, where)
            a, b = module_of(f), module_of(target)
            if a != b:
                modules_graph.setdefault(a, {}).setdefault(b, where)
                modules_graph.setdefault(b, {})

    cycle = find_cycle(files_graph)
    if cycle:
        bad.append("include cycle between files: %s" % describe(cycle, files_graph))
    else:
        cycle = find_cycle(modules_graph)
        if cycle:
            bad.append("include cycle between modules (x.h with x.cc): %s" %
                       describe(cycle, modules_graph))

    for b in bad:
        print(b)
    counts = ", ".join("%s %d" % (l, sum(1 for f in sources if layer_of(f) == l)) for l in LAYERS)
    print("layers_test: %d daemon/ sources (%s), %d daemon/ includes, %d breach%s" % (
        len(sources), counts, n_includes, len(bad), "" if len(bad) == 1 else "es"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
