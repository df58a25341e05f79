# vm-tests/gate/marker-cases.sh: every readiness-marker case of the gate,
# on real files, as root. Sourced (bash) by vm-tests/gate/gate.sh inside the
# harness (the real installed paths) and by tests/gate/marker-cases-host.sh
# on the host (a copy of the verifier whose three path lines point into a
# private root). Needs pass/fail from a check library.
#
# The caller sets:
#   GATE_LIBEXEC     directory holding the installed binaries and the verifier
#   GATE_MARKER_DIR  directory of the marker
#   GATE_PRISTINE    directory with pristine copies of the three binaries
#   GATE_APP_UID     uid of the application user (for "owned by the app user")
#   GATE_EXPECT_GOOD "ready"  (Yama in force: a good marker grants readiness)
#                    "no-yama" (no Yama in the kernel: a good marker must be
#                               denied with exactly the Yama reason)
#   GATE_YAMA_FILE   optional: a writable ptrace_scope file; when set, the
#                    Yama cases (weaker values) run too and the file is left at 2
#   GATE_KERNEL_FILE optional: a writable osrelease file; when set, the
#                    kernel-feature cases (no SO_PEERPIDFD before Linux 6.5)
#                    run too and the file is left at a 6.12 release
# and calls run_marker_cases.

GATE_TAG=opencode-pty-verify-readiness
GATE_BINS="opencode-pty-supervisor opencode-pty-launcher opencode-pty-client"

gate_verifier() { printf '%s' "$GATE_LIBEXEC/opencode-pty-verify-readiness"; }
gate_marker() { printf '%s' "$GATE_MARKER_DIR/pty-supervisor-verified"; }

# The revision line embedded in the verifier under test (read once).
gate_revision() {
  if [ -z "${GATE_REV:-}" ]; then
    GATE_REV=$(sed -n "s/^EXPECTED_REVISION='\(revision=[^']*\)'\$/\1/p" "$(gate_verifier)")
  fi
  printf '%s' "$GATE_REV"
}

# The good marker content for the installed binaries, on stdout. Hashed
# once, by the first gate_reset (which has just installed them): every
# gate_reset installs the same pristine bytes at the same paths, and the
# verifier under test hashes them itself in every case.
gate_good_marker() {
  if [ -z "${GATE_GOOD_MARKER:-}" ]; then
    GATE_GOOD_MARKER=$(printf '%s\n' "$(gate_revision)"
      sha256sum -- "$GATE_LIBEXEC/opencode-pty-supervisor" \
        "$GATE_LIBEXEC/opencode-pty-launcher" "$GATE_LIBEXEC/opencode-pty-client") || return 1
  fi
  printf '%s\n' "$GATE_GOOD_MARKER"
}

# gate_put_marker: write stdin as the marker, by rename; root:root 0644
# because root writes it under umask 022 (set by run_marker_cases).
gate_put_marker() {
  local m; m=$(gate_marker)
  cat > "$m.new" && mv -f -T "$m.new" "$m"
}

# gate_reset: the good state. Binaries copied again from the local pristine
# copies, everything root-owned with its mode, then a fresh good marker
# (written last, so nothing installed is newer than it). Few processes: the
# VM runs this ~150 times under software emulation.
gate_reset() {
  local m mode files
  m=$(gate_marker)
  files=("$GATE_LIBEXEC"/opencode-pty-{supervisor,launcher,client})
  rm -rf "$m" "$m.new" "$GATE_MARKER_DIR/good-copy" "$GATE_LIBEXEC/client.real" "${files[@]}"
  cp -t "$GATE_LIBEXEC" "$GATE_LOCAL_PRISTINE"/opencode-pty-{supervisor,launcher,client}
  chown 0:0 "${GATE_DIRS[@]}" "${files[@]}" "$(gate_verifier)"
  for mode in "${!GATE_DIRS_BY_MODE[@]}"; do
    if [ "$mode" = 755 ]; then continue; fi
    # shellcheck disable=SC2086
    chmod "$mode" ${GATE_DIRS_BY_MODE[$mode]}
  done
  # shellcheck disable=SC2086
  chmod 0755 ${GATE_DIRS_BY_MODE[755]:-} "${files[@]}" "$(gate_verifier)"
  if [ -n "${GATE_YAMA_FILE:-}" ]; then echo 2 > "$GATE_YAMA_FILE"; fi
  if [ -n "${GATE_KERNEL_FILE:-}" ]; then echo 6.12.57+deb13-amd64 > "$GATE_KERNEL_FILE"; fi
  gate_good_marker > "$m.new" && mv -f -T "$m.new" "$m"
}

# gate_run: run the verifier under dash; sets GATE_RC, GATE_OUT and GATE_ERR.
gate_run() {
  GATE_OUT=$(dash "$(gate_verifier)" 2> "$GATE_ERRFILE")
  GATE_RC=$?
  GATE_ERR=$(< "$GATE_ERRFILE")
}

expect_ready() { # NAME
  gate_run
  if [ "$GATE_RC" -eq 0 ] && [ -z "$GATE_ERR" ] && [ -z "$GATE_OUT" ]; then
    pass "$1" "ready (exit 0, no output)"
  else
    fail "$1" "expected ready, got exit $GATE_RC: $GATE_ERR"
  fi
}

# expect_deny NAME FIXED-TEXT: exit 1, exactly one stderr line, that line is
# "<tag>: not ready: ..." and contains FIXED-TEXT; nothing on stdout.
expect_deny() {
  local name=$1 want=$2
  gate_run
  if [ "$GATE_RC" -ne 1 ]; then
    fail "$name" "expected exit 1 (skip), got $GATE_RC: $GATE_ERR"
  elif [ -n "$GATE_OUT" ]; then
    fail "$name" "denial wrote to stdout: $GATE_OUT"
  elif [ -z "$GATE_ERR" ] || [[ $GATE_ERR == *$'\n'* ]]; then
    fail "$name" "expected one line on stderr, got: $GATE_ERR"
  else
    case $GATE_ERR in
      "$GATE_TAG: not ready: "*"$want"*) pass "$name" "$GATE_ERR" ;;
      *) fail "$name" "wrong reason (want '$want'): $GATE_ERR" ;;
    esac
  fi
}

# The good marker's verdict depends on the kernel; see GATE_EXPECT_GOOD.
expect_good() { # NAME
  case $GATE_EXPECT_GOOD in
    ready) expect_ready "$1" ;;
    no-yama) expect_deny "$1 (no Yama here: denied for Yama only)" "Yama is not active in this kernel" ;;
    *) fail "$1" "GATE_EXPECT_GOOD is '$GATE_EXPECT_GOOD'" ;;
  esac
}

# marker_edit SED-SCRIPT: rewrite the marker's content in place, keeping it
# root:root 0644 (and fresh).
marker_edit() {
  local m; m=$(gate_marker)
  sed "$1" "$m" | gate_put_marker
}

other_hex() { # LENGTH: a lowercase hex string of that length, not the real one
  printf '%s' "$(printf 'another %s' "$1" | sha256sum | cut -c1-64)$(printf 'x' | sha256sum | cut -c1-64)" | cut -c1-"$1"
}

run_marker_cases() {
  local m rev git src b i d mode
  m=$(gate_marker)

  # Directories the cases change, grouped by the modes gate_reset restores.
  declare -gA GATE_DIRS_BY_MODE=()
  GATE_DIRS=("$GATE_LIBEXEC" "$(dirname "$GATE_LIBEXEC")" "$(dirname "$(dirname "$GATE_LIBEXEC")")" "$GATE_MARKER_DIR")
  for d in "${GATE_DIRS[@]}"; do
    mode=$(stat -c %a "$d")
    GATE_DIRS_BY_MODE[$mode]="${GATE_DIRS_BY_MODE[$mode]:-} $d"
  done
  umask 022
  # Local copies of the pristine binaries and a scratch file for stderr.
  GATE_LOCAL_PRISTINE=$(mktemp -d /var/tmp/gate-pristine.XXXXXX)
  cp "$GATE_PRISTINE/opencode-pty-supervisor" "$GATE_PRISTINE/opencode-pty-launcher" \
    "$GATE_PRISTINE/opencode-pty-client" "$GATE_LOCAL_PRISTINE/"
  GATE_ERRFILE=$GATE_LOCAL_PRISTINE/stderr
  GATE_REV= GATE_GOOD_MARKER=

  rev=$(gate_revision)
  case $rev in
    revision=opencode-v2-pilot:git:*\;pty-source:sha256:*) pass "gate: the verifier embeds a revision line" "$rev" ;;
    *) fail "gate: the verifier embeds a revision line" "found '$rev'"; return ;;
  esac
  git=${rev#revision=opencode-v2-pilot:git:}; git=${git%%;*}
  src=${rev#*;pty-source:sha256:}

  gate_reset; expect_good "marker: good marker"

  # -- the marker file itself --
  gate_reset; rm -f "$m"
  expect_deny "marker: absent" "is absent"
  gate_reset; cp -p "$m" "$GATE_MARKER_DIR/good-copy"; ln -sfn good-copy "$m"
  expect_deny "marker: symlink to a good copy" "is a symlink"
  gate_reset; : > "$m"
  expect_deny "marker: empty" "is empty"
  gate_reset; rm -f "$m"; mkdir "$m"
  expect_deny "marker: a directory" "is not a regular file"
  gate_reset; rm -f "$m"; mkfifo -m 0644 "$m"
  expect_deny "marker: a FIFO" "is not a regular file"
  gate_reset; chmod 0664 "$m"
  expect_deny "marker: writable by group" "writable by group or other (mode 0664)"
  gate_reset; chmod 0646 "$m"
  expect_deny "marker: writable by other" "writable by group or other (mode 0646)"
  gate_reset; chown "$GATE_APP_UID" "$m"
  expect_deny "marker: owned by the application user" "owned by $GATE_APP_UID:0, not root:root"
  gate_reset; chown "0:$GATE_APP_UID" "$m"
  expect_deny "marker: group is not root" "owned by 0:$GATE_APP_UID, not root:root"
  gate_reset; chmod 0600 "$m"
  expect_deny "marker: wrong mode 0600" "has mode 0600, not 0644"
  gate_reset; chmod 0755 "$m"
  expect_deny "marker: wrong mode 0755" "has mode 0755, not 0644"
  gate_reset; chmod 4644 "$m"
  expect_deny "marker: wrong mode 4644 (setuid bit)" "has mode 4644, not 0644"
  gate_reset; head -c 5000 /dev/zero | tr '\0' 'a' | gate_put_marker
  expect_deny "marker: larger than the bound" "larger than 4096 bytes"

  # -- the marker's lines --
  gate_reset; marker_edit '4d'
  expect_deny "marker: missing line (3 lines)" "has 3 lines, not 4 (missing line)"
  gate_reset; marker_edit '1d'
  expect_deny "marker: missing revision line" "has 3 lines, not 4 (missing line)"
  gate_reset; marker_edit '$a\
extra'
  expect_deny "marker: extra trailing line" "has 5 lines, not 4 (extra line)"
  gate_reset; marker_edit '$a\
'
  expect_deny "marker: extra empty trailing line" "has 5 lines, not 4 (extra line)"
  gate_reset; marker_edit '$p'
  expect_deny "marker: duplicate last line (5 lines)" "duplicate line"
  gate_reset; marker_edit '1p'
  expect_deny "marker: duplicate revision line (5 lines)" "duplicate line"
  gate_reset; marker_edit '3{x;p;x;d};2h'
  expect_deny "marker: duplicate line in place of another (4 lines)" "duplicate line"
  gate_reset; marker_edit '2{h;d};3G'
  expect_deny "marker: lines 2 and 3 swapped" "out of order"
  gate_reset; marker_edit '3{h;d};4G'
  expect_deny "marker: lines 3 and 4 swapped" "out of order"
  gate_reset; marker_edit '1{h;d};2G'
  expect_deny "marker: revision line not first" "line 1 is not the revision line"
  gate_reset; marker_edit 's/$/\r/'
  expect_deny "marker: CRLF line ends" "CR characters"
  gate_reset; marker_edit '2s/$/\r/'
  expect_deny "marker: one CR in line 2" "CR characters"
  gate_reset; gate_good_marker | head -c -1 | gate_put_marker
  expect_deny "marker: no final newline" "does not end with a newline"
  gate_reset; { printf '%s\n' "$rev" | tr -d '\n'; printf '\0\n'; gate_good_marker | sed 1d; } | gate_put_marker
  expect_deny "marker: a NUL byte after the revision line" "marker content differs"
  gate_reset; marker_edit '1s/^revision=/revision= /'
  expect_deny "marker: line 1 not a revision line" "line 1 is not the revision line"
  gate_reset; marker_edit "1s/:git:$git;/:git:$(other_hex 40);/"
  expect_deny "marker: revision with other git hex" "names git revision $(other_hex 40)"
  gate_reset; marker_edit "1s/:git:$git;/:git:$(printf '%s' "$git" | tr 'a-f' 'A-F');/"
  expect_deny "marker: revision hex in upper case" "not a well-formed revision line"
  gate_reset; marker_edit "1s/:git:$git;/:git:${git}0;/"
  expect_deny "marker: revision hex 41 digits" "not a well-formed revision line"
  gate_reset; marker_edit "1s/sha256:$src\$/sha256:$(other_hex 64)/"
  expect_deny "marker: right git hex, other source-manifest hash" "names source-manifest hash $(other_hex 64)"
  gate_reset; marker_edit '1s/$/ /'
  expect_deny "marker: trailing space after the revision" "not a well-formed revision line"
  i=2
  for b in $GATE_BINS; do
    gate_reset; marker_edit "${i}s/^[0-9a-f]\{64\}/$(other_hex 64)/"
    expect_deny "marker: wrong hash of $b" "marker hash of $GATE_LIBEXEC/$b does not match"
    i=$((i + 1))
  done
  gate_reset; marker_edit '2s/  / */'
  expect_deny "marker: binary-mode sha256sum record" "line 2 is not the sha256sum record"
  gate_reset; marker_edit "2s#  /#  //#"
  expect_deny "marker: record names another spelling of the path" "line 2 is not the sha256sum record"

  # -- stale: an installed file changed after the marker was written --
  for b in $GATE_BINS opencode-pty-verify-readiness; do
    gate_reset; sleep 0.05
    cp -p "$GATE_LIBEXEC/$b" "$GATE_LIBEXEC/.$b.new" && mv -f -T "$GATE_LIBEXEC/.$b.new" "$GATE_LIBEXEC/$b"
    expect_deny "stale: $b replaced by an identical copy after the marker" "marker is stale: $GATE_LIBEXEC/$b changed after the marker was written"
  done
  gate_reset; sleep 0.05; printf 'x' >> "$GATE_LIBEXEC/opencode-pty-launcher"
  expect_deny "stale: launcher content changed after the marker" "marker is stale: $GATE_LIBEXEC/opencode-pty-launcher"
  gate_reset; sleep 0.05; chmod 0755 "$GATE_LIBEXEC/opencode-pty-client"
  expect_deny "stale: client chmod'ed after the marker" "marker is stale: $GATE_LIBEXEC/opencode-pty-client"

  # -- installed binaries --
  for b in $GATE_BINS opencode-pty-verify-readiness; do
    gate_reset; chmod 0775 "$GATE_LIBEXEC/$b"
    expect_deny "binary: $b writable by group" "$GATE_LIBEXEC/$b is writable by group or other (mode 0775)"
    gate_reset; chmod 0757 "$GATE_LIBEXEC/$b"
    expect_deny "binary: $b writable by other" "$GATE_LIBEXEC/$b is writable by group or other (mode 0757)"
    gate_reset; chown "$GATE_APP_UID" "$GATE_LIBEXEC/$b"
    expect_deny "binary: $b owned by the application user" "$GATE_LIBEXEC/$b is owned by $GATE_APP_UID:0, not root:root"
  done
  gate_reset; chmod 0750 "$GATE_LIBEXEC/opencode-pty-supervisor"
  expect_deny "binary: supervisor mode 0750" "has mode 0750, not 0755"
  gate_reset; chmod 4755 "$GATE_LIBEXEC/opencode-pty-client"
  expect_deny "binary: client setuid" "has mode 4755, not 0755"
  gate_reset; chown 0:"$GATE_APP_UID" "$GATE_LIBEXEC/opencode-pty-launcher"
  expect_deny "binary: launcher group is the application's" "is owned by 0:$GATE_APP_UID, not root:root"
  gate_reset; rm -f "$GATE_LIBEXEC/opencode-pty-client"
  expect_deny "binary: client missing" "$GATE_LIBEXEC/opencode-pty-client is missing"
  gate_reset; mv "$GATE_LIBEXEC/opencode-pty-client" "$GATE_LIBEXEC/client.real"; ln -s client.real "$GATE_LIBEXEC/opencode-pty-client"
  expect_deny "binary: client is a symlink" "$GATE_LIBEXEC/opencode-pty-client is a symlink"

  # -- the directories: libexec and its parents, the marker's directory --
  local parent grandparent
  parent=$(dirname "$GATE_LIBEXEC"); grandparent=$(dirname "$parent")
  gate_reset; chmod 0775 "$GATE_LIBEXEC"
  expect_deny "dir: $GATE_LIBEXEC writable by group" "$GATE_LIBEXEC is writable by group or other"
  gate_reset; chmod 0757 "$GATE_LIBEXEC"
  expect_deny "dir: $GATE_LIBEXEC writable by other" "$GATE_LIBEXEC is writable by group or other"
  gate_reset; chmod 1777 "$GATE_LIBEXEC"
  expect_deny "dir: $GATE_LIBEXEC sticky and world-writable" "$GATE_LIBEXEC is writable by group or other"
  gate_reset; chown "$GATE_APP_UID" "$GATE_LIBEXEC"
  expect_deny "dir: $GATE_LIBEXEC owned by the application user" "$GATE_LIBEXEC is owned by uid $GATE_APP_UID, not root"
  gate_reset; chmod 0775 "$parent"
  expect_deny "dir: parent $parent writable by group" "$parent is writable by group or other"
  gate_reset; chmod 0757 "$parent"
  expect_deny "dir: parent $parent writable by other" "$parent is writable by group or other"
  gate_reset; chown "$GATE_APP_UID" "$parent"
  expect_deny "dir: parent $parent owned by the application user" "$parent is owned by uid $GATE_APP_UID, not root"
  gate_reset; chmod 0775 "$grandparent"
  expect_deny "dir: grandparent $grandparent writable by group" "$grandparent is writable by group or other"
  gate_reset; chmod 0757 "$grandparent"
  expect_deny "dir: grandparent $grandparent writable by other" "$grandparent is writable by group or other"
  gate_reset; chmod 0775 "$GATE_MARKER_DIR"
  expect_deny "dir: marker directory writable by group" "$GATE_MARKER_DIR is writable by group or other"
  gate_reset; chown "$GATE_APP_UID" "$GATE_MARKER_DIR"
  expect_deny "dir: marker directory owned by the application user" "$GATE_MARKER_DIR is owned by uid $GATE_APP_UID, not root"

  # -- Yama (only where the test controls the value) --
  if [ -n "${GATE_YAMA_FILE:-}" ]; then
    for i in 0 1; do
      gate_reset; echo "$i" > "$GATE_YAMA_FILE"
      expect_deny "yama: ptrace_scope $i is weaker than 2" "Yama ptrace_scope is $i, need 2 or more"
    done
    gate_reset; expect_ready "yama: ptrace_scope 2 with a good marker"
  fi

  # -- the kernel feature SO_PEERPIDFD (only where the test controls the release) --
  if [ -n "${GATE_KERNEL_FILE:-}" ]; then
    local rel
    for rel in 6.1.0-28-amd64 6.4.16 5.19.0 4.19.0-27-amd64; do
      gate_reset; echo "$rel" > "$GATE_KERNEL_FILE"
      expect_deny "kernel: $rel has no SO_PEERPIDFD" "kernel $rel has no SO_PEERPIDFD, need Linux 6.5 or later"
    done
    for rel in 6.5.0 6.18.44-fc-v1252 7.0.0 10.2; do
      gate_reset; echo "$rel" > "$GATE_KERNEL_FILE"
      expect_good "kernel: $rel has SO_PEERPIDFD"
    done
    for rel in x.y 6 '' -6.5; do
      gate_reset; echo "$rel" > "$GATE_KERNEL_FILE"
      expect_deny "kernel: malformed release '$rel'" "unexpected kernel release"
    done
    gate_reset; printf 6.1.0 > "$GATE_KERNEL_FILE"
    expect_deny "kernel: 6.1.0 without a newline is still read" "kernel 6.1.0 has no SO_PEERPIDFD"
  fi

  gate_reset
}

# gate_cleanup: remove the local copies (call after the last gate_reset/gate_run).
gate_cleanup() { rm -rf -- "$GATE_LOCAL_PRISTINE"; }
