/** The PCM of a piece (canonical 44.1 kHz) in a format that encodes PCM: resampled, then encoded. */
import { CANONICAL_RATE } from '../pcm.js';
import { createResampler } from '../resampler.js';
import type { PcmEncoder } from './format.js';

/** `pcm` (44.1 kHz mono s16) resampled to `rate` and encoded by `encode`, chunk by chunk. */
export async function* encodePcm(
  pcm: AsyncIterable<Int16Array>,
  rate: number,
  encode: PcmEncoder,
): AsyncIterable<Uint8Array> {
  const resampler = await createResampler(CANONICAL_RATE, rate);
  async function* resampled(): AsyncIterable<Int16Array> {
    for await (const chunk of pcm) {
      const out = resampler.process(chunk);
      if (out.length > 0) yield out;
    }
    const tail = resampler.flush();
    if (tail.length > 0) yield tail;
  }
  try {
    yield* encode(resampled());
  } finally {
    resampler.destroy();
  }
}
