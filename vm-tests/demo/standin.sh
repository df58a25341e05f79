# vm-tests/demo/standin.sh: installs the application stand-in (relay-app.js
# on the rootfs's Node, through the Node module) the way an application is
# installed: root-owned files, started by the reference unit's ExecStart
# /usr/local/bin/opencode-v2. Sourced by the demo and the acceptance suite.
#
#   standin_install MODULE_DIR   (MODULE_DIR holds client/node's index.js, package.json and lib/)
#   standin_no_yama_dropin       the container-only runtime drop-in (see below)
#   standin_remove_dropin
STANDIN_DIR=/usr/local/lib/opencode-v2-standin
STANDIN_RELAY=/home/byk/.opencode-v2/relay.sock
STANDIN_DROPIN=/run/systemd/system/opencode-v2.service.d/50-no-yama-test-only.conf

standin_install() {
  install -d -o root -g root -m 0755 "$STANDIN_DIR" "$STANDIN_DIR/client" "$STANDIN_DIR/client/lib" /usr/local/bin || return 1
  install -o root -g root -m 0644 /vm-tests/demo/relay-app.js "$STANDIN_DIR/relay-app.js" || return 1
  install -o root -g root -m 0644 "$1/index.js" "$1/package.json" "$STANDIN_DIR/client/" || return 1
  install -o root -g root -m 0644 "$1"/lib/*.js "$STANDIN_DIR/client/lib/" || return 1
  printf '#!/bin/sh\n# opencode v2 stand-in (vm-tests/demo/relay-app.js) on the Node module.\nOPENCODE_PTY_MODULE=%s/client/index.js exec /usr/bin/node %s/relay-app.js\n' \
    "$STANDIN_DIR" "$STANDIN_DIR" > /usr/local/bin/opencode-v2.new || return 1
  chown root:root /usr/local/bin/opencode-v2.new
  chmod 0755 /usr/local/bin/opencode-v2.new
  mv -f /usr/local/bin/opencode-v2.new /usr/local/bin/opencode-v2
}

# TEST ONLY, containers only: the host kernel has no Yama, so the readiness
# verifier refuses the host by design and systemd skips the gated unit. This
# runtime drop-in (in /run, gone at the next boot; the unit file in /etc is
# untouched) resets ExecCondition. The VM run of the acceptance suite starts
# the real gated unit instead.
standin_no_yama_dropin() {
  mkdir -p "$(dirname "$STANDIN_DROPIN")"
  cat > "$STANDIN_DROPIN" <<'EOF'
# TEST ONLY (vm-tests, runtime): no Yama in this container's kernel, so the
# readiness verifier refuses the host by design. The VM run proves the gate.
[Service]
ExecCondition=
EOF
  systemctl daemon-reload
}
standin_remove_dropin() {
  rm -f "$STANDIN_DROPIN"
  rmdir "$(dirname "$STANDIN_DROPIN")" 2>/dev/null
  systemctl daemon-reload
}
