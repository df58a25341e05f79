// Types of the opencode-pty Node client (index.js). See README.md.

export interface IDisposable {
  dispose(): void;
}

export interface SpawnOptions {
  /** Working directory of the command; opened by the module and passed as a
   *  descriptor. Default: process.cwd(). */
  cwd?: string;
  /** Window size, fixed for the life of the PTY. 1..1000, default 80x24. */
  cols?: number;
  rows?: number;
  /** Absent, {} or process.env itself (node-pty's default): the command's
   *  environment is always the launcher's fixed allowlist, never this
   *  process's variables. Any other object throws PtyError "env_fixed". */
  env?: NodeJS.ProcessEnv | Record<string, never>;
  /** node-pty's terminal type: only "xterm-256color", the TERM the launcher
   *  sets; anything else throws PtyError "env_fixed". */
  name?: 'xterm-256color';
  /** Only false: XON/XOFF are not intercepted (true throws "not_supported"). */
  handleFlowControl?: false;
  /** Windows-only node-pty options: accepted and ignored, as node-pty does on Linux. */
  useConpty?: boolean;
  useConptyDll?: boolean;
  conptyInheritCursor?: boolean;
  /** "utf8" (default): onData gets strings; null: onData gets Buffers. */
  encoding?: 'utf8' | 'utf-8' | null;
  /** Tests only. Default /run/opencode-pty/supervisor.sock. */
  socketPath?: string;
  /** Tests only. Default /usr/local/libexec/opencode-pty-client. */
  helperPath?: string;
}

/** The `started` envelope (docs/PROTOCOL.md section 4). Unknown keys are kept. */
export interface StartedEvent {
  type: 'started';
  session: string;
  unit: string;
  invocation: string;
  revision: string;
  source: string;
  [key: string]: string | number | boolean | null;
}

export interface NoticeEvent {
  type: 'notice';
  code: string;
  [key: string]: string | number | boolean | null;
}

export interface ExitEvent {
  /** Exit status of the command (128+n when a signal n killed it under
   *  script), or null when the session ended otherwise. */
  exitCode: number | null;
  /** Signal name ("KILL") when the unit's main process itself was killed. */
  signal: string | null;
  /** systemd's Result of the unit ("success", "exit-code", ...), if sent. */
  result: string | null;
  /** Set when the session ended without an exit envelope. */
  error: PtyError | null;
}

export type PtyState = 'connecting' | 'handshake' | 'starting' | 'running' | 'exited';

export interface IPty {
  /** Always undefined: the command runs in a systemd unit, not as a child. */
  readonly pid: undefined;
  /** The command (argv[0]) as passed to spawn. */
  readonly process: string;
  readonly cols: number;
  readonly rows: number;
  /** Always false: XON/XOFF written by the application are sent as input. */
  readonly handleFlowControl: false;
  /** From the `started` envelope; null before it. */
  readonly unit: string | null;
  readonly session: string | null;
  readonly invocation: string | null;
  readonly revision: string | null;
  readonly source: string | null;
  readonly state: PtyState;
  /** Output bytes held for the application (no data listener, or paused;
   *  after onExit without a data listener, the output nobody read yet). */
  readonly bufferedBytes: number;

  /** A listener's exception is rethrown on the next tick (uncaughtException);
   *  the module, the other listeners and onExit are not affected. */
  onData(listener: (data: string | Buffer) => void): IDisposable;
  /** Once the session ended; with a data listener registered, after all held
   *  output reached it (paused: after resume() or at close()); with none, at
   *  once (the output stays held for a later listener). */
  onExit(listener: (event: ExitEvent) => void): IDisposable;
  onError(listener: (error: PtyError) => void): IDisposable;
  onStarted(listener: (event: StartedEvent) => void): IDisposable;
  onNotice(listener: (event: NoticeEvent) => void): IDisposable;
  onDrain(listener: () => void): IDisposable;

  /** Valid UTF-8 only (strings with lone surrogates and invalid bytes throw
   *  "bad_utf8"); at most 1 MiB per call; a Uint8Array is copied at the call;
   *  false when unsent input is above 64 KiB (wait for onDrain); throws
   *  "input_queue_full" above 1 MiB. After the session ended (terminal
   *  envelope read, failure, or a failed socket write) nothing is sent and it
   *  returns true; kill/stop/end then do nothing either. */
  write(data: string | Uint8Array): boolean;
  /** Signal name from the allowlist (HUP INT QUIT KILL USR1 USR2 TERM CONT STOP
   *  TSTP WINCH, with or without "SIG"); default "SIGHUP". */
  kill(signal?: string): void;
  /** Ask the supervisor to stop the unit (SIGTERM, SIGKILL after 5 s). */
  stop(): void;
  /** End of input: the command reads EOF. */
  end(): void;
  pause(): void;
  resume(): void;
  /** New window size, integers 1..1000 (else PtyError "bad_size"). Before
   *  `started` it is queued (the last size wins) and sent once the unit runs;
   *  after the session ended it throws PtyError "closed". */
  resize(cols: number, rows: number): void;
  /** Close the connection now; the supervisor stops the unit. Held output is
   *  discarded; a pending onExit fires (error "closed", or the session's own
   *  ending if it had already ended). */
  close(): void;
  /** Does nothing (node-pty: Windows only). */
  clear(): void;
  destroy(): void;
  /** Resolves once `pattern` matches the output decoded since the call
   *  (within the last `maxBytes` characters; held output is not searched and
   *  none is taken from data listeners); rejects "pattern_timeout" or
   *  "pattern_not_found" (session ended). */
  waitForOutput(pattern: RegExp, options?: { timeoutMs?: number; maxBytes?: number }): Promise<RegExpExecArray>;
}

export class PtyError extends Error {
  readonly code: string;
  readonly fromSupervisor?: boolean;
  readonly helperStatus?: number | null;
  readonly helperSignal?: string | null;
  readonly helperReason?: string;
  readonly helperStderr?: string;
}

export function spawn(file: string, args?: string[], options?: SpawnOptions): IPty;

export const limits: Readonly<Record<string, number>>;
export const SIGNALS: Readonly<Record<string, number>>;
export const HELPER_STATUS: Readonly<Record<number, string>>;
export const DEFAULT_SOCKET_PATH: string;
export const DEFAULT_HELPER_PATH: string;

export const protocol: {
  readonly FrameType: Readonly<{
    START: 1; INPUT: 2; SIGNAL: 3; STOP: 4; EOF: 5; OUTPUT: 0x81; EVENT: 0x82;
  }>;
  FrameDecoder: new (direction: 'fromClient' | 'fromSupervisor') => {
    readonly error: string | null;
    readonly idle: boolean;
    /** Returning true from onFrame stops decoding after that frame; the
     *  undecoded remainder of the chunk is then in `rest`. */
    push(chunk: Uint8Array, onFrame: (type: number, payload: Buffer) => boolean | void): string | null;
    readonly rest: Buffer | null;
  };
  encodeFrame(type: number, payload?: Uint8Array): Buffer;
  parseEnvelope(bytes: Uint8Array): Record<string, string | number | boolean | null> & { type: string };
  chunkUtf8(bytes: Uint8Array, max?: number): Buffer[];
  isValidUtf8(bytes: Uint8Array): boolean;
};
