import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  decodeToPcm,
  ffmpegErrors,
  probeAudio,
  rmsDbfs,
  silentRuns,
  type SampleRange,
} from '../../test/helpers/audio-check.js';
import { encodeContinuous, encodePiece, type ContinuousPiece } from './continuous-encoder.js';
import { createEncoderPool } from './encoder-pool.js';
import { createEspeakEngine } from './engines/espeak.engine.js';
import { concatPcm, samplesFor, silence } from './pcm.js';

const pool = createEncoderPool({ size: 1 });
const espeak = createEspeakEngine({ threads: 1 });
after(async () => {
  await pool.close();
  await espeak.close();
});

const TEXTS = [
  'The quick brown fox jumps over the lazy dog.',
  'A second voice answers, a little later.',
  'And the third piece closes the dialogue.',
];
const INTERVALS = [0.5, 1.0];
let speech: Int16Array[] = [];

before(async () => {
  speech = [];
  for (const text of TEXTS) {
    const chunks: Int16Array[] = [];
    for await (const pcm of espeak.synthesize(
      { text, voice: { engine: 'espeak', voice: 'en-us' }, speechRate: 1 },
      new AbortController().signal,
    )) {
      chunks.push(pcm);
    }
    speech.push(concatPcm(chunks));
  }
});

/** Splits PCM into chunks of the given sizes (cycled), to feed the same audio differently. */
function* chunked(pcm: Int16Array, sizes: readonly number[]): Generator<Int16Array> {
  for (let o = 0, k = 0; o < pcm.length; k++) {
    const n = sizes[k % sizes.length] ?? 1;
    yield pcm.slice(o, o + n);
    o += n;
  }
}

function pieces(sizes: readonly number[]): ContinuousPiece[] {
  return speech.map((pcm, i) => ({ pcm: chunked(pcm, sizes), silenceAfterSeconds: INTERVALS[i] ?? 7 }));
}

async function collect(stream: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const b of stream) parts.push(b);
  return Buffer.concat(parts);
}

describe('continuous encoder', () => {
  it('joins 3 pieces and their silences into one clean MP3 of the right length', async () => {
    const mp3 = await collect(encodeContinuous(pieces([4096]), pool.open()));
    assert.equal(await ffmpegErrors(mp3), '');
    const info = await probeAudio(mp3);
    assert.deepEqual([info.sampleRate, info.channels, info.bitRate], [44100, 2, 320000]);
    // The last piece's interval (7 s above) must not be added: no silence after the last piece.
    const expected = speech.reduce((s, p) => s + p.length, 0) / 44100 + INTERVALS[0]! + INTERVALS[1]!;
    const extra = info.durationSeconds - expected;
    assert.ok(extra >= 0 && extra <= 0.052, `duration ${info.durationSeconds}, expected ${expected}`);
  });

  it('keeps speech audible and puts silent gaps of the expected length between pieces', async () => {
    const mp3 = await collect(encodeContinuous(pieces([22050]), pool.open()));
    const decoded = await decodeToPcm(mp3);
    const source = concatPcm([
      speech[0]!,
      silence(INTERVALS[0]!),
      speech[1]!,
      silence(INTERVALS[1]!),
      speech[2]!,
    ]);
    const win = samplesFor(0.02);

    // Each piece's span is clearly non-silent in the decoded stream.
    let at = 0;
    for (const [i, p] of speech.entries()) {
      assert.ok(rmsDbfs(decoded, at, at + p.length) > -35, `piece ${i} audible`);
      at += p.length + samplesFor(INTERVALS[i] ?? 0);
    }

    // The silent stretch around each join has the length it has in the source (espeak's own
    // pauses plus the interval), within two analysis windows; the encoder delay only shifts it.
    const gaps = (pcm: Int16Array): SampleRange[] =>
      silentRuns(pcm, win, -60).filter((r) => r.end - r.start >= samplesFor(0.4));
    const want = gaps(source);
    const got = gaps(decoded);
    assert.equal(want.length, 2, 'source has two long gaps');
    assert.equal(got.length, 2, `decoded has two long gaps: ${JSON.stringify(got)}`);
    for (const [i, w] of want.entries()) {
      const g = got[i]!;
      assert.ok(w.end - w.start >= samplesFor(INTERVALS[i]!) - 2 * win, 'gap at least the interval');
      assert.ok(
        Math.abs(g.end - g.start - (w.end - w.start)) <= 2 * win,
        `gap ${i}: ${g.end - g.start} vs ${w.end - w.start}`,
      );
      assert.ok(Math.abs(g.start - w.start) <= 3 * win, `gap ${i} position: ${g.start} vs ${w.start}`);
    }
  });

  it('gives identical bytes whatever the input chunking', async () => {
    const a = await collect(encodeContinuous(pieces([100000]), pool.open()));
    const b = await collect(encodeContinuous(pieces([1, 999, 4410, 33333]), pool.open()));
    assert.deepEqual(b, a);
  });

  it('encodes a single piece without trailing silence', async () => {
    const mp3 = await collect(encodePiece([speech[0]!], pool.open()));
    const info = await probeAudio(mp3);
    const extra = info.durationSeconds - speech[0]!.length / 44100;
    assert.ok(extra >= 0 && extra <= 0.052, `extra ${extra}`);
  });

  it('aborts the encoder when the signal fires or a piece fails', async () => {
    const ac = new AbortController();
    const reason = new Error('client went away');
    const stream = encodeContinuous(pieces([4096]), pool.open(), ac.signal);
    let n = 0;
    await assert.rejects(
      (async () => {
        for await (const _ of stream) if (++n === 2) ac.abort(reason);
      })(),
      (err) => err === reason,
    );

    async function* broken(): AsyncIterable<Int16Array> {
      yield speech[0]!;
      throw new Error('engine broke');
    }
    const enc = pool.open();
    await assert.rejects(
      collect(encodeContinuous([{ pcm: broken(), silenceAfterSeconds: 0 }], enc)),
      /engine broke/,
    );
    await assert.rejects(enc.encode(new Int16Array(10)), /finished or aborted/);
  });
});
