// vm-tests/node/pty-plugin-smoke.ts: the Bun entry of the smoke suite, the
// seed's `bun pty-plugin-smoke.ts`. vm-tests/node/smoke.sh --runtime=bun runs it with the
// pinned Bun ($BUN_APP FILE, no bundling: Bun transpiles it in process) as the
// MainPID of opencode-v2.service, 10 times in one boot, each against a fresh
// supervisor. The checks are vm-tests/node/smoke-cases.js, the same
// definitions the Node SEA entry (vm-tests/node/smoke-app.js) runs; this file
// adds only what is about the runtime: that it is the pinned Bun and the
// service's MainPID. Environment as smoke-cases.js, plus
// OPENCODE_SMOKE_BUN_VERSION (the pinned version) and OPENCODE_SMOKE_BUN_PATH.
import { createRequire } from 'node:module';
import { spawnSync } from 'node:child_process';

interface SmokeCases {
  cases: Record<string, () => Promise<void>>;
  main(runtime: string): Promise<number>;
  record(name: string, ok: boolean, evidence?: unknown): void;
}

const load = createRequire(import.meta.url);
const smoke = load('./smoke-cases.js') as SmokeCases;

function mainPid(): string {
  const r = spawnSync('/bin/systemctl', ['show', '-P', 'MainPID', 'opencode-v2.service'], { encoding: 'utf8', timeout: 20000 });
  return (r.stdout || '').trim();
}

async function run(): Promise<number> {
  const bun: string | undefined = process.versions.bun;
  const code = await smoke.main(`Bun ${bun ?? '(not Bun)'}`);
  // After main(): it starts OPENCODE_SMOKE_OUT afresh.
  const want = { version: process.env.OPENCODE_SMOKE_BUN_VERSION, execPath: process.env.OPENCODE_SMOKE_BUN_PATH };
  const pinned = bun !== undefined && bun === want.version && process.execPath === want.execPath;
  smoke.record('runtime: the harness ran on the pinned Bun (process.versions.bun, process.execPath)', pinned,
    { bun: bun ?? null, execPath: process.execPath, want });
  const pid = mainPid();
  const isMain = pid === String(process.pid);
  smoke.record('runtime: the harness is opencode-v2.service\'s MainPID', isMain, { pid: process.pid, mainPid: pid });
  return code === 0 && pinned && isMain ? 0 : 1;
}

run().then((code) => { process.exitCode = code; }, (e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
