/**
 * Realtime listeners of one live session: `npm run bench:listeners` (env: LISTENERS, 10000;
 * SECONDS of playback each, 60; RAMP connections per second, LISTENERS / 10 (the crowd arrives
 * within 10 s); AUDIO_SECONDS of the task, 1800; CLIENT_PROCESSES, 4; SERVER_CPUS and CLIENT_CPUS,
 * 1 and 0; SERVER_ENV; SERVER_NODE_ARGS).
 *
 * Pinned: the service and nginx on SERVER_CPUS, this process and every load client on CLIENT_CPUS
 * (printed first). The service (embedded defaults, rate limits raised) generates one long task;
 * players (bench/lib/stream-client.ts, in CLIENT_PROCESSES processes) open its stream URL — one
 * session, one pipeline — and play it at 40 KB/s (320 kbps) with at most 10 s read ahead, counting
 * underruns. The reference is nginx (one worker, sendfile) serving the task's finished MP3 (the same
 * bytes) to the same crowd with the same client. A reference run is clean when every player got
 * audio, none underran and the client's event-loop delay stayed under 100 ms (p99 of the worst
 * client process; its max is printed too): when nginx's run at
 * LISTENERS is not clean, smaller crowds are tried (3/4, 1/2, 3/10, 1/5, 1/10 of it) and the largest
 * clean one is compared, with ours run again on a new live session at that size. Targets: every
 * player gets audio; first byte p99 ≤ 2× nginx's; underruns ≤ nginx's + 0.5 % of the crowd; server
 * RSS growth ≤ 300 MB; one pipeline run. Exits 1 when one is missed.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { createLongTask, metricValue, pipelineRunsRow, runStreamClients } from './lib/live-session.js';
import { serveFileWithNginx } from './lib/nginx.js';
import { pinByDefault, pinClient, pinningLine } from './lib/pinning.js';
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
const SECONDS = Number(process.env.SECONDS ?? 60);
const RAMP = Number(process.env.RAMP ?? Math.max(1, LISTENERS / 10));
const AUDIO_SECONDS = Number(process.env.AUDIO_SECONDS ?? 1800);
const CLIENT_PROCESSES = Number(process.env.CLIENT_PROCESSES ?? 4);
/** Client event-loop delay under which a run still measures the server, not the client. */
const CLEAN_LOOP_DELAY_MS = 100;
/** Smaller crowds tried for a clean reference, as fractions of LISTENERS. */
const FALLBACK_FRACTIONS = [0.75, 0.5, 0.3, 0.2, 0.1];

function summary(name: string, r: StreamClientResult): string {
  return (
    `${name}: ${r.firstByteMs.length} players got audio; first byte p50 ${percentile(r.firstByteMs, 50).toFixed(0)} ms, ` +
    `p99 ${percentile(r.firstByteMs, 99).toFixed(0)} ms, max ${Math.max(...r.firstByteMs).toFixed(0)} ms; ` +
    `underruns ${r.underruns}; statuses ${JSON.stringify(r.statuses)}; errors ${r.errors.length}` +
    (r.errors.length > 0 ? ` (first: ${r.errors[0]})` : '') +
    `; ${(r.bytes / 1e6).toFixed(0)} MB read; client loop delay max ${r.loopDelayMaxMs.toFixed(0)} ms, p99 ${r.loopDelayP99Ms.toFixed(0)} ms`
  );
}

/** A run that measured the server: everyone served, no underrun, a client that kept up. */
function clean(r: StreamClientResult, crowd: number): boolean {
  return (
    r.firstByteMs.length === crowd &&
    r.errors.length === 0 &&
    r.underruns === 0 &&
    r.loopDelayP99Ms < CLEAN_LOOP_DELAY_MS
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

function players(crowd: number, url: string) {
  return {
    mode: 'realtime' as const,
    url,
    count: crowd,
    rampPerSecond: (RAMP * crowd) / LISTENERS,
    seconds: SECONDS,
  };
}

/** One sample's value in a /metrics text (the first series of that name); 0 if absent. */
function sample(text: string, name: string): number {
  const value = Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1]);
  return Number.isFinite(value) ? value : 0;
}

/** Ours: a new long task, its live session played by `crowd` players. */
interface OursRun {
  taskId: string;
  result: StreamClientResult;
  rssBeforeMiB: number;
  rssPeakMiB: number;
  pipelineRuns: number;
}

async function runOurs(server: BenchServer, crowd: number): Promise<OursRun> {
  const runsBefore = await metricValue(server, 'voicegen_stream_pipeline_runs');
  const task = await createLongTask(server, AUDIO_SECONDS);
  await sleep(500);
  const rssBeforeMiB = rssMiB(server.pid);
  let rssPeakMiB = rssBeforeMiB;
  const sampler = setInterval(() => (rssPeakMiB = Math.max(rssPeakMiB, rssMiB(server.pid))), 250);
  let listenersPeak = 0;
  // The service's own event-loop delay (prom-client's, reset at each scrape): its stalls show
  // beside the first-byte tail.
  let serverLoopMaxMs = 0;
  const listenerSampler = setInterval(() => {
    // One scrape for both: a scrape resets the loop-delay histogram.
    void fetch(`${server.url}/metrics`)
      .then((response) => response.text())
      .then((text) => {
        listenersPeak = Math.max(listenersPeak, sample(text, 'voicegen_stream_listeners'));
        const lag = sample(text, 'voicegen_nodejs_eventloop_lag_max_seconds');
        serverLoopMaxMs = Math.max(serverLoopMaxMs, lag * 1000);
      })
      .catch(() => undefined);
  }, 1000);
  const result = await runStreamClients(players(crowd, task.streamUrl), CLIENT_PROCESSES).finally(() => {
    clearInterval(sampler);
    clearInterval(listenerSampler);
  });
  const pipelineRuns = (await metricValue(server, 'voicegen_stream_pipeline_runs')) - runsBefore;
  const { status } = await api<{ status: string }>(server, 'GET', `/api/tts/generate/${task.id}`);
  console.log(summary(`ours, ${crowd} players of the live session`, result));
  const redirected = result.statuses['302'] ?? 0;
  if (redirected > 0)
    console.log(
      `  ${redirected} players got the 302 to finished audio: the task was generated before they arrived (raise AUDIO_SECONDS)`,
    );
  console.log(
    `  server RSS ${rssBeforeMiB.toFixed(0)} MiB before, peak ${rssPeakMiB.toFixed(0)} MiB; listeners seen at once (/metrics) ${listenersPeak}; server loop delay max ${serverLoopMaxMs.toFixed(0)} ms; pipeline runs ${pipelineRuns}; task ${status} at the end`,
  );
  return { taskId: task.id, result, rssBeforeMiB, rssPeakMiB, pipelineRuns };
}

async function runNginx(url: string, crowd: number): Promise<StreamClientResult> {
  const result = await runStreamClients(players(crowd, url), CLIENT_PROCESSES);
  console.log(
    summary(`nginx, ${crowd} players of the finished file`, result) +
      (clean(result, crowd) ? ' (clean)' : ' (not clean)'),
  );
  return result;
}

async function main(): Promise<number> {
  ensureDebianPackages({ nginx: 'nginx' });
  pinByDefault('1', '0');
  pinClient();
  console.log(pinningLine());
  console.log(
    `${LISTENERS} players arriving at ${RAMP.toFixed(0)}/s, ${SECONDS} s of playback each; ${CLIENT_PROCESSES} client processes`,
  );
  const server = await startServer(
    { RATE_LIMIT_MAX: '1000000', STREAM_RATE_LIMIT_MAX: '1000000', ...serverEnvFromProcess() },
    serverNodeArgsFromProcess(),
  );
  try {
    let ours = await runOurs(server, LISTENERS);
    const finished = await finishedAudio(server, ours.taskId);
    const nginxFile = await serveFileWithNginx(finished);
    let crowd = LISTENERS;
    let nginx: StreamClientResult;
    try {
      nginx = await runNginx(nginxFile.url, crowd);
      for (const fraction of FALLBACK_FRACTIONS) {
        if (clean(nginx, crowd)) break;
        crowd = Math.max(1, Math.round(LISTENERS * fraction));
        nginx = await runNginx(nginxFile.url, crowd);
      }
    } finally {
      await nginxFile.stop();
    }
    const referenceClean = clean(nginx, crowd);
    if (crowd !== LISTENERS && referenceClean) {
      console.log(`nginx's run is clean at ${crowd} players, not at ${LISTENERS}: ours again at ${crowd}`);
      ours = await runOurs(server, crowd);
    }
    const { result } = ours;
    const growth = ours.rssPeakMiB - ours.rssBeforeMiB;
    const p99 = percentile(result.firstByteMs, 99);
    const nginxP99 = percentile(nginx.firstByteMs, 99);
    const underrunAllowance = nginx.underruns + 0.005 * crowd;
    return report(
      `${crowd} realtime listeners of one live session arriving within ${(LISTENERS / RAMP).toFixed(0)} s, ${SECONDS} s each (${pinningLine()})`,
      [
        {
          metric: 'reference run clean (nginx: all served, 0 underruns, client loop p99 < 100 ms)',
          ours: `client loop p99 ${result.loopDelayP99Ms.toFixed(0)} ms`,
          reference: `nginx at ${crowd}: loop p99 ${nginx.loopDelayP99Ms.toFixed(0)} ms`,
          ratio: '—',
          target: crowd === LISTENERS ? 'clean' : `clean (largest clean crowd; ${LISTENERS} was not)`,
          pass: referenceClean,
        },
        {
          metric: 'players that got audio',
          ours: `${result.firstByteMs.length} of ${crowd}`,
          reference: `nginx ${nginx.firstByteMs.length}`,
          ratio: '—',
          target: 'all, no error',
          pass: result.firstByteMs.length === crowd && result.errors.length === 0,
        },
        {
          metric: 'first byte p99',
          ours: `${p99.toFixed(0)} ms`,
          reference: `nginx ${nginxP99.toFixed(0)} ms`,
          ratio: `${(p99 / nginxP99).toFixed(2)}× nginx`,
          target: '≤ 2× nginx',
          pass: p99 <= 2 * nginxP99,
        },
        {
          metric: 'underruns',
          ours: String(result.underruns),
          reference: `nginx ${nginx.underruns}`,
          ratio: '—',
          target: `≤ nginx + 0.5 % (${underrunAllowance.toFixed(0)})`,
          pass: result.underruns <= underrunAllowance,
        },
        {
          metric: 'server RSS growth (peak − before)',
          ours: `${growth.toFixed(0)} MiB`,
          reference: `${ours.rssBeforeMiB.toFixed(0)} MiB before`,
          ratio: '—',
          target: '≤ 300 MB',
          pass: growth * 1.048576 <= 300,
        },
        pipelineRunsRow(ours.pipelineRuns),
      ],
    );
  } finally {
    await server.stop();
  }
}

runBench(main);
