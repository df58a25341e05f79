'use strict';
// Handshake admission: at most limits.maxPendingHandshakes of this process's
// connections per supervisor socket between connect and their first answer
// (`started` of a spawn, `attached` of an attach, the end of a list()).

const { limits } = require('./limits.js');

// Handshake admission per supervisor socket: the supervisor refuses a
// connection while kMaxPendingHandshakes others are between accept and their
// START frame. This process is the only one allowed to connect, so it keeps
// its own sessions under that cap: a session holds a slot from connect until
// its `started` envelope (or its end), and spawns beyond the cap wait here in
// spawn order instead of being refused. LIST and ATTACH connections
// (lib/list.js, attach()) are authenticated and bounded by the same deadline,
// so they take a slot too, in the same line; any object with _admitted() can wait.
class HandshakeGate {
  constructor() {
    this.active = 0;
    this.waiting = [];
  }
  // True: admitted now. False: queued; pty._admitted() runs when a slot frees.
  enter(pty) {
    if (this.active < limits.maxPendingHandshakes) {
      this.active++;
      return true;
    }
    this.waiting.push(pty);
    return false;
  }
  leave() {
    this.active--;
    while (this.active < limits.maxPendingHandshakes && this.waiting.length > 0) {
      this.active++;
      this.waiting.shift()._admitted();
    }
  }
  cancel(pty) {
    const i = this.waiting.indexOf(pty);
    if (i >= 0) this.waiting.splice(i, 1);
  }
}
const gates = new Map();  // socket path -> HandshakeGate (one per supervisor)
function gateFor(socketPath) {
  let g = gates.get(socketPath);
  if (!g) {
    g = new HandshakeGate();
    gates.set(socketPath, g);
  }
  return g;
}


module.exports = { HandshakeGate, gateFor };
