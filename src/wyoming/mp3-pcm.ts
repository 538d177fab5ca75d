/**
 * Canonical PCM from a piece's canonical MP3, for a Wyoming request whose task another node of a
 * cluster generates: that node's growing PCM is not readable here, but the piece's MP3 is relayed
 * live. The MP3 is the service's own 44.1 kHz encoding of mono audio on both channels, so the
 * decode's first channel is the canonical PCM (through a lossy round trip, encoder delay included).
 */
import { Readable } from 'node:stream';
import { MPEGDecoder } from 'mpg123-decoder';
import { floatToPcm, pcmToBuffer } from '../audio/pcm.js';

export function mp3ToPcm(mp3: Readable): Readable {
  async function* decode(): AsyncIterable<Buffer> {
    const decoder = new MPEGDecoder({ enableGapless: true });
    try {
      await decoder.ready;
      for await (const bytes of mp3 as AsyncIterable<Uint8Array>) {
        const out = decoder.decode(bytes);
        if (out.errors.length > 0)
          throw new Error(`undecodable MP3 (${out.errors[0]?.message ?? 'decoder error'})`);
        const left = out.channelData[0];
        if (out.samplesDecoded > 0 && left !== undefined)
          yield pcmToBuffer(floatToPcm(left.subarray(0, out.samplesDecoded)));
      }
    } finally {
      mp3.destroy();
      decoder.free();
    }
  }
  return Readable.from(decode(), { objectMode: false });
}
