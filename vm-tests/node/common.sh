# vm-tests/node/common.sh: shared set-up of the Node client suites (sourced).
# Installs the built product from /artifacts with its own installer, starts the
# supervisor's socket, and provides helpers to run a Node program as the MainPID
# of opencode-v2.service (User=byk) - the only process the supervisor serves.
#
# The production unit file is used as installed; a runtime drop-in
# (/run/systemd/system/opencode-v2.service.d/50-node-test.conf) replaces only
# ExecStart (the program under test), clears ExecCondition (the readiness gate
# is proven by vm.gate.*; these containers have no Yama, so it would deny) and
# sets Restart=no. The drop-in is removed after each run.
A=/artifacts
NODE_SEA_DIR=$A/node-sea
# The Node 26.4 SEA (client/node/sea/build.sh), installed root-owned by
# node_install: the smoke app runs inside it (its script mode) as the MainPID.
NODE_SEA_APP=/usr/local/lib/opencode-node-test/opencode-pty-sea-app
CLIENT=$NODE_SEA_DIR/client
APP_SERVICE=opencode-v2.service
DROPIN_DIR=/run/systemd/system/opencode-v2.service.d
WORK=/run/opencode-node-test

node_install() {
  missing=
  for f in opencode-pty-supervisor opencode-pty-launcher opencode-pty-client opencode-pty-verify-readiness \
           tools/install units/opencode-v2.service node-sea/opencode-pty-sea-app node-sea/client/index.js; do
    [ -e "$A/$f" ] || missing="$missing $f"
  done
  if [ -n "$missing" ]; then
    fail "artifacts: the build directory has the product and the Node SEA" "missing in /artifacts:$missing"
    checks_done; exit 1
  fi
  check "install: tools/install --from /artifacts" "$A/tools/install" --from "$A"
  install -d -o root -g root -m 0755 "$(dirname "$NODE_SEA_APP")"
  install -o root -g root -m 0755 "$NODE_SEA_DIR/opencode-pty-sea-app" "$NODE_SEA_APP"
  check "install: the SEA is the Node 26.4 SEA of the build (node:sea isSea, v26.4.x, sha256 as in sea-build.json)" sh -c '
    v=$(OPENCODE_PTY_APP_MODE=version "$1"); s=$(sha256sum "$1" | cut -c1-64); echo "$v sha256 $s; $(cat "$2")"
    printf "%s" "$v" | grep -Eq "\"version\":\"v26\.4\.[0-9]+\",\"isSea\":true" && grep -q "\"sha256\":\"$s\"" "$2"' \
    - "$NODE_SEA_APP" "$NODE_SEA_DIR/sea-build.json"
  check "supervisor socket starts" systemctl start opencode-pty-supervisor.socket
  install -d -o byk -g byk -m 0755 "$WORK"
}

# The pinned Bun (client/node/bun/install-bun, staged into the build by
# node.bun-stage), installed root-owned beside the SEA: an application run as
# "$BUN_APP FILE" is Bun as the MainPID.
BUN_APP=/usr/local/lib/opencode-node-test/bun
BUN_VERSION=1.4.5
bun_install() {
  install -d -o root -g root -m 0755 "$(dirname "$BUN_APP")"
  check "install: Bun $BUN_VERSION from the build (node.bun-stage)" sh -c '
    install -o root -g root -m 0755 "$1" "$2" && v=$("$2" --version) && echo "bun $v" && [ "$v" = "$3" ]' \
    - "$A/bun/bun" "$BUN_APP" "$BUN_VERSION"
}

# runtime_install RUNTIME: the runtime a suite's application runs on as the
# MainPID (issue #31), chosen by the suite's --runtime=node|bun argument.
# Sets APP_RUNTIME (the interpreter of ExecStart: Debian's /usr/bin/node, or
# the pinned Bun from bun_install) and RUNTIME_SFX (appended to the names of
# the files a suite leaves in /results: empty for node, so those stay as they
# were; "-bun" for bun). Any other name fails the suite.
runtime_install() {
  case "$1" in
    node) APP_RUNTIME=/usr/bin/node RUNTIME_SFX= ;;
    bun) bun_install; APP_RUNTIME=$BUN_APP RUNTIME_SFX=-bun ;;
    *) fail "runtime: --runtime=node|bun" "unknown runtime '$1'"; checks_done; exit 1 ;;
  esac
}

# app_start EXECSTART [ENV=VALUE...]: writes that drop-in and starts
# opencode-v2.service with EXECSTART as its MainPID; returns once systemd
# started it (125 if it could not). app_wait_end ends what it began; a suite
# that restarts the application while it runs (detach.sh) uses the two apart.
app_start() {
  exe=$1; shift
  mkdir -p "$DROPIN_DIR"
  {
    echo "[Service]"
    echo "ExecCondition="
    echo "ExecStart="
    echo "ExecStart=$exe"
    echo "Restart=no"
    for kv in "$@"; do echo "Environment=\"$kv\""; done
  } > "$DROPIN_DIR/50-node-test.conf"
  systemctl daemon-reload
  systemctl reset-failed "$APP_SERVICE" 2>/dev/null
  systemctl start "$APP_SERVICE" || { echo "app_start: start failed"; return 125; }
}

# app_wait_end TIMEOUT: waits until opencode-v2.service is inactive or failed
# (a hang guard: after TIMEOUT seconds it is stopped and 124 returned), removes
# the drop-in and returns the last MainPID's exit status.
app_wait_end() {
  n=$(($1 * 10))
  while [ "$n" -gt 0 ]; do
    st=$(systemctl show -P ActiveState "$APP_SERVICE")
    case "$st" in inactive|failed) break ;; esac
    sleep 0.1; n=$((n - 1))
  done
  if [ "$n" -le 0 ]; then
    echo "app_wait_end: still $st after ${1}s; stopping it"
    systemctl stop "$APP_SERVICE"
    rm -f "$DROPIN_DIR/50-node-test.conf"; systemctl daemon-reload
    return 124
  fi
  rc=$(systemctl show -P ExecMainStatus "$APP_SERVICE")
  rm -f "$DROPIN_DIR/50-node-test.conf"
  systemctl daemon-reload
  return "$rc"
}

# app_run TIMEOUT EXECSTART [ENV=VALUE...]: runs EXECSTART as opencode-v2.service
# until it exits; returns its exit status; its stdout/stderr are in the journal.
app_run() {
  t=$1; shift
  app_start "$@" || return $?
  app_wait_end "$t"
}

# app_checks JSONL WHAT RC LOG: one check per line the application wrote
# ({"ok", "name", "evidence"} as JSON), then "app: the WHAT application exited
# 0" from its exit status RC (LOG names where its output went). Each name
# starts with $CHECK_PREFIX (empty unless a suite numbers its runs).
app_checks() {
  python3 - "$1" > /tmp/app-checks.tsv <<'PY'
import json, sys
for line in open(sys.argv[1]):
    c = json.loads(line)
    print('%s\t%s\t%s' % ('PASS' if c['ok'] else 'FAIL', c['name'], json.dumps(c['evidence'])[:600].replace('\t', ' ')))
PY
  while IFS="$(printf '\t')" read -r res name ev; do
    if [ "$res" = PASS ]; then pass "${CHECK_PREFIX:-}app: $name" "$ev"; else fail "${CHECK_PREFIX:-}app: $name" "$ev"; fi
  done < /tmp/app-checks.tsv
  if [ "$3" -eq 0 ]; then pass "${CHECK_PREFIX:-}app: the $2 application exited 0" "$(wc -l < "$1") checks"
  else fail "${CHECK_PREFIX:-}app: the $2 application exited 0" "exit $3; see $4"; fi
}

. /vm-tests/lib/units.sh
