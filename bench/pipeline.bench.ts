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
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { encodePiece } from '../src/audio/continuous-encoder.js';
import { createEncoderPool, type EncoderPool } from '../src/audio/encoder-pool.js';
import type { SynthesisRequest } from '../src/audio/engines/engine.js';
import { createEspeakEngine } from '../src/audio/engines/espeak.engine.js';
import { CANONICAL_RATE, monoToStereo, pcmToBuffer } from '../src/audio/pcm.js';
import { chunks, drain, median, PARAGRAPH, synthesize, timed, type Timing } from './lib/audio.js';

const run = promisify(execFile);

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
      `| pipeline: espeak + resample + ${pool.lame} LAME 320k | ${pWall.toFixed(3)} s | ${rtf(pWall)}× | ${pCpu.toFixed(3)} s | ${rtf(pCpu)}× |`,
    );
    console.log(
      `| encode only: ${pool.lame} LAME 320k (encoder pool) | ${eWall.toFixed(3)} s | ${rtf(eWall)}× | ${eCpu.toFixed(3)} s | ${rtf(eCpu)}× |`,
    );
    console.log(
      `| encode only: native lame CLI (\`lame ${lameArgs.slice(0, 10).join(' ')}\`) | ${lWall.toFixed(3)} s | ${rtf(lWall)}× | ${lCpu.toFixed(2)} s | ${rtf(lCpu)}× |`,
    );
    console.log(
      `\n${pool.lame} LAME encode speed / lame CLI speed: ${(lWall / eWall).toFixed(2)} (wall), ${(lCpu / eCpu).toFixed(2)} (CPU)`,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
    await pool.close();
    await engine.close();
  }
}

await main();
