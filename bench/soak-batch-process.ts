/**
 * What the soak's polite tenants would see if long tasks were generated in a process of their own
 * (`npx tsx bench/soak-batch-process.ts`; env PRIORITY `idle` (SCHED_IDLE, every thread), `nice19`
 * (niceness 19, every thread) or `normal` (as started: batch threads at niceness 10); DURATION 40;
 * UNLOADED 20; SERVER_BUILD and the pinning variables as for the soak).
 * It runs bench/soak.ts with the hostile account silent, and a second service on the soak server's
 * core (SERVER_CPUS, default 1) that stands in for that process: when the soak's loaded phase
 * starts, a hostile account sends it the soak's hostile tasks (100 contents of 1,000 characters,
 * 10 a second until refused) and it generates them for the whole phase. The soak's figures are then
 * the polite tenants' with that load beside the service instead of inside it: a lower bound for
 * the design, since the hostile account's requests and its tasks' rows would still reach the
 * service there. Prints the soak's verdicts and the batch service's CPU.
 */
import { execFileSync, spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { setPriority } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { pinByDefault, pinClient } from './lib/pinning.js';
import { api, cpuSeconds, runBench, startServer, type BenchServer } from './lib/server.js';

const PRIORITY = process.env.PRIORITY ?? 'idle';
const DURATION_S = Number(process.env.DURATION ?? 40);
const TASK_CONTENTS = 100;
const CONTENT = 'The lighthouse keeper climbed the stairs at dusk, as every evening for forty years. '
  .repeat(13)
  .slice(0, 1000);

/** Gives every thread of `pid` the priority asked for (threads start later too: call it again). */
function lower(pid: number): void {
  if (PRIORITY === 'idle') {
    execFileSync('chrt', ['--idle', '--all-tasks', '--pid', '0', String(pid)], { stdio: 'ignore' });
  } else if (PRIORITY === 'nice19') {
    for (const tid of readdirSync(`/proc/${pid}/task`)) setPriority(Number(tid), 19);
  }
}

/** Sends the hostile tasks to `batch` until refused, then lets it generate; resolves after DURATION. */
async function load(batch: BenchServer): Promise<number> {
  const voice = await api<{ id: string }>(batch, 'POST', '/api/voice', { name: 'hostile narrator' });
  const body = {
    contents: Array.from({ length: TASK_CONTENTS }, () => ({ text: CONTENT, voiceId: voice.id })),
  };
  const until = Date.now() + DURATION_S * 1000;
  let accepted = 0;
  for (let refused = false; Date.now() < until; await sleep(100)) {
    if (refused) continue;
    await api(batch, 'POST', '/api/tts/generate', body).then(
      () => accepted++,
      () => (refused = true),
    );
  }
  return accepted;
}

async function main(): Promise<number> {
  pinByDefault('1', '0');
  pinClient();
  if (!['idle', 'nice19', 'normal'].includes(PRIORITY)) throw new Error(`PRIORITY: idle, nice19 or normal`);
  const batch = await startServer({ RATE_LIMIT_MAX: '1000000' });
  let lowering = true;
  const lowerer = (async () => {
    while (lowering) {
      try {
        lower(batch.pid);
      } catch {
        // a thread that ended meanwhile
      }
      await sleep(300);
    }
  })();
  try {
    const soak = spawn(process.execPath, ['--import', 'tsx', 'bench/soak.ts'], {
      env: {
        ...process.env,
        DURATION: String(DURATION_S),
        UNLOADED: process.env.UNLOADED ?? '20',
        READERS: process.env.READERS ?? '0',
        SESSIONS: process.env.SESSIONS ?? '0',
        HOSTILE_GENERATE_RPS: '0',
        HOSTILE_HEAD_RPS: '0',
        HOSTILE_PREVIEW_RPS: '0',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let loaded: Promise<{ accepted: number; cores: number }> | undefined;
    const verdicts: string[] = [];
    soak.stdout.setEncoding('utf8');
    soak.stdout.on('data', (text: string) => {
      process.stdout.write(text);
      verdicts.push(...text.split('\n').filter((line) => /^(PASS|FAIL) /.test(line)));
      // The soak's loaded phase has begun: the batch service gets the hostile tasks.
      if (loaded === undefined && text.includes('live tasks streamable')) {
        loaded = (async () => {
          const before = cpuSeconds(batch.pid);
          const accepted = await load(batch);
          return { accepted, cores: (cpuSeconds(batch.pid) - before) / DURATION_S };
        })();
      }
    });
    const code = await new Promise<number>((resolve) => soak.once('exit', (c) => resolve(c ?? 1)));
    if (loaded === undefined) throw new Error('the soak never reached its loaded phase');
    const { accepted, cores } = await loaded;
    console.log(
      `\nbatch service (${PRIORITY}): ${accepted} hostile tasks accepted, ${cores.toFixed(2)} cores used in the loaded phase`,
    );
    for (const line of verdicts) console.log(`soak: ${line}`);
    return code;
  } finally {
    lowering = false;
    await lowerer;
    await batch.stop();
  }
}

runBench(main);
