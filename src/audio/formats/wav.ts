/**
 * WAV (RIFF, 16-bit mono PCM) streamed while it is produced: its length is not known when the
 * header goes out, so the RIFF and data sizes are 0xFFFFFFFF, which readers take as "to the end
 * of the stream" (OpenAI's streamed WAV does the same).
 */
import type { AudioFormat } from './format.js';
import { OPENAI_RATE, rawPcm } from './pcm.js';

/** The 44-byte header of a WAV of unknown length: mono s16le at `rate`. */
export function wavHeader(rate: number): Uint8Array {
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(0xffffffff, 4);
  header.write('WAVE', 8, 'ascii');
  header.write('fmt ', 12, 'ascii');
  header.writeUInt32LE(16, 16); // fmt chunk size
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(rate, 24);
  header.writeUInt32LE(rate * 2, 28); // byte rate
  header.writeUInt16LE(2, 32); // block align
  header.writeUInt16LE(16, 34); // bits per sample
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(0xffffffff, 40);
  return header;
}

export const wav: AudioFormat = {
  id: 'wav',
  contentType: 'audio/wav',
  sampleRate: OPENAI_RATE,
  source: {
    kind: 'pcm',
    async *encode(pcm) {
      if (rawPcm.source.kind !== 'pcm') return;
      // The header goes out with the first audio, so that a synthesis failing before any audio
      // is still answered with an error instead of a header and a cut stream.
      let header: Uint8Array | undefined = wavHeader(OPENAI_RATE);
      for await (const bytes of rawPcm.source.encode(pcm)) {
        yield header === undefined ? bytes : Buffer.concat([header, bytes]);
        header = undefined;
      }
      if (header !== undefined) yield header;
    },
  },
};
