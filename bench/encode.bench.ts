/**
 * MP3 encode stage against the native `lame` CLI: `npm run bench:encode [runs]`.
 * The same speech (the benchmarks' paragraph, synthesised once, ~2 min) encoded at the service's
 * settings (320 kbps CBR, 44.1 kHz, joint stereo, untagged) three ways, each timed by wall clock
 * and CPU: through the service's encoder pool with the native addon over libmp3lame and with the
 * wasm build, and by the `lame` CLI from Debian on the same PCM as a raw stereo file. Also checks
 * that the two builds wrote the same bytes. Exits 1 when the native build is slower than the CLI
 * (target ≥ 1.0×) or the bytes differ. Median of `runs` (default 5) after a warm-up.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { encodePiece } from '../src/audio/continuous-encoder.js';
import { createEncoderPool } from '../src/audio/encoder-pool.js';
import { createEspeakEngine } from '../src/audio/engines/espeak.engine.js';
import type { LameBuild } from '../src/audio/lame-stream.js';
import { nativeLameLoadError, nativeLameVersion } from '../src/audio/lame-stream.native.js';
import { CANONICAL_RATE, monoToStereo, pcmToBuffer } from '../src/audio/pcm.js';
import { chunks, median, PARAGRAPH, synthesize, timed, type Timing } from './lib/audio.js';
import { ensureDebianPackages, report, runBench, type ResultRow } from './lib/server.js';

const run = promisify(execFile);

/** Encodes `pcm` through an encoder pool of the given build; returns the bytes of the last run and its timings. */
async function encodeRuns(
  lame: LameBuild,
  pcm: Int16Array,
  runs: number,
): Promise<{ mp3: Buffer; timings: Timing[] }> {
  const pool = createEncoderPool({ size: 1, lame });
  try {
    const encodeOnce = async (): Promise<Buffer> => {
      const parts: Uint8Array[] = [];
      for await (const part of encodePiece(chunks(pcm), pool.open())) parts.push(part);
      return Buffer.concat(parts);
    };
    let mp3 = await encodeOnce(); // warm-up: the worker starts, wasm compiles
    const timings: Timing[] = [];
    for (let i = 0; i < runs; i++) timings.push(await timed(async () => void (mp3 = await encodeOnce())));
    return { mp3, timings };
  } finally {
    await pool.close();
  }
}

async function main(): Promise<number> {
  const runs = Number(process.argv[2] ?? 5);
  ensureDebianPackages({ lame: 'lame' });
  const nativeError = nativeLameLoadError();
  if (nativeError !== undefined) {
    console.error(
      `the native LAME addon did not load (${nativeError}): bash scripts/setup-debian.sh && npm ci builds it`,
    );
    return 1;
  }
  const engine = createEspeakEngine({ threads: 1 });
  const speech = await synthesize(engine, {
    text: PARAGRAPH,
    voice: { engine: 'espeak', voice: 'en-us' },
    speechRate: 1,
  }).finally(() => engine.close());
  const audioSeconds = speech.length / CANONICAL_RATE;

  const native = await encodeRuns('native', speech, runs);
  const wasm = await encodeRuns('wasm', speech, runs);

  const dir = await mkdtemp(join(tmpdir(), 'encode-bench-'));
  const lame: Timing[] = [];
  const lameArgs = ['-r', '-s', '44.1', '--bitwidth', '16', '-m', 'j', '-b', '320', '--cbr', '--silent'];
  try {
    const raw = join(dir, 'speech.raw');
    await writeFile(raw, pcmToBuffer(monoToStereo(speech)));
    for (let i = 0; i < runs + 1; i++) {
      const t = await timed(
        async () => void (await run('lame', [...lameArgs, raw, join(dir, 'lame.mp3')])),
        true,
      );
      if (i > 0) lame.push(t); // the first run warms the page cache
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }

  const wall = (t: Timing[]) => median(t.map((x) => x.wall));
  const cpu = (t: Timing[]) => median(t.map((x) => x.cpu));
  const fmt = (t: Timing[]) => `${wall(t).toFixed(3)} s wall, ${cpu(t).toFixed(2)} s CPU`;
  const speed = (t: Timing[]) => `${(audioSeconds / wall(t)).toFixed(0)}× realtime`;
  console.log(
    `Machine: ${cpus()[0]?.model ?? 'unknown CPU'}, ${availableParallelism()} cores, Node ${process.version}; LAME ${nativeLameVersion() ?? '?'}`,
  );
  console.log(`Input: ${audioSeconds.toFixed(1)} s of speech; median of ${runs} runs after a warm-up`);
  console.log(`native (encoder pool): ${fmt(native.timings)}, ${speed(native.timings)}`);
  console.log(`wasm   (encoder pool): ${fmt(wasm.timings)}, ${speed(wasm.timings)}`);
  console.log(`lame CLI (lame ${lameArgs.join(' ')}): ${fmt(lame)}, ${speed(lame)}`);

  const sameBytes = native.mp3.equals(wasm.mp3);
  const rows: ResultRow[] = [
    {
      metric: 'encode speed, native addon (pool) vs lame CLI (wall)',
      ours: speed(native.timings),
      reference: speed(lame),
      ratio: `${(wall(lame) / wall(native.timings)).toFixed(2)}×`,
      target: '≥ 1.0×',
      pass: wall(lame) / wall(native.timings) >= 1,
    },
    {
      metric: 'encode CPU, native addon (pool) vs lame CLI',
      ours: `${cpu(native.timings).toFixed(2)} s`,
      reference: `${cpu(lame).toFixed(2)} s`,
      ratio: `${(cpu(lame) / cpu(native.timings)).toFixed(2)}×`,
      target: 'report',
      pass: true,
    },
    {
      metric: 'encode speed, wasm build (pool) vs lame CLI (wall), the fallback',
      ours: speed(wasm.timings),
      reference: speed(lame),
      ratio: `${(wall(lame) / wall(wasm.timings)).toFixed(2)}×`,
      target: 'report',
      pass: true,
    },
    {
      metric: 'native and wasm bytes identical',
      ours: `${native.mp3.length} B`,
      reference: `${wasm.mp3.length} B`,
      ratio: sameBytes ? 'same' : 'differ',
      target: 'same',
      pass: sameBytes,
    },
  ];
  return report('MP3 encode stage (320 kbps CBR, 44.1 kHz stereo)', rows);
}

runBench(main);
