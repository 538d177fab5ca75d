import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { after, describe, it } from 'node:test';
import { encodePiece } from '../audio/continuous-encoder.js';
import { createEncoderPool } from '../audio/encoder-pool.js';
import { CANONICAL_RATE } from '../audio/pcm.js';
import { mp3ToPcm } from './mp3-pcm.js';

const pool = createEncoderPool({ size: 1 });
after(() => pool.close());

describe('mp3ToPcm (a piece generated on another node)', () => {
  it('gives back the canonical PCM of the service’s own MP3: same rate, length and tone', async () => {
    // One second of a 440 Hz tone at half scale, as canonical PCM.
    const pcm = new Int16Array(CANONICAL_RATE);
    for (let i = 0; i < pcm.length; i++)
      pcm[i] = Math.round(16384 * Math.sin((2 * Math.PI * 440 * i) / CANONICAL_RATE));
    const mp3: Uint8Array[] = [];
    for await (const bytes of encodePiece([pcm], pool.open())) mp3.push(bytes);
    const chunks: Buffer[] = [];
    for await (const chunk of mp3ToPcm(Readable.from(mp3))) chunks.push(chunk as Buffer);
    const bytes = Buffer.concat(chunks);
    const decoded = new Int16Array(bytes.buffer, bytes.byteOffset, bytes.length / 2);
    // Encoder delay and the last frame's padding: within two MP3 frames of the original length.
    assert.ok(Math.abs(decoded.length - pcm.length) <= 2 * 1152, `${decoded.length} samples`);
    let peak = 0;
    for (const s of decoded) peak = Math.max(peak, Math.abs(s));
    assert.ok(peak > 14000 && peak < 19000, `peak ${peak}`);
  });

  it('yields no audio from bytes that hold no MP3 frame (the decoder skips them)', async () => {
    let samples = 0;
    for await (const chunk of mp3ToPcm(Readable.from([Buffer.alloc(4096, 0x55)])))
      samples += (chunk as Buffer).length / 2;
    assert.equal(samples, 0);
  });
});
