// The strict entry's detachable-session API (index.d.ts: spawn's `detachable`,
// list(), attach(), cursor, replay) as an application would use it: type-checked
// by typecheck/run with `tsc --noEmit --strict`, never run (the unit tests in
// test/detach.test.js run the same calls against the fake supervisor).
import * as pty from '../index';

export async function keepAndReattach(cwd: string): Promise<number> {
  const term: pty.IPty = pty.spawn('/bin/sh', ['-i'], {
    cwd, cols: 100, rows: 30, detachable: { graceSeconds: 300, scrollbackBytes: pty.limits.defaultScrollbackBytes },
  });
  let cursor: number | null = term.cursor;
  term.onData(() => { cursor = term.cursor; });
  const detachable: boolean = term.detachable;
  const none: pty.ReplayInfo | null = term.replay;
  void none;

  const sessions: pty.SessionEntry[] = await pty.list();
  const mine = sessions.find((s) => s.session === term.session && s.state === 'detached');
  if (!mine || !detachable) return 0;
  const back: pty.IAttachedPty = await pty.attach(mine.session, { cursor: cursor ?? mine.first, encoding: null });
  const from: number = back.replay.cursor + back.replay.dropped - back.replay.dropped;
  const next: number = back.cursor;
  const gone: null = back.process;
  void gone;
  const cols: number | null = back.cols;
  if (cols === null) back.resize(100, 30);
  back.onData((data: string | Buffer) => { void data; });
  back.onExit((ev: pty.ExitEvent) => { void ev.exitCode; });
  back.write('exit\r');
  return next - from;
}

export function failures(e: unknown): string | undefined {
  return e instanceof pty.PtyError ? e.code : undefined;
}
