// opencode's PTY adapter for Node (its packages/core/src/pty/pty.node.ts) as
// it would read pointed at this module: the same calls, only the package name
// changed. `run` type-checks it against node-pty's own IPty (the import of
// @lydell/node-pty below is types only) and compiles it for the opencode-shaped
// test on a real systemd (vm-tests/node/adapter-app.js).
import * as pty from "@opencode-pty/node/node-pty"
import type * as NodePty from "@lydell/node-pty"

// The shapes opencode's PTY service (packages/core/src/pty.ts) gives its adapters.
export type Disp = { dispose(): void }
export type Exit = { exitCode: number; signal?: number | string }
export type Opts = { name: string; cwd?: string; env?: Record<string, string> }
export type Proc = {
  pid: number
  onData(listener: (data: string) => void): Disp
  onExit(listener: (event: Exit) => void): Disp
  write(data: string): void
  resize(cols: number, rows: number): void
  kill(signal?: string): void
}

// The drop-in's IPty is node-pty's: an assignment the compiler checks.
function asNodePty(proc: pty.IPty): NodePty.IPty {
  return proc
}

export function spawn(file: string, args: string[], opts: Opts): Proc {
  const proc = asNodePty(pty.spawn(file, args, opts))
  return {
    pid: proc.pid,
    onData(listener) {
      return proc.onData(listener)
    },
    onExit(listener) {
      return proc.onExit(listener)
    },
    write(data) {
      proc.write(data)
    },
    resize(cols, rows) {
      proc.resize(cols, rows)
    },
    kill(signal) {
      proc.kill(signal)
    },
  }
}
