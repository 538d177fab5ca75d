import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  bufferToPcm,
  CANONICAL_RATE,
  concatPcm,
  floatToPcm,
  monoToStereo,
  pcmToBuffer,
  pcmToFloat,
  silence,
} from './pcm.js';

describe('pcm', () => {
  it('silence has exactly round(seconds × 44100) zero samples', () => {
    assert.equal(CANONICAL_RATE, 44100);
    assert.equal(silence(0.5).length, 22050);
    assert.equal(silence(1 / 3).length, 14700);
    assert.equal(silence(0.00001).length, 0);
    assert.equal(silence(0.00002).length, 1);
    assert.equal(silence(-1).length, 0);
    assert.ok(silence(0.1).every((s) => s === 0));
  });

  it('converts between Int16Array and Buffer without copying', () => {
    const pcm = Int16Array.from([1, -2, 32767, -32768]);
    const buf = pcmToBuffer(pcm);
    assert.equal(buf.buffer, pcm.buffer);
    assert.deepEqual([...buf], [1, 0, 0xfe, 0xff, 0xff, 0x7f, 0x00, 0x80]);
    const back = bufferToPcm(buf);
    assert.equal(back.buffer, pcm.buffer);
    assert.deepEqual([...back], [1, -2, 32767, -32768]);
  });

  it('copies only misaligned bytes and rejects odd byte counts', () => {
    const raw = Buffer.from([0, 1, 0, 2, 0]);
    assert.deepEqual([...bufferToPcm(raw.subarray(1, 5))], [1, 2]);
    assert.throws(() => bufferToPcm(raw.subarray(0, 3)), RangeError);
  });

  it('interleaves mono into equal stereo channels', () => {
    assert.deepEqual([...monoToStereo(Int16Array.from([1, -5, 7]))], [1, 1, -5, -5, 7, 7]);
  });

  it('converts floats with clipping and back', () => {
    assert.deepEqual(
      [...floatToPcm(Float32Array.from([0, 0.5, -1, 1.5, -2]))],
      [0, 16384, -32768, 32767, -32768],
    );
    assert.deepEqual([...pcmToFloat(Int16Array.from([16384, -32768]))], [0.5, -1]);
    assert.deepEqual(
      [...concatPcm([Int16Array.from([1]), new Int16Array(0), Int16Array.from([2, 3])])],
      [1, 2, 3],
    );
  });
});
