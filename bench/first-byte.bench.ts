/**
 * One-shot first byte: `npm run bench:first-byte` (env: ALONE, 30 one-shots one after
 * another; CONCURRENT, 20 at once; ROUNDS, 3 rounds of them, after WARM_ROUNDS, 2, not counted: a
 * running server has compiled its paths for concurrent one-shots, a fresh one compiles them during
 * its first bursts — their last first bytes are printed).
 * The service (embedded defaults, a temporary DATA_DIR) answers `POST /api/tts/simple-generate`
 * with `direct_stream: true`; the time to the first MP3 byte is measured from the client. The
 * reference, in the same run and process as the client: the embedded engine itself (espeak-ng
 * wasm in a warm piscina thread) synthesising the same first sentence, plus the wasm LAME encode
 * of it — the work a first byte cannot avoid. Targets: p50 ≤ 100 ms alone, p99 ≤ 1 s with 20 at once.
 * Also one long sentence (~25 s of speech, just under the engine's 400-character cut) at a time
 * (LONG, 10 runs): its first byte must not wait for the whole sentence (p50 ≤ 100 ms as well).
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { createEncoderPool } from '../src/audio/encoder-pool.js';
import { createEspeakEngine } from '../src/audio/engines/espeak.engine.js';
import {
  api,
  percentile,
  report,
  runBench,
  serverNodeArgsFromProcess,
  serverEnvFromProcess,
  startServer,
  type BenchServer,
} from './lib/server.js';

const ALONE = Number(process.env.ALONE ?? 30);
const CONCURRENT = Number(process.env.CONCURRENT ?? 20);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const WARM_ROUNDS = Number(process.env.WARM_ROUNDS ?? 2);
const LONG = Number(process.env.LONG ?? 10);

const sentence = (n: number) => `This is one shot number ${n}, spoken at once.`;
/** One sentence of ~25 s of speech (under 400 characters: the engine synthesises it in one call). */
const longSentence = (n: number) =>
  `This is long one shot number ${n}, ` +
  'a single sentence that goes on and on, with a comma here and there, '.repeat(4) +
  'until it finally ends.';

/** Milliseconds from sending the request to the first body byte of an audio/mpeg answer. */
function firstByte(
  server: BenchServer,
  voiceId: string,
  n: number,
  agent: http.Agent,
  text = sentence(n),
): Promise<number> {
  const body = JSON.stringify({ text, voiceId, direct_stream: true });
  const url = new URL('/api/tts/simple-generate', server.url);
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const request = http.request(
      url,
      {
        method: 'POST',
        agent,
        headers: {
          authorization: `Bearer ${server.key}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (response) => {
        if (response.statusCode !== 200 || response.headers['content-type'] !== 'audio/mpeg') {
          let text = '';
          response.on('data', (c: Buffer) => (text += c.toString()));
          response.on('end', () => reject(new Error(`HTTP ${response.statusCode}: ${text.slice(0, 300)}`)));
          return;
        }
        let at: number | undefined;
        response.on('data', () => (at ??= performance.now() - started));
        response.on('end', () => (at === undefined ? reject(new Error('no audio')) : resolve(at)));
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}

/** The floor: the engine and encoder alone on the first sentence, warm, in this process. */
async function engineFloor(runs: number, text = sentence): Promise<number[]> {
  const engine = createEspeakEngine({ threads: 1 });
  const encoders = createEncoderPool({ size: 1 });
  const times: number[] = [];
  try {
    for (let n = 0; n < runs + 3; n++) {
      const started = performance.now();
      const encoder = encoders.open();
      let first: number | undefined;
      for await (const pcm of engine.synthesize(
        { text: text(n), voice: { engine: 'espeak', voice: 'en-us' }, speechRate: 1 },
        AbortSignal.timeout(30_000),
      )) {
        const mp3 = await encoder.encode(pcm);
        if (mp3.length > 0) first ??= performance.now() - started;
      }
      const tail = await encoder.finish();
      if (tail.length > 0) first ??= performance.now() - started;
      if (n >= 3 && first !== undefined) times.push(first); // three warm-ups
    }
  } finally {
    await engine.close();
    await encoders.close();
  }
  return times;
}

async function main(): Promise<number> {
  const floor = await engineFloor(ALONE);
  const longFloor = await engineFloor(LONG, longSentence);
  const server = await startServer(
    {
      RATE_LIMIT_MAX: '1000000',
      ...serverEnvFromProcess(),
    },
    serverNodeArgsFromProcess(),
  );
  try {
    const voice = await api<{ id: string }>(server, 'POST', '/api/voice', { name: 'bench narrator' });
    const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENT });
    for (let n = 0; n < 3; n++) await firstByte(server, voice.id, n, agent); // warm-up
    const alone: number[] = [];
    for (let n = 0; n < ALONE; n++) alone.push(await firstByte(server, voice.id, 100 + n, agent));
    const long: number[] = [];
    for (let n = 0; n < LONG; n++)
      long.push(await firstByte(server, voice.id, n, agent, longSentence(500 + n)));
    const burst = (round: number) =>
      Promise.all(
        Array.from({ length: CONCURRENT }, (_, i) =>
          firstByte(server, voice.id, 1000 * (round + 1) + i, agent),
        ),
      );
    const warmLast: number[] = [];
    for (let round = 0; round < WARM_ROUNDS; round++) warmLast.push(Math.max(...(await burst(round))));
    const together: number[] = [];
    for (let round = 0; round < ROUNDS; round++) together.push(...(await burst(WARM_ROUNDS + round)));
    agent.destroy();
    const fmt = (ms: number) => `${ms.toFixed(0)} ms`;
    if (WARM_ROUNDS > 0)
      console.log(`warm-up bursts (not counted): last first byte ${warmLast.map(fmt).join(', ')}`);
    console.log(
      `alone: p50 ${fmt(percentile(alone, 50))}, p99 ${fmt(percentile(alone, 99))}, max ${fmt(Math.max(...alone))} (${alone.length}); ` +
        `${CONCURRENT} at once: p50 ${fmt(percentile(together, 50))}, p99 ${fmt(percentile(together, 99))}, max ${fmt(Math.max(...together))} (${together.length}); ` +
        `engine+encoder floor p50 ${fmt(percentile(floor, 50))}; ` +
        `long sentence alone: p50 ${fmt(percentile(long, 50))}, max ${fmt(Math.max(...long))} (${long.length}), floor p50 ${fmt(percentile(longFloor, 50))}`,
    );
    const floor50 = percentile(floor, 50);
    const longFloor50 = percentile(longFloor, 50);
    return report('One-shot synthesis, first MP3 byte (embedded engine)', [
      {
        metric: 'first byte p50, one at a time',
        ours: fmt(percentile(alone, 50)),
        reference: `floor ${fmt(floor50)}`,
        ratio: `${(percentile(alone, 50) / floor50).toFixed(1)}×`,
        target: '≤ 100 ms',
        pass: percentile(alone, 50) <= 100,
      },
      {
        metric: `first byte p99, ${CONCURRENT} at once`,
        ours: fmt(percentile(together, 99)),
        reference: `floor ${fmt(floor50)}`,
        ratio: `${(percentile(together, 99) / floor50).toFixed(1)}×`,
        target: '≤ 1000 ms',
        pass: percentile(together, 99) <= 1000,
      },
      {
        metric: 'first byte p50, a 25-s sentence, one at a time',
        ours: fmt(percentile(long, 50)),
        reference: `floor ${fmt(longFloor50)}`,
        ratio: `${(percentile(long, 50) / longFloor50).toFixed(1)}×`,
        target: '≤ 100 ms',
        pass: percentile(long, 50) <= 100,
      },
    ]);
  } finally {
    await server.stop();
  }
}

runBench(main);
