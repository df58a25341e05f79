// Types of the node-pty drop-in entry (node-pty.js): node-pty 1.1's spawn()
// and IPty (its typings/node-pty.d.ts, member for member), plus what only this
// module has (onError, ptsName, droppedOutput, session). README.md, "Two
// entries", says where the behaviour differs from node-pty and from index.js.

import type { IPty as StrictPty, PtyError } from './index';

export { PtyError };

export interface IDisposable {
  dispose(): void;
}

export interface IEvent<T> {
  (listener: (e: T) => any): IDisposable;
}

export interface IBasePtyForkOptions {
  /** TERM of the command (node-pty's meaning); default: env.TERM, else "xterm". */
  name?: string;
  /** 1..1000; default 80 x 24. */
  cols?: number;
  rows?: number;
  /** Default process.cwd(). */
  cwd?: string;
  /** Default process.env. Overlaid on the launcher's fixed environment for the
   *  command only; the variables of this process's own systemd unit
   *  (INVOCATION_ID, NOTIFY_SOCKET, ...) are left out (docs/SECURITY.md). */
  env?: { [key: string]: string | undefined };
  /** Default "utf8"; null: onData gets Buffers. */
  encoding?: string | null;
  /** true: a write() of exactly flowControlPause / flowControlResume pauses /
   *  resumes the output instead of reaching the command. */
  handleFlowControl?: boolean;
  flowControlPause?: string;
  flowControlResume?: string;
  /** Tests only. Default /run/opencode-pty/supervisor.sock. */
  socketPath?: string;
  /** Tests only. Default /usr/local/libexec/opencode-pty-client. */
  helperPath?: string;
}

export interface IPtyForkOptions extends IBasePtyForkOptions {
  /** Not supported (the command runs as this process's user): spawn throws. */
  uid?: number;
  gid?: number;
}

export interface IWindowsPtyForkOptions extends IBasePtyForkOptions {
  /** Windows only: ignored. */
  useConpty?: boolean;
  useConptyDll?: boolean;
  conptyInheritCursor?: boolean;
}

export interface IPty {
  /** 0 until the command's pid is known (the supervisor's command_started
   *  notice), then the command's pid. */
  readonly pid: number;
  readonly cols: number;
  readonly rows: number;
  /** The command (argv[0]) as passed to spawn. */
  readonly process: string;
  handleFlowControl: boolean;
  readonly onData: IEvent<string>;
  /** Once. exitCode: the command's status; 128 + n with signal n when signal
   *  n killed it; 1 when the session ended without the command's report (the
   *  reason went to onError). signal: 0 unless a signal killed the command. */
  readonly onExit: IEvent<{ exitCode: number, signal?: number }>;
  /** Never throws: a bad size goes to onError; after the exit it does nothing. */
  resize(columns: number, rows: number): void;
  /** Does nothing (node-pty: Windows only). */
  clear(): void;
  /** Never throws: sent as UTF-8 (lone surrogates and bytes that are not UTF-8
   *  become U+FFFD); after the exit it does nothing; what cannot be sent goes
   *  to onError and is dropped. */
  write(data: string | Uint8Array): void;
  /** Default "SIGHUP"; to the command only. Never throws: a signal outside
   *  the supervisor's allowlist goes to onError. */
  kill(signal?: string): void;
  pause(): void;
  resume(): void;

  /** Failures of write/resize/kill and of the session itself. */
  readonly onError: IEvent<PtyError>;
  /** /dev/pts/N of the command's terminal, once its pid is known. */
  readonly ptsName: string | undefined;
  /** Output (bytes, or characters with an encoding) delivered to nobody: no
   *  data listener while more than the hold bound waited. */
  readonly droppedOutput: number;
  /** The strict entry's object of this PTY (stop(), notices, the unit). */
  readonly session: StrictPty;
}

export function spawn(file: string, args: string[], options?: IPtyForkOptions | IWindowsPtyForkOptions): IPty;

export const limits: Readonly<Record<string, number>>;
