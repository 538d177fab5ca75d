/**
 * What the live-stream benchmarks (fanout, listeners) share: a long task whose live session they
 * read, the load client run in its own process, and figures scraped from the service's /metrics.
 */
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { api, type BenchServer, type ResultRow } from './server.js';
import type { StreamClientOptions, StreamClientResult } from './stream-client.js';

const SENTENCES = [
  'The lighthouse keeper climbed the stairs at dusk, as every evening for forty years.',
  'Below him the sea was grey and restless, and the wind came from the north.',
  'He trimmed the wick, polished the lens, and watched the first beam sweep the water.',
  'Somewhere out there a fishing boat was making for the harbour before the storm.',
];

/** A text of about `seconds` of speech (about 14 characters per second). */
export function story(seconds: number, n: number): string {
  const parts: string[] = [`Story number ${n}.`];
  for (let i = 0; parts.join(' ').length < seconds * 14; i++)
    parts.push(SENTENCES[i % SENTENCES.length] ?? '');
  return parts.join(' ');
}

/**
 * Creates a task of about `seconds` of speech (contents of ≤ 600 s each); resolves with its id and
 * stream URL once the stream answers (a queued task answers STREAM_NOT_READY until it is taken up,
 * as on the scale-out queue).
 */
export async function createLongTask(
  server: BenchServer,
  seconds: number,
): Promise<{ id: string; streamUrl: string }> {
  const voice = await api<{ id: string }>(server, 'POST', '/api/voice', { name: 'bench narrator' });
  const contents = Array.from({ length: Math.ceil(seconds / 600) }, (_, n) => ({
    text: story(Math.min(600, seconds - n * 600), n),
    voiceId: voice.id,
  }));
  const task = await api<{ id: string }>(server, 'POST', '/api/tts/generate', { contents });
  const { streamUrl } = await api<{ streamUrl: string }>(
    server,
    'GET',
    `/api/tts/generate/${task.id}?stream=true`,
  );
  for (const deadline = Date.now() + 60_000; ;) {
    const response = await fetch(streamUrl);
    const ok = response.ok;
    const body = ok ? '' : await response.text();
    await response.body?.cancel();
    if (ok) break;
    if (!body.includes('STREAM_NOT_READY') || Date.now() > deadline)
      throw new Error(`stream: ${response.status} ${body.slice(0, 200)}`);
    await sleep(250);
  }
  return { id: task.id, streamUrl };
}

/** Runs the load client (bench/lib/stream-client.ts) in its own process; resolves with its report. */
export function runStreamClient(options: StreamClientOptions): Promise<StreamClientResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', new URL('./stream-client.ts', import.meta.url).pathname, JSON.stringify(options)],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      try {
        if (code !== 0) throw new Error(`stream client exited with ${code}`);
        resolve(JSON.parse(out.trim().split('\n').pop() ?? '') as StreamClientResult);
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  });
}

/**
 * The load client as `processes` processes sharing the crowd (each `count / processes` players
 * arriving at `rampPerSecond / processes`), so that no single event loop has to keep up with all
 * of them; resolves with their reports merged (the loop delay is the worst process's).
 */
export async function runStreamClients(
  options: StreamClientOptions,
  processes: number,
): Promise<StreamClientResult> {
  const n = Math.max(1, Math.min(processes, options.count));
  const parts = await Promise.all(
    Array.from({ length: n }, (_, k) =>
      runStreamClient({
        ...options,
        count: Math.floor(options.count / n) + (k < options.count % n ? 1 : 0),
        rampPerSecond: options.rampPerSecond / n,
      }),
    ),
  );
  const statuses: Record<string, number> = {};
  for (const part of parts)
    for (const [status, count] of Object.entries(part.statuses))
      statuses[status] = (statuses[status] ?? 0) + count;
  return {
    firstByteMs: parts.flatMap((p) => p.firstByteMs),
    doneMs: parts.flatMap((p) => p.doneMs),
    makespanMs: Math.max(...parts.map((p) => p.makespanMs)),
    underruns: parts.reduce((sum, p) => sum + p.underruns, 0),
    errors: parts.flatMap((p) => p.errors),
    statuses,
    bytes: parts.reduce((sum, p) => sum + p.bytes, 0),
    loopDelayMaxMs: Math.max(...parts.map((p) => p.loopDelayMaxMs)),
    loopDelayP99Ms: Math.max(...parts.map((p) => p.loopDelayP99Ms)),
  };
}

/** One sample's value from the service's /metrics (the first series of that name), NaN if absent. */
export async function metricValue(server: BenchServer, name: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  return Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
}

/** The report row every one-session benchmark shares: the session's pipeline ran once, whatever the crowd. */
export function pipelineRunsRow(pipelineRuns: number, where = ''): ResultRow {
  return {
    metric: `pipeline runs for the session${where}`,
    ours: String(pipelineRuns),
    reference: '1',
    ratio: '—',
    target: '1',
    pass: pipelineRuns === 1,
  };
}
