/** Raw PCM as OpenAI's `pcm` format: 24 kHz, 16-bit signed little-endian, mono, no header. */
import type { AudioFormat } from './format.js';

/** The rate of OpenAI's speech formats other than MP3 (its `pcm` is defined at 24 kHz). */
export const OPENAI_RATE = 24_000;

/** s16 samples as little-endian bytes (a copy: the caller's array may be reused). */
function littleEndian(samples: Int16Array): Uint8Array {
  const bytes = Buffer.alloc(samples.length * 2);
  for (let i = 0; i < samples.length; i++) bytes.writeInt16LE(samples[i] ?? 0, i * 2);
  return bytes;
}

export const rawPcm: AudioFormat = {
  id: 'pcm',
  contentType: 'audio/pcm',
  sampleRate: OPENAI_RATE,
  source: {
    kind: 'pcm',
    async *encode(pcm) {
      for await (const samples of pcm) if (samples.length > 0) yield littleEndian(samples);
    },
  },
};
