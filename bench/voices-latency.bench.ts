/**
 * First audio of each built-in voice, in process: `npx tsx bench/voices-latency.bench.ts` (env:
 * RUNS, 20 per voice and text, after 3 not counted that warm the threads). For every espeak
 * default and Flite voice, the time from the engine call to its first PCM chunk of a short
 * sentence and of a long first sentence (Flite cuts that at a clause boundary), as a one-shot
 * (interactive) through the engine registry the service uses; and the CPU time of speaking the
 * short sentence's first piece, which the load of a shared machine does not change. The one-shot first-byte target
 * (alone, p50 ≤ 100 ms from the client) also holds the HTTP round trip and the first MP3 frame:
 * a voice fit to be the default leaves room for them.
 */
import { performance } from 'node:perf_hooks';
import { createEngineRegistry, type VoiceBinding } from '../src/audio/engines/engine-registry.js';

const RUNS = Number(process.env.RUNS ?? 20);
const WARM = 3;

// The sentence of bench:first-byte's one-shots.
const SHORT = 'This is one shot number 5, spoken at once.';
/** The short sentence's first piece as Flite cuts it. */
const FIRST_PIECE = 'This is one shot number 5,';
const LONG =
  'When the committee finally met on Thursday afternoon after weeks of delays and a great many ' +
  'letters it agreed that the old bridge over the river would be repaired before the winter.';

const VOICES: VoiceBinding[] = [
  { engine: 'espeak', voice: 'en-us' },
  { engine: 'flite', voice: 'rms' },
  { engine: 'flite', voice: 'kal16' },
  { engine: 'flite', voice: 'slt' },
  { engine: 'flite', voice: 'awb' },
  { engine: 'flite', voice: 'kal' },
];

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/** CPU milliseconds (every thread of the process) of one whole call: the load-independent cost. */
async function cpuMs(voice: VoiceBinding, text: string): Promise<number> {
  const before = process.cpuUsage();
  await firstAudioMs(voice, text);
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000;
}

async function firstAudioMs(voice: VoiceBinding, text: string): Promise<number> {
  const engine = registry.engineFor(voice);
  const started = performance.now();
  let first: number | undefined;
  // Read to the end: a call left running would hold a thread during the next one.
  for await (const chunk of engine.synthesize(
    { text, voice, speechRate: 1, interactive: true },
    new AbortController().signal,
  )) {
    if (chunk.length > 0) first ??= performance.now() - started;
  }
  if (first === undefined) throw new Error('no audio');
  return first;
}

const registry = createEngineRegistry({ remoteEndpoints: {} });
try {
  console.log(`first audio (ms), ${RUNS} runs each, one at a time`);
  console.log(
    'voice            short p50  short p95   long p50   long p95  first-piece CPU p50 (all threads)',
  );
  for (const voice of VOICES) {
    const row: string[] = [];
    for (const text of [SHORT, LONG]) {
      for (let i = 0; i < WARM; i++) await firstAudioMs(voice, text).catch(() => 0);
      const times: number[] = [];
      for (let i = 0; i < RUNS; i++) times.push(await firstAudioMs(voice, text).catch(() => NaN));
      times.sort((a, b) => a - b);
      row.push(percentile(times, 50).toFixed(1).padStart(10), percentile(times, 95).toFixed(1).padStart(10));
    }
    const cpu: number[] = [];
    for (let i = 0; i < RUNS; i++) cpu.push(await cpuMs(voice, FIRST_PIECE));
    cpu.sort((a, b) => a - b);
    row.push(percentile(cpu, 50).toFixed(1).padStart(10));
    console.log(`${`${voice.engine}:${voice.voice}`.padEnd(16)} ${row.join(' ')}`);
  }
} finally {
  await registry.close();
}
