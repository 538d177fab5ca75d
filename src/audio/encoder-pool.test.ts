import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ffmpegErrors, probeAudio } from '../../test/helpers/audio-check.js';
import { isAppError } from '../errors/app-error.js';
import { createEncoderPool, type Mp3Encoder } from './encoder-pool.js';
import type { LameBuild } from './lame-stream.js';
import { nativeLameLoadError } from './lame-stream.native.js';

/** Every build this machine has: the same suite runs on each (lame-stream.test.ts requires native where libmp3lame-dev is installed). */
const builds: LameBuild[] = nativeLameLoadError() === undefined ? ['native', 'wasm'] : ['wasm'];

/** A tone with a little noise: not trivially compressible, fixed seed so runs agree. */
function signal(samples: number): Int16Array {
  const out = new Int16Array(samples);
  let seed = 12345;
  for (let i = 0; i < samples; i++) {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    out[i] = Math.round(8000 * Math.sin((2 * Math.PI * 330 * i) / 44100) + ((seed % 2001) - 1000));
  }
  return out;
}

async function encodeChunked(
  encoder: Mp3Encoder,
  pcm: Int16Array,
  sizes: readonly number[],
): Promise<Uint8Array> {
  const out: Uint8Array[] = [];
  for (let o = 0, k = 0; o < pcm.length; k++) {
    const n = sizes[k % sizes.length] ?? 1;
    out.push(await encoder.encode(pcm.slice(o, o + n)));
    o += n;
  }
  out.push(await encoder.finish());
  return Buffer.concat(out);
}

for (const lame of builds) {
  describe(`encoder pool (${lame} LAME)`, () => {
    const pool = createEncoderPool({ size: 2, lame });
    after(() => pool.close());

    it('writes untagged 320 kbps CBR, 44.1 kHz stereo MP3 that ffmpeg decodes cleanly', async () => {
      const mp3 = await encodeChunked(pool.open(), signal(44100 * 2), [11520]);
      assert.notEqual(Buffer.from(mp3.subarray(0, 3)).toString('latin1'), 'ID3');
      for (const tag of ['Xing', 'Info']) assert.equal(Buffer.from(mp3).indexOf(tag), -1, `no ${tag} tag`);
      assert.equal(await ffmpegErrors(mp3), '');
      const info = await probeAudio(mp3);
      assert.deepEqual([info.codec, info.sampleRate, info.channels, info.bitRate], ['mp3', 44100, 2, 320000]);
      assert.ok(
        info.durationSeconds >= 2 && info.durationSeconds < 2 + 0.052,
        `duration ${info.durationSeconds}`,
      );
    });

    it('is deterministic: the same PCM in different chunkings gives identical bytes', async () => {
      const pcm = signal(44100 * 3 + 77);
      const whole = await encodeChunked(pool.open(), pcm, [pcm.length]);
      for (const sizes of [[1152 * 10], [1000], [4410, 17, 3333, 1152]]) {
        assert.deepEqual(await encodeChunked(pool.open(), pcm, sizes), whole, `chunking ${sizes.join(',')}`);
      }
    });

    it('writes a stream to a file from PCM read from files, to the same bytes', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'encoder-file-'));
      try {
        const [a, b] = [signal(44100 + 301), signal(30000)];
        const gap = new Int16Array(7000);
        const expected = await encodeChunked(pool.open(), Int16Array.from([...a, ...gap, ...b]), [11520]);
        const [pathA, pathB, out] = ['a.pcm', 'b.pcm', 'out.mp3'].map((f) => join(dir, f)) as [
          string,
          string,
          string,
        ];
        await writeFile(pathA, a);
        await writeFile(pathB, b);
        const encoder = pool.openToFile(out);
        // Ranges as a growing file hands them over: uneven, whole samples.
        for (const [offset, length] of [
          [0, 2],
          [2, 40_000],
          [40_002, a.byteLength - 40_002],
        ] as const)
          await encoder.encodeRange(pathA, offset, length);
        await encoder.encode(gap);
        await encoder.encodeRange(pathB, 0, b.byteLength);
        const size = await encoder.finish();
        assert.deepEqual(new Uint8Array(await readFile(out)), new Uint8Array(expected));
        assert.equal(size, expected.length);
        assert.equal((await stat(out)).mode & 0o777, 0o600);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });

    it('fails a file stream whose PCM range is not there, and its worker goes on', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'encoder-file-'));
      try {
        await writeFile(join(dir, 'short.pcm'), signal(100));
        const encoder = pool.openToFile(join(dir, 'out.mp3'));
        await assert.rejects(encoder.encodeRange(join(dir, 'short.pcm'), 0, 400), /ends before byte 400/);
        await assert.rejects(pool.openToFile(join(dir, 'out2.mp3')).encodeRange(join(dir, 'none'), 0, 2));
        assert.ok((await encodeChunked(pool.open(), signal(2000), [1000])).length > 0);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });

    it('serves many streams at once, each with its own encoder', async () => {
      const pcm = signal(44100);
      const results = await Promise.all(
        Array.from({ length: 6 }, () => encodeChunked(pool.open(), pcm, [5000])),
      );
      for (const r of results) assert.deepEqual(r, results[0]);
    });

    it('encodes interactive streams on their own worker, to the same bytes, beside busy batch streams', async () => {
      const pcm = signal(44100 * 2);
      const batch = Array.from({ length: 4 }, () => pool.open());
      const busy = Promise.all(batch.map((encoder) => encodeChunked(encoder, signal(44100 * 20), [11520])));
      const interactive = pool.open({ interactive: true });
      assert.equal(pool.openStreams, 5);
      const quick = await encodeChunked(interactive, pcm, [4410]);
      assert.deepEqual(quick, await encodeChunked(pool.open(), pcm, [pcm.length]), 'the same encoding');
      await busy;
      assert.equal(pool.openStreams, 0);
    });

    it('starts a new stream while busy streams keep its worker saturated (not after they end)', async () => {
      // Busy streams that send their next chunk as soon as the last is answered, as live pipelines do.
      const CALLS = 120;
      let callsDone = 0;
      const busy = Promise.all(
        Array.from({ length: 8 }, async () => {
          const encoder = pool.open();
          for (let k = 0; k < CALLS; k++) {
            await encoder.encode(signal(11520));
            callsDone++;
          }
          await encoder.finish();
        }),
      );
      // Once they are under way, a new stream on the same workers: its first bytes must come while
      // the busy ones are still at work, not once they are done (the flow used to starve its start).
      while (callsDone < 40) await new Promise((resolve) => setImmediate(resolve));
      const late = pool.open();
      let bytes = 0;
      while (bytes === 0) bytes += (await late.encode(signal(11520))).length;
      const doneWhenLateAnswered = callsDone;
      late.abort();
      await busy;
      assert.ok(
        doneWhenLateAnswered < (8 * CALLS) / 2,
        `the new stream answered after ${doneWhenLateAnswered} of ${8 * CALLS} busy calls`,
      );
    });

    it('allows one call in flight and nothing after finish or abort', async () => {
      const enc = pool.open();
      const first = enc.encode(signal(4410));
      await assert.rejects(enc.encode(signal(4410)), /one call in flight/);
      await assert.rejects(enc.finish(), /one call in flight/);
      await first;
      await enc.finish();
      await assert.rejects(enc.encode(signal(10)), /finished or aborted/);

      const aborted = pool.open();
      const pending = aborted.encode(signal(44100));
      aborted.abort();
      await assert.rejects(pending, /aborted/);
      await assert.rejects(aborted.finish(), /finished or aborted/);
    });

    it('does not detach a view the caller still uses', async () => {
      const pcm = signal(20000);
      const enc = pool.open();
      await enc.encode(pcm.subarray(0, 10000));
      enc.abort();
      assert.equal(pcm.length, 20000);
    });

    it('rejects the pending call of a dead worker instead of hanging, then recovers', async () => {
      const victims = [pool.open(), pool.open()];
      // Answered once, their encoders hold state that dies with the worker: they cannot move.
      for (const v of victims) await v.encode(signal(4410));
      // 30 s of PCM keeps the worker busy well past the terminate() below.
      const pending = victims.map((v) =>
        assert.rejects(
          v.encode(signal(44100 * 30)),
          (err) => isAppError(err) && err.code === 'TTS_GENERATE_FAILED',
        ),
      );
      await pool.terminateWorkers();
      await Promise.all(pending);
      await assert.rejects(
        victims[0]?.encode(signal(10)) ?? Promise.resolve(),
        (err) => isAppError(err) && err.code === 'TTS_GENERATE_FAILED',
      );
      const fresh = await encodeChunked(pool.open(), signal(44100), [11520]);
      assert.equal(await ffmpegErrors(fresh), '');
    });

    it('moves a stream its lost worker never answered to the replacement, once', async () => {
      const pcm = signal(44100 * 20);
      const expected = await encodeChunked(pool.open(), pcm, [pcm.length]);
      const crashes: unknown[] = [];
      const watched = createEncoderPool({ size: 1, lame, onWorkerCrash: (err) => crashes.push(err) });
      try {
        // Opened, its first call sent, its worker killed before the answer: the same bytes anyway.
        const moved = watched.open();
        const first = moved.encode(pcm.slice());
        await watched.terminateWorkers();
        const bytes = Buffer.concat([await first, await moved.finish()]);
        assert.ok(Buffer.from(expected).equals(bytes), 'the moved stream encodes as if nothing happened');
        assert.equal(crashes.length, 1, 'the lost worker is reported');

        // A stream whose worker is lost a second time fails: a call that kills workers stops there.
        const unlucky = watched.open();
        const call = unlucky.encode(pcm.slice());
        await watched.terminateWorkers();
        await watched.terminateWorkers();
        await assert.rejects(call, (err) => isAppError(err) && err.code === 'TTS_GENERATE_FAILED');
        assert.equal(crashes.length, 3);
        assert.equal(watched.openStreams, 0);
      } finally {
        await watched.close();
      }
    });
  });
}
