/**
 * Pipeline benchmark: `npx tsx bench/pipeline.bench.ts [runs]`.
 * 1. In-process pipeline (espeak-ng synthesis + 22.05→44.1 kHz resampling in the synthesis
 *    worker, 320 kbps encoding in the encoder worker) on a ~300-word paragraph, as a realtime
 *    factor: seconds of audio per wall-clock second and per CPU second (all threads of the process).
 * 2. The encode stage alone (wasm LAME via the encoder pool) against the native `lame` CLI on the
 *    same raw PCM, both timed by wall clock, as a speed ratio.
 * Prints a Markdown table for docs/benchmarks.md. Median of `runs` (default 5) after one warm-up.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { encodePiece } from '../src/audio/continuous-encoder.js';
import { createEncoderPool, type EncoderPool } from '../src/audio/encoder-pool.js';
import type { SpeechEngine, SynthesisRequest } from '../src/audio/engines/engine.js';
import { createEspeakEngine } from '../src/audio/engines/espeak.engine.js';
import { CANONICAL_RATE, concatPcm, monoToStereo, pcmToBuffer } from '../src/audio/pcm.js';

const run = promisify(execFile);

const PARAGRAPH = `
The old lighthouse stood at the end of a narrow spit of land, where the river met the sea and the
wind never quite stopped. For more than a century its keepers had climbed the spiral stairs each
evening to light the lamp, polish the great lens, and watch the dark water for ships that might
need a warning. The last keeper, a quiet woman named Ellen, kept a journal of every storm she saw.
She wrote about the colour of the sky before the rain, the sound the glass made when the gusts
pushed against it, and the fishing boats that hurried home as the light faded. Her entries were
short, but they were careful, and over the years they became a kind of map of the weather itself.
When the lighthouse was finally automated, the journal was given to the town library, where it
sat on a shelf for decades before a student found it by accident. She was studying the climate of
the coast, and she realised that the notes described patterns no instrument had recorded at the
time. With the help of her professor, she compared the old entries with modern measurements and
discovered that the storms had grown stronger and more frequent, just as the keeper had suspected.
The study was published, the journal was scanned and shared online, and visitors began to arrive
at the lighthouse again, not for the view alone but to see where the story had begun. Today a
small museum occupies the keeper's cottage. Children press their faces against the glass cases,
reading the neat handwriting, and imagine the long nights spent watching the horizon. Outside, the
lamp still turns, guided by a computer now, but the people who live nearby say that on windy
evenings they can almost hear footsteps on the stairs, as if someone is still making sure the
light will shine for anyone lost at sea.`
  .replace(/\s+/g, ' ')
  .trim();

interface Timing {
  wall: number;
  cpu: number;
}

/** CPU seconds of waited-for child processes (Linux /proc, 10 ms ticks); NaN elsewhere. */
async function childCpuSeconds(): Promise<number> {
  try {
    const stat = await readFile('/proc/self/stat', 'utf8');
    // Fields after the parenthesised command name; cutime and cstime are fields 16 and 17.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[13]) + Number(fields[14])) / 100;
  } catch {
    return NaN;
  }
}

/** Wall time and CPU time (this process's threads, or its children with `children`). */
async function timed(fn: () => Promise<void>, children = false): Promise<Timing> {
  const cpu0 = process.cpuUsage();
  const child0 = await childCpuSeconds();
  const t0 = process.hrtime.bigint();
  await fn();
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  if (children) return { wall, cpu: (await childCpuSeconds()) - child0 };
  const cpu = process.cpuUsage(cpu0);
  return { wall, cpu: (cpu.user + cpu.system) / 1e6 };
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

async function drain(stream: AsyncIterable<Uint8Array>): Promise<number> {
  let bytes = 0;
  for await (const b of stream) bytes += b.length;
  return bytes;
}

async function synthesize(engine: SpeechEngine, req: SynthesisRequest): Promise<Int16Array> {
  const chunks: Int16Array[] = [];
  for await (const pcm of engine.synthesize(req, new AbortController().signal)) chunks.push(pcm);
  return concatPcm(chunks);
}

/** Feeds PCM in 100 ms chunks, as an engine would. */
function* chunks(pcm: Int16Array): Generator<Int16Array> {
  const step = CANONICAL_RATE / 10;
  for (let o = 0; o < pcm.length; o += step) yield pcm.slice(o, o + step);
}

async function main(): Promise<void> {
  const runs = Number(process.argv[2] ?? 5);
  const engine = createEspeakEngine({ threads: 1 });
  const pool: EncoderPool = createEncoderPool({ size: 1 });
  const dir = await mkdtemp(join(tmpdir(), 'pipeline-bench-'));
  try {
    const req: SynthesisRequest = {
      text: PARAGRAPH,
      voice: { engine: 'espeak', voice: 'en-us' },
      speechRate: 1,
    };
    const words = PARAGRAPH.split(' ').length;

    // Warm-up: worker threads start, wasm compiles, espeak loads its data.
    const pcm = await synthesize(engine, req);
    await drain(encodePiece(chunks(pcm), pool.open()));
    const audioSeconds = pcm.length / CANONICAL_RATE;

    const pipeline: Timing[] = [];
    for (let i = 0; i < runs; i++) {
      pipeline.push(
        await timed(
          async () =>
            void (await drain(
              encodePiece(engine.synthesize(req, new AbortController().signal), pool.open()),
            )),
        ),
      );
    }
    const encodeOnly: Timing[] = [];
    for (let i = 0; i < runs; i++)
      encodeOnly.push(await timed(async () => void (await drain(encodePiece(chunks(pcm), pool.open())))));

    const raw = join(dir, 'speech.raw');
    await writeFile(raw, pcmToBuffer(monoToStereo(pcm)));
    const lameArgs = [
      '-r',
      '-s',
      '44.1',
      '--bitwidth',
      '16',
      '-m',
      'j',
      '-b',
      '320',
      '--cbr',
      '--silent',
      raw,
      join(dir, 'lame.mp3'),
    ];
    const lame: Timing[] = [];
    for (let i = 0; i < runs + 1; i++) {
      const t = await timed(async () => void (await run('lame', lameArgs)), true);
      if (i > 0) lame.push(t); // first run warms the page cache
    }

    const rtf = (t: number): string => (audioSeconds / t).toFixed(0);
    const pWall = median(pipeline.map((t) => t.wall));
    const pCpu = median(pipeline.map((t) => t.cpu));
    const eWall = median(encodeOnly.map((t) => t.wall));
    const eCpu = median(encodeOnly.map((t) => t.cpu));
    const lWall = median(lame.map((t) => t.wall));
    const lCpu = median(lame.map((t) => t.cpu));

    console.log(
      `Machine: ${cpus()[0]?.model ?? 'unknown CPU'}, ${availableParallelism()} cores, Node ${process.version}`,
    );
    console.log(
      `Input: ${words} words → ${audioSeconds.toFixed(2)} s of speech; median of ${runs} runs after a warm-up\n`,
    );
    console.log('| stage | wall | realtime factor (wall) | CPU (all threads) | realtime factor (CPU) |');
    console.log('|---|---|---|---|---|');
    console.log(
      `| pipeline: espeak + resample + wasm LAME 320k | ${pWall.toFixed(3)} s | ${rtf(pWall)}× | ${pCpu.toFixed(3)} s | ${rtf(pCpu)}× |`,
    );
    console.log(
      `| encode only: wasm LAME 320k (encoder pool) | ${eWall.toFixed(3)} s | ${rtf(eWall)}× | ${eCpu.toFixed(3)} s | ${rtf(eCpu)}× |`,
    );
    console.log(
      `| encode only: native lame CLI (\`lame ${lameArgs.slice(0, 10).join(' ')}\`) | ${lWall.toFixed(3)} s | ${rtf(lWall)}× | ${lCpu.toFixed(2)} s | ${rtf(lCpu)}× |`,
    );
    console.log(
      `\nwasm encode speed / native lame speed: ${(lWall / eWall).toFixed(2)} (wall), ${(lCpu / eCpu).toFixed(2)} (CPU)`,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
    await pool.close();
    await engine.close();
  }
}

await main();
