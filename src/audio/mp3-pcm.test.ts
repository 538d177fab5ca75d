import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { rmsDbfs } from '../../test/helpers/audio-check.js';
import { encodePiece } from './continuous-encoder.js';
import { createEncoderPool } from './encoder-pool.js';
import { mp3ToPcm } from './mp3-pcm.js';
import { CANONICAL_RATE, MP3_FRAME_SAMPLES, concatPcm } from './pcm.js';

describe('mp3ToPcm', () => {
  it("gives back the service MP3's PCM at 44.1 kHz, within the encoder's delay and padding", async () => {
    const samples = 2 * CANONICAL_RATE;
    const tone = Int16Array.from({ length: samples }, (_, n) =>
      Math.round(8000 * Math.sin((2 * Math.PI * 440 * n) / CANONICAL_RATE)),
    );
    const encoders = createEncoderPool({ size: 1 });
    try {
      const mp3: Uint8Array[] = [];
      for await (const bytes of encodePiece([tone], encoders.open())) mp3.push(bytes);
      // Fed in uneven pieces, as a relayed stream arrives.
      const whole = Buffer.concat(mp3);
      const chunks = [whole.subarray(0, 1000), whole.subarray(1000, 5001), whole.subarray(5001)];
      const parts: Int16Array[] = [];
      for await (const pcm of mp3ToPcm(chunks)) parts.push(pcm);
      const decoded = concatPcm(parts);
      assert.ok(decoded.length >= samples, `${decoded.length} samples decoded of ${samples}`);
      assert.ok(
        decoded.length - samples < 2 * MP3_FRAME_SAMPLES,
        `${decoded.length - samples} extra samples`,
      );
      assert.ok(rmsDbfs(decoded) > -20, 'the tone is there');
    } finally {
      await encoders.close();
    }
  });

  it('fails on bytes that hold no MP3 audio', async () => {
    await assert.rejects(async () => {
      for await (const _ of mp3ToPcm([Buffer.alloc(4096, 7)]));
    });
  });
});
