import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeToPcm, ffmpegErrors, probeAudio, rmsDbfs } from '../../../test/helpers/audio-check.js';
import { CANONICAL_RATE } from '../pcm.js';
import { encodePcm } from './convert.js';
import { AUDIO_FORMATS } from './registry.js';

const SECONDS = 1.5;

/** A 440 Hz tone at 44.1 kHz, in chunks of uneven sizes (as generation delivers PCM). */
async function* tone(): AsyncIterable<Int16Array> {
  const total = Math.round(SECONDS * CANONICAL_RATE);
  for (let start = 0, n = 0; start < total; n++) {
    const size = Math.min(total - start, [4410, 777, 12_345, 1][n % 4] ?? 4410);
    const chunk = new Int16Array(size);
    for (let i = 0; i < size; i++)
      chunk[i] = Math.round(8000 * Math.sin((2 * Math.PI * 440 * (start + i)) / CANONICAL_RATE));
    start += size;
    yield chunk;
  }
}

async function collect(bytes: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const part of bytes) parts.push(part);
  return Buffer.concat(parts);
}

const EXPECTED: Record<string, string> = { wav: 'pcm_s16le', flac: 'flac', opus: 'opus' };

describe('audio formats from PCM', () => {
  for (const [id, codec] of Object.entries(EXPECTED)) {
    it(`${id}: ${codec} at the format's rate, decoding cleanly to the input's length`, async () => {
      const format = AUDIO_FORMATS.get(id);
      assert.ok(format !== undefined && format.source.kind === 'pcm');
      const bytes = await collect(encodePcm(tone(), format.sampleRate, format.source.encode));
      const info = await probeAudio(bytes);
      assert.equal(info.codec, codec);
      // Opus decoders always run at 48 kHz; the header records the input rate.
      assert.equal(info.sampleRate, id === 'opus' ? 48_000 : format.sampleRate);
      assert.equal(info.channels, 1);
      assert.equal(await ffmpegErrors(bytes), '');
      const decoded = await decodeToPcm(bytes, format.sampleRate);
      const seconds = decoded.length / format.sampleRate;
      assert.ok(Math.abs(seconds - SECONDS) < SECONDS * 0.01, `${seconds} s decoded, ${SECONDS} s encoded`);
      assert.ok(rmsDbfs(decoded) > -20, 'the tone is there');
    });
  }

  it('pcm: 24 kHz s16le mono, exactly the resampled length', async () => {
    const format = AUDIO_FORMATS.get('pcm');
    assert.ok(format !== undefined && format.source.kind === 'pcm');
    const bytes = await collect(encodePcm(tone(), format.sampleRate, format.source.encode));
    assert.equal(bytes.length, Math.round(SECONDS * 24_000) * 2);
    const samples = new Int16Array(new Uint8Array(bytes).buffer);
    assert.ok(rmsDbfs(samples) > -20);
  });

  it('sends no byte before the first audio: a synthesis failing first is still an error answer', async () => {
    for (const [id, format] of AUDIO_FORMATS) {
      if (format.source.kind !== 'pcm') continue;
      async function* failing(): AsyncIterable<Int16Array> {
        throw new Error('engine failed');
      }
      const bytes = encodePcm(failing(), format.sampleRate, format.source.encode)[Symbol.asyncIterator]();
      await assert.rejects(bytes.next(), /engine failed/, id);
    }
  });
});
