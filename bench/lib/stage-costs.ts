/**
 * The pipeline's stage costs, one stream on one thread each: espeak-ng synthesis (with the
 * resampling in its worker) and 320 kbps encoding through the encoder pool, as CPU seconds per
 * second of audio, on the bench paragraph; and the limit they give: how many real-time streams
 * `cores` can synthesise and encode. bench:pipeline compares the whole pipeline with that limit,
 * bench:live-tasks the bursts of live tasks it can carry.
 */
import { encodePiece } from '../../src/audio/continuous-encoder.js';
import { createEncoderPool } from '../../src/audio/encoder-pool.js';
import type { SynthesisRequest } from '../../src/audio/engines/engine.js';
import { createEspeakEngine } from '../../src/audio/engines/espeak.engine.js';
import { CANONICAL_RATE } from '../../src/audio/pcm.js';
import { chunks, drain, median, PARAGRAPH, synthesize, timed, type Timing } from './audio.js';

export const STAGE_REQUEST: SynthesisRequest = {
  text: PARAGRAPH,
  voice: { engine: 'espeak', voice: 'en-us' },
  speechRate: 1,
};

export interface StageCosts {
  /** Seconds of speech of the paragraph. */
  audioSeconds: number;
  /** CPU-s per audio-second of synthesis + resampling, and of encoding. */
  synthCost: number;
  encodeCost: number;
  /** Wall seconds of one stream end to end (synthesis into encoding), median. */
  singleWall: number;
  /** CPU seconds of that, median. */
  singleCpu: number;
}

/** Measures the stage costs: medians of `runs` after a warm-up. */
export async function measureStageCosts(runs: number): Promise<StageCosts> {
  const engine = createEspeakEngine({ threads: 1 });
  const pool = createEncoderPool({ size: 1 });
  const synth: Timing[] = [];
  const encode: Timing[] = [];
  const single: Timing[] = [];
  try {
    const pcm = await synthesize(engine, STAGE_REQUEST); // warm-up: threads start, wasm compiles
    await drain(encodePiece(chunks(pcm), pool.open()));
    for (let i = 0; i < runs; i++)
      synth.push(await timed(async () => void (await synthesize(engine, STAGE_REQUEST))));
    for (let i = 0; i < runs; i++)
      encode.push(await timed(async () => void (await drain(encodePiece(chunks(pcm), pool.open())))));
    for (let i = 0; i < runs; i++)
      single.push(
        await timed(
          async () =>
            void (await drain(
              encodePiece(engine.synthesize(STAGE_REQUEST, new AbortController().signal), pool.open()),
            )),
        ),
      );
    const audioSeconds = pcm.length / CANONICAL_RATE;
    const perAudioSecond = (t: Timing[]) => median(t.map((x) => x.cpu)) / audioSeconds;
    return {
      audioSeconds,
      synthCost: perAudioSecond(synth),
      encodeCost: perAudioSecond(encode),
      singleWall: median(single.map((x) => x.wall)),
      singleCpu: median(single.map((x) => x.cpu)),
    };
  } finally {
    await pool.close();
    await engine.close();
  }
}

/** Real-time streams `cores` can synthesise and encode at these costs. */
export function stageLimit(costs: StageCosts, cores: number): number {
  return cores / (costs.synthCost + costs.encodeCost);
}
