/**
 * MP3 bytes back to canonical PCM (mono, 44.1 kHz) with mpg123 in wasm, gapless: for a node that
 * relays another node's MP3 of a piece but must answer in a format made from PCM.
 */
import { MPEGDecoder } from 'mpg123-decoder';
import { floatToPcm } from './pcm.js';
import { createResampler, type Resampler } from './resampler.js';

/** The PCM of `mp3` as it is decoded (the first channel; the service's MP3 is mono or L = R). */
export async function* mp3ToPcm(
  mp3: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
): AsyncIterable<Int16Array> {
  const decoder = new MPEGDecoder({ enableGapless: true });
  let resampler: Resampler | undefined;
  try {
    await decoder.ready;
    for await (const bytes of mp3) {
      const out = decoder.decode(bytes);
      if (out.errors.length > 0)
        throw new Error(`undecodable MP3: ${out.errors[0]?.message ?? 'decoder error'}`);
      const channel = out.channelData[0];
      if (out.samplesDecoded === 0 || channel === undefined) continue;
      resampler ??= await createResampler(out.sampleRate);
      const pcm = resampler.process(floatToPcm(channel.subarray(0, out.samplesDecoded)));
      if (pcm.length > 0) yield pcm;
    }
    // Bytes that decode to nothing are not the MP3 of a piece: fail rather than answer silence.
    if (resampler === undefined) throw new Error('the MP3 of the piece holds no decodable audio');
    const tail = resampler.flush();
    if (tail.length > 0) yield tail;
  } finally {
    resampler?.destroy();
    decoder.free();
  }
}
