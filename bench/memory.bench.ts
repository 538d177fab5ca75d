/**
 * Idle memory (issue 14): `npm run bench:memory` (env: SETTLE_SECONDS, 70 — past the synthesis
 * threads' idle minute; SERVER_BUILD, `dist` — the compiled service `npm start` runs, built first —
 * or `src` for the service under tsx). Starts the service on a new DATA_DIR, reads its resident memory once it
 * answers and again after SETTLE_SECONDS idle; then restarts it on the same data and does the same.
 * The reference in the same run: a bare `node` process (the runtime's own floor). Target: ≤ 250 MB
 * idle. Exits 1 when missed.
 */
import { spawn, spawnSync } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { scaleOutRequested } from './lib/scale-out.js';
import { report, rssMiB, runBench, startServer } from './lib/server.js';

const SETTLE_SECONDS = Number(process.env.SETTLE_SECONDS ?? 70);
const TARGET_MIB = 250 / 1.048576; // 250 MB

async function bareNodeRss(): Promise<number> {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  await sleep(1000);
  const rss = rssMiB(child.pid ?? 0);
  child.kill();
  return rss;
}

async function idleRss(dataDir?: string): Promise<{ started: number; settled: number; dataDir: string }> {
  const server = await startServer({
    LOG_LEVEL: 'warn',
    ...(dataDir !== undefined && { DATA_DIR: dataDir }),
  });
  try {
    await sleep(2000);
    const started = rssMiB(server.pid);
    await sleep(SETTLE_SECONDS * 1000);
    return { started, settled: rssMiB(server.pid), dataDir: server.dataDir };
  } finally {
    // Keep the data for the restart: stop without removing it.
    process.env.KEEP_DATA = '1';
    await server.stop();
    delete process.env.KEEP_DATA;
  }
}

async function main(): Promise<number> {
  process.env.SERVER_BUILD ??= 'dist';
  const compiled = process.env.SERVER_BUILD === 'dist';
  if (compiled && spawnSync('npm', ['run', 'build'], { stdio: 'inherit' }).status !== 0)
    throw new Error('npm run build failed');
  const floor = await bareNodeRss();
  const first = await idleRss();
  const restart = await idleRss(first.dataDir);
  await rm(first.dataDir, { recursive: true, force: true });
  const fmt = (mib: number) => `${mib.toFixed(0)} MiB`;
  console.log(
    `bare node ${fmt(floor)}; first start: ${fmt(first.started)} → ${fmt(first.settled)} after ${SETTLE_SECONDS} s; ` +
      `restart: ${fmt(restart.started)} → ${fmt(restart.settled)}`,
  );
  return report(
    `Idle resident memory (${compiled ? 'compiled service, node dist/main.js' : 'service under tsx'}, ${scaleOutRequested() ? 'scale-out adapters: a fresh database per start' : 'embedded defaults'})`,
    [
      {
        metric: `first start, idle ${SETTLE_SECONDS} s`,
        ours: fmt(first.settled),
        reference: `bare node ${fmt(floor)}`,
        ratio: `${(first.settled / floor).toFixed(1)}×`,
        target: '≤ 250 MB',
        pass: first.settled <= TARGET_MIB,
      },
      {
        metric: `restart on the same data, idle ${SETTLE_SECONDS} s`,
        ours: fmt(restart.settled),
        reference: `bare node ${fmt(floor)}`,
        ratio: `${(restart.settled / floor).toFixed(1)}×`,
        target: '≤ 250 MB',
        pass: restart.settled <= TARGET_MIB,
      },
    ],
  );
}

runBench(main);
