/**
 * Whole embedded pipeline: `npm run bench:pipeline [runs]` (also `npm run bench`).
 * 1. Stage costs, one stream on one thread each, on a ~300-word paragraph: espeak-ng synthesis
 *    (with the 22.05 → 44.1 kHz resampling in the synthesis worker) and 320 kbps encoding through
 *    the encoder pool (the native LAME addon when it loads, else wasm), as CPU seconds per second
 *    of audio (all threads of the process), and the pipeline of both for one stream.
 * 2. All cores busy: synthesis threads and encoder workers one per core, 4 streams per core fed
 *    as the service does (sentence by sentence through `encodePiece`); seconds of audio produced
 *    per wall-clock second.
 * The reference is the limit computed from the stage costs of the same run: cores ÷ (CPU-s of
 * synthesis + encoding per audio-second). Target ≥ 0.85× of it; exits 1 below. Medians of `runs`
 * (default 5) after a warm-up.
 */
import { availableParallelism, cpus } from 'node:os';
import { encodePiece } from '../src/audio/continuous-encoder.js';
import { createEncoderPool } from '../src/audio/encoder-pool.js';
import { createEspeakEngine } from '../src/audio/engines/espeak.engine.js';
import { resolveLameBuild } from '../src/audio/lame-stream.js';
import { drain, median, PARAGRAPH, timed, type Timing } from './lib/audio.js';
import { report, runBench } from './lib/server.js';
import { measureStageCosts, STAGE_REQUEST, stageLimit } from './lib/stage-costs.js';

async function main(): Promise<number> {
  const runs = Number(process.argv[2] ?? 5);
  const cores = availableParallelism();

  // 1. Stage costs, one thread each.
  const costs = await measureStageCosts(runs);
  const { audioSeconds, synthCost, encodeCost } = costs;
  const lame = resolveLameBuild('auto');

  // 2. All cores: one synthesis thread and one encoder worker per core, 4 streams per core.
  const streams = 4 * cores;
  const wide = createEspeakEngine({ threads: cores });
  const widePool = createEncoderPool({ size: cores });
  const allCores: Timing[] = [];
  try {
    const everyStream = () =>
      Promise.all(
        Array.from({ length: streams }, () =>
          drain(encodePiece(wide.synthesize(STAGE_REQUEST, new AbortController().signal), widePool.open())),
        ),
      );
    await everyStream(); // warm-up: every thread started
    for (let i = 0; i < Math.max(1, Math.ceil(runs / 2)); i++)
      allCores.push(await timed(async () => void (await everyStream())));
  } finally {
    await widePool.close();
    await wide.close();
  }

  const limit = stageLimit(costs, cores);
  const measured = (streams * audioSeconds) / median(allCores.map((x) => x.wall));
  const singleWall = costs.singleWall;
  console.log(
    `Machine: ${cpus()[0]?.model ?? 'unknown CPU'}, ${cores} cores, Node ${process.version}; ${lame} LAME`,
  );
  console.log(
    `Input: ${PARAGRAPH.split(' ').length} words → ${audioSeconds.toFixed(1)} s of speech; medians of ${runs} runs`,
  );
  console.log(
    `stage costs: synthesis + resampling ${(synthCost * 1000).toFixed(2)} ms CPU per audio-second (${(1 / synthCost).toFixed(0)}× realtime per CPU-s), ` +
      `encoding ${(encodeCost * 1000).toFixed(2)} ms (${(1 / encodeCost).toFixed(0)}×); ` +
      `one stream end to end ${(audioSeconds / singleWall).toFixed(0)}× realtime (wall), ${(audioSeconds / costs.singleCpu).toFixed(0)}× per CPU-s`,
  );
  console.log(
    `all cores: ${streams} streams at once → ${measured.toFixed(0)} s of audio per second; limit from the stage costs ${limit.toFixed(0)} s/s`,
  );
  return report('Whole embedded pipeline, all cores busy', [
    {
      metric: `audio seconds per second, ${streams} streams on ${cores} cores`,
      ours: `${measured.toFixed(0)}×`,
      reference: `limit ${limit.toFixed(0)}×`,
      ratio: `${(measured / limit).toFixed(2)}×`,
      target: '≥ 0.85× the limit',
      pass: measured / limit >= 0.85,
    },
    {
      metric: 'one stream end to end (wall)',
      ours: `${(audioSeconds / singleWall).toFixed(0)}× realtime`,
      reference: '—',
      ratio: '—',
      target: 'report',
      pass: true,
    },
  ]);
}

runBench(main);
