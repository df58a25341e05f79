// Types of the opencode-pty Node client @opencode-pty/node (index.js). See README.md.

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
  /** Variables for the command only, overlaid on the launcher's fixed
   *  environment (a name given here replaces the fixed one). Names
   *  [A-Za-z_][A-Za-z0-9_]* of at most limits.maxEnvNameBytes, at most
   *  limits.maxEnvVars of them, each "NAME=VALUE" at most
   *  limits.maxEnvEntryBytes and all of them at most limits.maxEnvTotalBytes
   *  (else PtyError bad_env_name, env_too_many, env_too_long; a NUL: bad_env).
   *  Sent on this PTY's own connection, never in argv or the unit; the
   *  supervisor leaves out the variables of the application's own unit
   *  (INVOCATION_ID, NOTIFY_SOCKET, ...: docs/SECURITY.md). */
  extraEnv?: Record<string, string>;
  /** node-pty's terminal type: only "xterm-256color", the TERM the launcher
   *  sets; anything else throws PtyError "env_fixed". */
  name?: 'xterm-256color';
  /** Only false: XON/XOFF are not intercepted (true throws "not_supported"). */
  handleFlowControl?: false;
  /** Windows-only node-pty options: accepted and ignored, as node-pty does on Linux. */
  useConpty?: boolean;
  useConptyDll?: boolean;
  conptyInheritCursor?: boolean;
  /** Any Buffer encoding ("utf8", the default, "latin1", "base64", "hex",
   *  "utf16le", ...): onData gets strings, decoded by one StringDecoder over the
   *  whole output (a character or base64 group split between frames is
   *  delivered whole); null: onData gets Buffers. Other values throw TypeError.
   *  Input (write) is UTF-8 whatever this says. */
  encoding?: BufferEncoding | null;
  /** Tests only. Default /run/opencode-pty/supervisor.sock. */
  socketPath?: string;
  /** Tests only. Default /usr/local/libexec/opencode-pty-client. */
  helperPath?: string;
  /** A detachable session (docs/PROTOCOL.md section 10): it outlives this
   *  connection and this process for graceSeconds, keeps its last output in a
   *  ring, and can be found with list() and taken back with attach(). Absent:
   *  an ordinary session, which ends with its connection. */
  detachable?: DetachableOptions;
}

export interface DetachableOptions {
  /** How long the session waits for an attach once detached: an integer
   *  1..limits.maxDetachGraceSec (3600), else PtyError "bad_detach". */
  graceSeconds: number;
  /** The ring's size in bytes: an integer limits.minScrollbackBytes (65536)
   *  ..limits.maxScrollbackBytes (2097152), else PtyError "bad_detach";
   *  default limits.defaultScrollbackBytes (1048576). */
  scrollbackBytes?: number;
}

export interface AttachOptions {
  /** The cursor to replay from (docs/PROTOCOL.md section 10.2): a
   *  non-negative safe integer (else PtyError "bad_cursor"), usually the
   *  `cursor` a PTY of this session had last. Default 0: all the ring holds. */
  cursor?: number;
  /** As spawn's. */
  encoding?: BufferEncoding | null;
  /** Tests only. Default /run/opencode-pty/supervisor.sock. */
  socketPath?: string;
}

export interface ListOptions {
  /** Tests only. Default /run/opencode-pty/supervisor.sock. */
  socketPath?: string;
}

/** One detachable session, from a `session` envelope (docs/PROTOCOL.md 10.4). */
export interface SessionEntry {
  session: string;
  unit: string;
  state: 'attached' | 'detached';
  /** When `started` was sent: microseconds since the epoch. */
  started: number;
  /** Seconds. */
  grace: number;
  /** Bytes. */
  scrollback: number;
  /** The cursor range the ring holds: [first, next). first is also the
   *  number of bytes that fell out of it. */
  first: number;
  next: number;
  /** The command has ended; its exit is kept for the next attach. */
  exited: boolean;
  code: number | null;
  signal: string | null;
  pid: number | null;
}

/** From the `attached` envelope: what the replay covers. */
export interface ReplayInfo {
  /** The cursor of the first byte onData gets: max(asked, first). */
  readonly cursor: number;
  /** Bytes asked for that the ring no longer held (first - asked), else 0. */
  readonly dropped: number;
  /** Where the replay ends and live output begins. */
  readonly next: number;
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
  /** The command's exit code when it exited; null when a signal killed it
   *  (see signal) or the session ended without an exit envelope (see error).
   *  A command killed by a signal is never reported as 0. */
  exitCode: number | null;
  /** The name ("TERM", "SEGV", "KILL") of the signal that killed the command
   *  (its number as a string, "34", for a signal without a name), or null. A
   *  name, not node-pty's number (on('exit') passes the number). */
  signal: string | null;
  /** systemd's Result of the unit ("success", "exit-code", "signal", ...), if sent. */
  result: string | null;
  /** true: exitCode/signal are the command's own wait status, as its parent
   *  in the unit saw it. false: systemd's view of the unit (the command's
   *  parent was killed before it could report, e.g. the command ignored a
   *  STOP's TERM/HUP for more than 2 s), or no exit envelope (error set), or a
   *  supervisor older than issue 20. */
  exact: boolean;
  /** Set when the session ended without an exit envelope. */
  error: PtyError | null;
}

export type PtyState = 'connecting' | 'handshake' | 'starting' | 'running' | 'exited';

export interface IPty {
  /** The command's pid (it runs as this process's user, inside the unit),
   *  from the supervisor's command_started notice: undefined until then (not
   *  known at spawn, unlike node-pty), and undefined for good if the command
   *  never started. Never the pid of script or the launcher. */
  readonly pid: number | undefined;
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
  /** true when spawned with `detachable`, and for every attached PTY: closing
   *  the connection (close(), this process's exit) detaches the session
   *  instead of stopping it. */
  readonly detachable: boolean;
  /** The absolute cursor (docs/PROTOCOL.md section 10.2) of the next output
   *  byte onData will get: 0 at `started` (the `attached` cursor for an
   *  attached PTY) plus the OUTPUT bytes handed to data listeners so far,
   *  counted before decoding (a character split across frames counts its
   *  bytes as they arrive). Held output is not counted. null before
   *  started/attached. Counted for every PTY; only a detachable one can be
   *  attached from it. */
  readonly cursor: number | null;
  /** attach() only: the `attached` envelope's cursor, dropped and next; null
   *  for a spawned PTY. */
  readonly replay: ReplayInfo | null;

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

  /** node-pty's older EventEmitter form, for 'data' and 'exit' only (any
   *  other event throws TypeError). 'data' is the same as onData; 'exit' gets
   *  (exitCode, signal) with the signal as a number like node-pty's: 0 when
   *  no signal killed the command, else its number (15 for TERM). exitCode is null when a
   *  signal killed it (node-pty passes 0 there) or the session failed. */
  on(event: 'data', listener: (data: string | Buffer) => void): this;
  on(event: 'exit', listener: (exitCode: number | null, signal: number | undefined) => void): this;
  addListener(event: 'data', listener: (data: string | Buffer) => void): this;
  addListener(event: 'exit', listener: (exitCode: number | null, signal: number | undefined) => void): this;
  once(event: 'data', listener: (data: string | Buffer) => void): this;
  once(event: 'exit', listener: (exitCode: number | null, signal: number | undefined) => void): this;
  /** Removes the latest on()/once()/addListener() registration of listener. */
  removeListener(event: 'data' | 'exit', listener: (...args: any[]) => void): this;
  off(event: 'data' | 'exit', listener: (...args: any[]) => void): this;

  /** Valid UTF-8 only (strings with lone surrogates and invalid bytes throw
   *  "bad_utf8"); at most 1 MiB per call; a Uint8Array is copied at the call;
   *  false when unsent input is above 64 KiB (wait for onDrain); throws
   *  "input_queue_full" above 1 MiB. After the session ended (terminal
   *  envelope read, failure, or a failed socket write) nothing is sent and it
   *  returns true; kill/stop/end then do nothing either. */
  write(data: string | Uint8Array): boolean;
  /** Signal name from the allowlist (HUP INT QUIT KILL USR1 USR2 TERM CONT STOP
   *  TSTP WINCH, with or without "SIG"); default "SIGHUP". Delivered to the
   *  command only (not to script or anything else in the unit), like
   *  node-pty's process.kill(pid, signal); the session ends when the command
   *  ends. The notice signal_sent follows once the command's parent in the
   *  unit sent it, signal_failed when the command is already gone or its parent
   *  does not take it within 2 s; neither when that parent died first (the exit
   *  follows then). */
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
  /** Once the session runs: SIGHUP to the command, then STOP if it has not
   *  ended within limits.destroyHupGraceMs (500 ms); no more onData;
   *  the connection is read until the exit envelope, which onExit reports
   *  (usually signal "HUP", exact true), within limits.destroyTimeoutMs (45 s;
   *  then the connection is dropped and onExit has error "destroy_timeout").
   *  Before `started`, or after the session ended: close(). */
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
  /** launch_failed: the launcher's stable reason ("bad_prefix", "not_tty",
   *  "handoff", ...) and its status number. */
  readonly reason?: string;
  readonly status?: number;
}

/** What attach() resolves with: the same kind of object spawn() returns;
 *  the command and its size are not known to an attach. */
export interface IAttachedPty extends Omit<IPty, 'process' | 'cols' | 'rows' | 'replay' | 'cursor'> {
  /** Always null: the supervisor does not say what the command is. */
  readonly process: null;
  /** null until resize() (the session keeps the last size it was given). */
  readonly cols: number | null;
  readonly rows: number | null;
  readonly cursor: number;
  readonly replay: ReplayInfo;
}

export function spawn(file: string, args?: string[], options?: SpawnOptions): IPty;
/** The supervisor's detachable sessions, attached or not. Rejects with a
 *  PtyError (the supervisor's code, fromSupervisor true, or the module's). */
export function list(options?: ListOptions): Promise<SessionEntry[]>;
/** Takes the detached session `id` back: resolves on `attached`; its replay
 *  (from options.cursor) then its live output reach onData, in order.
 *  Rejects with PtyError "bad_attach"/"bad_cursor" (nothing connected), or
 *  the supervisor's "no_such_session", "session_attached", "bad_cursor", ... */
export function attach(id: string, options?: AttachOptions): Promise<IAttachedPty>;

export const limits: Readonly<Record<string, number>>;
export const SIGNALS: Readonly<Record<string, number>>;
export const HELPER_STATUS: Readonly<Record<number, string>>;
export const DEFAULT_SOCKET_PATH: string;
export const DEFAULT_HELPER_PATH: string;

export const protocol: {
  readonly FrameType: Readonly<{
    START: 1; INPUT: 2; SIGNAL: 3; STOP: 4; EOF: 5; RESIZE: 6; ENV: 7; LIST: 8; ATTACH: 9;
    OUTPUT: 0x81; EVENT: 0x82;
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
