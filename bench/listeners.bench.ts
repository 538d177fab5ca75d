/**
 * Realtime listeners of one live session: `npm run bench:listeners` (env: LISTENERS,
 * 10000; SECONDS of playback each, 30; RAMP connections per second, 2000; AUDIO_SECONDS of the
 * task, 1800; SERVER_ENV; SERVER_NODE_ARGS).
 * The service (embedded defaults, rate limits raised) generates one long task; players in another
 * process (bench/lib/stream-client.ts) open its stream URL — one session, one pipeline — and play
 * it at 40 KB/s (320 kbps) with at most 10 s read ahead, counting underruns. First a baseline of 50
 * players (the reference: the same session with few listeners), then LISTENERS arriving at RAMP
 * per second. Targets: first byte p99 ≤ 500 ms, 0 underruns, server RSS growth ≤ 300 MB, one
 * pipeline run. Exits 1 when one is missed. Beside them, nginx (one worker, sendfile) serving the
 * task's finished MP3 as a file to the same crowd of players: what this machine and client allow.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { createLongTask, metricValue, pipelineRunsRow, runStreamClient } from './lib/live-session.js';
import { serveFileWithNginx } from './lib/nginx.js';
import {
  api,
  ensureDebianPackages,
  type BenchServer,
  percentile,
  report,
  rssMiB,
  runBench,
  serverEnvFromProcess,
  serverNodeArgsFromProcess,
  startServer,
} from './lib/server.js';
import type { StreamClientResult } from './lib/stream-client.js';

const LISTENERS = Number(process.env.LISTENERS ?? 10_000);
const SECONDS = Number(process.env.SECONDS ?? 30);
const RAMP = Number(process.env.RAMP ?? 2000);
const AUDIO_SECONDS = Number(process.env.AUDIO_SECONDS ?? 1800);

function summary(name: string, r: StreamClientResult): string {
  return (
    `${name}: ${r.firstByteMs.length} players got audio; first byte p50 ${percentile(r.firstByteMs, 50).toFixed(0)} ms, ` +
    `p99 ${percentile(r.firstByteMs, 99).toFixed(0)} ms, max ${Math.max(...r.firstByteMs).toFixed(0)} ms; ` +
    `underruns ${r.underruns}; statuses ${JSON.stringify(r.statuses)}; errors ${r.errors.length}` +
    (r.errors.length > 0 ? ` (first: ${r.errors[0]})` : '') +
    `; ${(r.bytes / 1e6).toFixed(0)} MB read`
  );
}

/** The finished task's MP3 (the live session's bytes), once generated. */
async function finishedAudio(server: BenchServer, taskId: string): Promise<Buffer> {
  for (;;) {
    const detail = await api<{ status: string; metadata: { audio?: string } }>(
      server,
      'GET',
      `/api/tts/generate/${taskId}`,
    );
    if (detail.metadata.audio !== undefined) {
      const response = await fetch(detail.metadata.audio);
      if (!response.ok) throw new Error(`finished audio: ${response.status}`);
      return Buffer.from(await response.arrayBuffer());
    }
    if (detail.status === 'failed') throw new Error('the task failed');
    await sleep(1000);
  }
}

async function main(): Promise<number> {
  ensureDebianPackages({ nginx: 'nginx' });
  const server = await startServer(
    { RATE_LIMIT_MAX: '1000000', STREAM_RATE_LIMIT_MAX: '1000000', ...serverEnvFromProcess() },
    serverNodeArgsFromProcess(),
  );
  try {
    const task = await createLongTask(server, AUDIO_SECONDS);
    const baseline = await runStreamClient({
      mode: 'realtime',
      url: task.streamUrl,
      count: 50,
      rampPerSecond: 1000,
      seconds: 5,
    });
    console.log(summary('baseline, 50 players', baseline));
    await sleep(500);
    const rssBefore = rssMiB(server.pid);
    let rssPeak = rssBefore;
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, rssMiB(server.pid))), 250);
    let listenersPeak = 0;
    const listenerSampler = setInterval(() => {
      void metricValue(server, 'voicegen_stream_listeners').then((n) => {
        if (n > listenersPeak) listenersPeak = n;
      });
    }, 1000);
    const crowd = await runStreamClient({
      mode: 'realtime',
      url: task.streamUrl,
      count: LISTENERS,
      rampPerSecond: RAMP,
      seconds: SECONDS,
    }).finally(() => {
      clearInterval(sampler);
      clearInterval(listenerSampler);
    });
    console.log(summary(`${LISTENERS} players`, crowd));
    const pipelineRuns = await metricValue(server, 'voicegen_stream_pipeline_runs');
    const { status } = await api<{ status: string }>(server, 'GET', `/api/tts/generate/${task.id}`);
    console.log(
      `server RSS ${rssBefore.toFixed(0)} MiB before, peak ${rssPeak.toFixed(0)} MiB; listeners seen at once (/metrics) ${listenersPeak}; pipeline runs ${pipelineRuns}; task ${status} at the end`,
    );
    // The reference: nginx serving the finished audio (the same bytes) to the same crowd.
    const finished = await finishedAudio(server, task.id);
    const nginxFile = await serveFileWithNginx(finished);
    const nginx = await runStreamClient({
      mode: 'realtime',
      url: nginxFile.url,
      count: LISTENERS,
      rampPerSecond: RAMP,
      seconds: SECONDS,
    }).finally(() => nginxFile.stop());
    console.log(summary(`nginx, ${LISTENERS} players of the finished file`, nginx));
    const growth = rssPeak - rssBefore;
    const p99 = percentile(crowd.firstByteMs, 99);
    const everyone = crowd.firstByteMs.length === LISTENERS && crowd.errors.length === 0;
    return report(`${LISTENERS} realtime listeners of one live session, ${SECONDS} s each`, [
      {
        metric: 'players that got audio',
        ours: `${crowd.firstByteMs.length} of ${LISTENERS}`,
        reference: `nginx ${nginx.firstByteMs.length}`,
        ratio: '—',
        target: 'all, no error',
        pass: everyone,
      },
      {
        metric: 'first byte p99',
        ours: `${p99.toFixed(0)} ms`,
        reference: `nginx ${percentile(nginx.firstByteMs, 99).toFixed(0)} ms; 50 players ${percentile(baseline.firstByteMs, 99).toFixed(0)} ms`,
        ratio: `${(p99 / percentile(nginx.firstByteMs, 99)).toFixed(1)}× nginx`,
        target: '≤ 500 ms',
        pass: p99 <= 500,
      },
      {
        metric: 'underruns',
        ours: String(crowd.underruns),
        reference: `nginx ${nginx.underruns}`,
        ratio: '—',
        target: '0',
        pass: crowd.underruns === 0,
      },
      {
        metric: 'server RSS growth (peak − before)',
        ours: `${growth.toFixed(0)} MiB`,
        reference: `${rssBefore.toFixed(0)} MiB before`,
        ratio: '—',
        target: '≤ 300 MB',
        pass: growth * 1.048576 <= 300,
      },
      pipelineRunsRow(pipelineRuns),
    ]);
  } finally {
    await server.stop();
  }
}

runBench(main);
