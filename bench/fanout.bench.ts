/**
 * Full-speed readers of one live session against nginx: `npm run bench:fanout` (env:
 * READERS, 500; TARGET_MB of history each reads, 4; AUDIO_SECONDS of the task, 600; SERVER_ENV;
 * SERVER_NODE_ARGS; SCALE_OUT=1 with NODES=2: a second node of the same cluster, half the readers
 * on each — the second relays the session from the first).
 * The service (embedded defaults, rate limits raised) generates one long task; a first reader
 * starts its session and keeps the bytes. Once TARGET_MB exist, READERS readers in another process
 * (bench/lib/stream-client.ts) join the same live session at byte 0 and read at full speed until
 * each has those TARGET_MB; the time until the last has them (makespan) is compared with nginx
 * (one worker, sendfile) serving the same bytes as a file to the same client. The task is still
 * generating meanwhile: the session is live, one pipeline feeds every reader.
 * Targets: ≥ 0.5× nginx's throughput, pipeline runs = 1. Exits 1 when one is missed.
 */
import http from 'node:http';
import { createLongTask, metricValue, pipelineRunsRow, runStreamClient } from './lib/live-session.js';
import { serveFileWithNginx, type NginxFile } from './lib/nginx.js';
import {
  ensureDebianPackages,
  percentile,
  report,
  runBench,
  serverEnvFromProcess,
  serverNodeArgsFromProcess,
  startServer,
} from './lib/server.js';
import type { StreamClientResult } from './lib/stream-client.js';

const READERS = Number(process.env.READERS ?? 500);
const TARGET_BYTES = Math.round(Number(process.env.TARGET_MB ?? 4) * 1024 * 1024);
const AUDIO_SECONDS = Number(process.env.AUDIO_SECONDS ?? 600);
const NODES = Number(process.env.NODES ?? 1);

/** Reads `url` at full speed; resolves with its first `bytes` bytes once they arrived (the response goes on). */
function firstBytes(url: string, bytes: number): Promise<{ head: Buffer; response: http.IncomingMessage }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, (response) => {
        if (response.statusCode !== 200) {
          reject(new Error(`stream answered ${response.statusCode}`));
          return;
        }
        const parts: Buffer[] = [];
        let have = 0;
        response.on('data', (chunk: Buffer) => {
          if (have >= bytes) return;
          parts.push(chunk);
          have += chunk.length;
          if (have >= bytes) resolve({ head: Buffer.concat(parts).subarray(0, bytes), response });
        });
        response.on('end', () => {
          if (have < bytes) reject(new Error(`the stream ended after ${have} bytes`));
        });
      })
      .on('error', reject);
  });
}

function summary(name: string, r: StreamClientResult): string {
  const mbps = (READERS * TARGET_BYTES) / 1e6 / (r.makespanMs / 1000);
  return (
    `${name}: ${r.doneMs.length} of ${READERS} readers had ${(TARGET_BYTES / 2 ** 20).toFixed(1)} MiB; ` +
    `first byte p50 ${percentile(r.firstByteMs, 50).toFixed(0)} ms, p99 ${percentile(r.firstByteMs, 99).toFixed(0)} ms; ` +
    `done p50 ${percentile(r.doneMs, 50).toFixed(0)} ms, p99 ${percentile(r.doneMs, 99).toFixed(0)} ms; ` +
    `last done after ${r.makespanMs.toFixed(0)} ms (${mbps.toFixed(0)} MB/s); statuses ${JSON.stringify(r.statuses)}; ` +
    `errors ${r.errors.length}${r.errors.length > 0 ? ` (first: ${r.errors[0]})` : ''}`
  );
}

async function main(): Promise<number> {
  ensureDebianPackages({ nginx: 'nginx' });
  const server = await startServer(
    { RATE_LIMIT_MAX: '1000000', STREAM_RATE_LIMIT_MAX: '1000000', ...serverEnvFromProcess() },
    serverNodeArgsFromProcess(),
  );
  if (NODES !== 1 && (NODES !== 2 || server.scaleOutEnv.REDIS_URL === undefined))
    throw new Error('NODES=2 needs SCALE_OUT=1 (a cluster shares PostgreSQL, Redis and S3)');
  const second =
    NODES === 2
      ? await startServer(
          { RATE_LIMIT_MAX: '1000000', STREAM_RATE_LIMIT_MAX: '1000000', ...serverEnvFromProcess() },
          serverNodeArgsFromProcess(),
          server,
        )
      : undefined;
  let nginxFile: NginxFile | undefined;
  try {
    const task = await createLongTask(server, AUDIO_SECONDS);
    const first = await firstBytes(task.streamUrl, TARGET_BYTES);
    const ours = await runStreamClient({
      mode: 'full',
      url: task.streamUrl,
      ...(second !== undefined && { moreUrls: [task.streamUrl.replace(server.url, second.url)] }),
      count: READERS,
      rampPerSecond: 100_000,
      targetBytes: TARGET_BYTES,
    });
    first.response.destroy();
    const nodes = second === undefined ? [server] : [server, second];
    const sum = async (name: string) =>
      (await Promise.all(nodes.map((node) => metricValue(node, name)))).reduce((a, b) => a + b, 0);
    const pipelineRuns = await sum('voicegen_stream_pipeline_runs');
    const relayRuns = await sum('voicegen_stream_relay_runs');
    if (second !== undefined)
      console.log(`two nodes: ${READERS / 2} readers on each; relay runs ${relayRuns}`);
    console.log(summary('service, one live session', ours));

    nginxFile = await serveFileWithNginx(first.head);
    const nginx = await runStreamClient({
      mode: 'full',
      url: nginxFile.url,
      count: READERS,
      rampPerSecond: 100_000,
      targetBytes: TARGET_BYTES,
    });
    console.log(summary('nginx, the same bytes as a file', nginx));

    const ratio = nginx.makespanMs / ours.makespanMs;
    const complete = ours.doneMs.length === READERS && ours.errors.length === 0;
    return report(`${READERS} full-speed readers of one live session vs nginx`, [
      {
        metric: `readers with all ${(TARGET_BYTES / 2 ** 20).toFixed(1)} MiB`,
        ours: `${ours.doneMs.length} of ${READERS}`,
        reference: `${nginx.doneMs.length} of ${READERS}`,
        ratio: '—',
        target: 'all, no error',
        pass: complete,
      },
      {
        metric: 'throughput (the last reader done)',
        ours: `${((READERS * TARGET_BYTES) / 1e6 / (ours.makespanMs / 1000)).toFixed(0)} MB/s`,
        reference: `${((READERS * TARGET_BYTES) / 1e6 / (nginx.makespanMs / 1000)).toFixed(0)} MB/s`,
        ratio: `${ratio.toFixed(2)}×`,
        target: '≥ 0.5× nginx',
        pass: ratio >= 0.5,
      },
      {
        metric: 'reader done p99',
        ours: `${percentile(ours.doneMs, 99).toFixed(0)} ms`,
        reference: `${percentile(nginx.doneMs, 99).toFixed(0)} ms`,
        ratio: `${(percentile(nginx.doneMs, 99) / percentile(ours.doneMs, 99)).toFixed(2)}×`,
        target: 'report',
        pass: true,
      },
      pipelineRunsRow(pipelineRuns, second === undefined ? '' : ' (both nodes)'),
    ]);
  } finally {
    await nginxFile?.stop();
    await second?.stop();
    await server.stop();
  }
}

runBench(main);
