import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { after, describe, it } from 'node:test';
import { concatPcm } from './pcm.js';
import {
  audioWithMarks,
  DEFAULT_ENGINE_TIMEOUTS,
  type SynthesisRequest,
  type TimingMark,
} from './engines/engine.js';
import { createEspeakEngine } from './engines/espeak.engine.js';
import { fliteProvider } from './engines/flite.provider.js';
import { BatchProcess, type BatchWorkerHost } from './batch-process.js';
import { encodePiece } from './continuous-encoder.js';
import { createEncoderPool, type EncoderPool } from './encoder-pool.js';

const TEXT =
  'The batch process speaks this text. It has a few sentences, and a clause or two; each one a piece. ' +
  'Its audio comes back through the bridged ports, in order, with its marks.';

const NICENESS = 19;
const host = new BatchProcess(NICENESS);
const remote = createEspeakEngine({ threads: 2, batchHost: host });
const local = createEspeakEngine({ threads: 2 });
after(async () => {
  await Promise.all([remote.close(), local.close()]);
  await host.close();
});

async function speak(
  engine: typeof remote,
  extra: Partial<SynthesisRequest> = {},
  signal = AbortSignal.timeout(60_000),
): Promise<{ pcm: Int16Array; marks: TimingMark[] }> {
  const chunks: Int16Array[] = [];
  const marks: TimingMark[] = [];
  const req: SynthesisRequest = {
    text: TEXT,
    voice: { engine: 'espeak', voice: 'en-us' },
    speechRate: 1,
    owner: 'account-a',
    ...extra,
  };
  for await (const chunk of audioWithMarks(engine, req, signal)) {
    chunks.push(chunk.pcm);
    marks.push(...chunk.marks);
  }
  return { pcm: concatPcm(chunks), marks };
}

/** Niceness of every thread of process `pid` (field 19 of each /proc/<pid>/task/<tid>/stat). */
async function threadNiceness(pid: number): Promise<number[]> {
  const tids = await readdir(`/proc/${pid}/task`);
  const stats = await Promise.all(tids.map((tid) => readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8')));
  return stats.map((stat) => Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]));
}

const summary = (marks: readonly TimingMark[]) => marks.map((m) => `${m.kind}:${m.textStart}-${m.textEnd}`);

describe('batch process', () => {
  it('speaks a batch call there with the audio and marks of this process', async () => {
    const sentBefore = host.runsSent;
    const there = await speak(remote);
    const here = await speak(local);
    assert.ok(host.runsSent > sentBefore, 'the pieces were sent to the process');
    assert.deepEqual(summary(there.marks), summary(here.marks));
    // espeak-ng's pieces vary by a few samples from call to call; the text's audio does not.
    assert.ok(
      Math.abs(there.pcm.length - here.pcm.length) < 44_100 * 0.05,
      `${there.pcm.length} vs ${here.pcm.length} samples`,
    );
    const sample = (m: TimingMark) => m.sample;
    assert.deepEqual(
      there.marks.map(sample),
      [...there.marks.map(sample)].sort((a, b) => a - b),
    );
  });

  it('hands the loudness stage from piece to piece there (a gain over the whole call)', async () => {
    const there = await speak(remote, { gainDb: -6 });
    const plain = await speak(remote);
    assert.deepEqual(summary(there.marks), summary(plain.marks));
    const peak = (pcm: Int16Array) => pcm.reduce((max, s) => Math.max(max, Math.abs(s)), 0);
    assert.ok(peak(there.pcm) < peak(plain.pcm) * 0.7, `peak ${peak(there.pcm)} vs ${peak(plain.pcm)}`);
  });

  it('keeps interactive pieces in this process', async () => {
    const sentBefore = host.runsSent;
    const { pcm } = await speak(remote, { interactive: true });
    assert.ok(pcm.length > 44_100);
    assert.equal(host.runsSent, sentBefore);
  });

  it('keeps the pieces of a call someone listens to in this process, from when they listen', async () => {
    const before = host.runsSent;
    await speak(remote, { listened: () => true });
    assert.equal(host.runsSent, before);
    let asked = 0;
    const { marks } = await speak(remote, { listened: () => ++asked > 1 });
    assert.ok(asked > 2, `asked for ${asked} pieces`);
    assert.equal(host.runsSent, before + 1, 'only the piece queued before the listener came');
    assert.deepEqual(summary(marks), summary((await speak(local)).marks));
  });

  it('keeps here only the pieces a listener is to hear soon, asked where each piece starts', async () => {
    const before = host.runsSent;
    const asked: number[] = [];
    // The listener will hear the first two seconds soon; the pieces after them can wait.
    const { marks } = await speak(remote, {
      listened: (at) => {
        asked.push(at);
        return at < 2;
      },
    });
    const sent = host.runsSent - before;
    const here = asked.filter((at) => at < 2).length;
    assert.ok(here >= 1 && sent >= 1, `${here} pieces kept here, ${sent} sent to the process`);
    assert.equal(sent, asked.length - here, 'every piece further ahead went to the process');
    assert.deepEqual(summary(marks), summary((await speak(local)).marks));
  });

  it(
    'runs every thread of the process at the lowest priority (Linux)',
    { skip: process.platform !== 'linux' },
    async () => {
      await speak(remote);
      const pid = host.pid;
      assert.ok(pid !== undefined, 'the process runs');
      const niceness = await threadNiceness(pid);
      assert.ok(niceness.length >= 4, `${niceness.length} threads`);
      assert.deepEqual(
        niceness.filter((n) => n !== NICENESS),
        [],
        `every thread at ${NICENESS}`,
      );
    },
  );

  it('fails the calls it had when the process dies, and starts again for the next', async () => {
    await speak(remote);
    const pid = host.pid;
    assert.ok(pid !== undefined);
    const long = 'A sentence that the process will not finish speaking, because it is killed. '.repeat(20);
    const call = speak(remote, { text: long });
    await new Promise((resolve) => setTimeout(resolve, 200));
    process.kill(pid, 'SIGKILL');
    await assert.rejects(call, (err: Error) => /batch process exited/.test(String(err.cause)));
    const again = await speak(remote);
    assert.ok(again.pcm.length > 44_100);
    assert.notEqual(host.pid, pid);
  });

  it('stops waiting on abort, and the process goes on with the next call', async () => {
    const long = 'A sentence the caller stops waiting for, long before it could be done. '.repeat(20);
    const controller = new AbortController();
    const call = speak(remote, { text: long }, controller.signal);
    setTimeout(() => controller.abort(new Error('gone')), 100);
    await assert.rejects(call);
    const next = await speak(remote);
    assert.ok(next.pcm.length > 44_100);
  });

  it('speaks Flite voices there too', async () => {
    const flite = fliteProvider.create({
      remoteEndpoints: {},
      timeouts: DEFAULT_ENGINE_TIMEOUTS,
      batchHost: host,
    });
    try {
      const sentBefore = host.runsSent;
      const binding = { engine: 'flite' as const, voice: 'slt' };
      const chunks: Int16Array[] = [];
      for await (const c of audioWithMarks(
        flite.engineFor(binding),
        { text: TEXT, voice: binding, speechRate: 1 },
        AbortSignal.timeout(60_000),
      ))
        chunks.push(c.pcm);
      assert.ok(concatPcm(chunks).length > 44_100 * 3);
      assert.ok(host.runsSent > sentBefore);
    } finally {
      await flite.close();
    }
  });

  it('refuses work once closed, and ends its process', async () => {
    const own = new BatchProcess();
    const engine = createEspeakEngine({ threads: 1, batchHost: own });
    try {
      await speak(engine);
      const pid = own.pid;
      assert.ok(pid !== undefined);
      await own.close();
      assert.throws(() => process.kill(pid, 0), { code: 'ESRCH' });
      await assert.rejects(speak(engine));
    } finally {
      await engine.close();
    }
  });

  it('encodes a batch stream there to the bytes this process makes; interactive ones stay here', async () => {
    const pcm = (await speak(local)).pcm;
    const encode = async (pool: EncoderPool, interactive = false) => {
      const parts: Uint8Array[] = [];
      const chunks = [pcm.slice(0, 30_000), pcm.slice(30_000)];
      for await (const mp3 of encodePiece(chunks, pool.open({ interactive }))) parts.push(mp3);
      return Buffer.concat(parts);
    };
    const there = createEncoderPool({ size: 1, batchHost: host });
    const here = createEncoderPool({ size: 1 });
    try {
      const remoteBytes = await encode(there);
      assert.ok(remoteBytes.length > 10_000);
      assert.deepEqual(remoteBytes, await encode(here));
      assert.deepEqual(await encode(there, true), remoteBytes);
      assert.equal(there.openStreams, 0);
      assert.ok(there.encoded.audioSeconds > 0, 'the remote worker reports what it encoded');
    } finally {
      await Promise.all([there.close(), here.close()]);
    }
  });

  it('encodes a stream someone listens to in this process', async () => {
    let started = 0;
    const counting: BatchWorkerHost = {
      startWorker: (url, data) => {
        started++;
        return host.startWorker(url, data);
      },
    };
    const pool = createEncoderPool({ size: 1, batchHost: counting });
    const pcm = new Int16Array(44_100).fill(1000);
    try {
      assert.equal(pool.hosted(), true);
      assert.equal(pool.hosted({ listened: true }), false);
      const listened = pool.open({ listened: true });
      await listened.encode(pcm.slice());
      assert.ok((await listened.finish()).length > 0);
      assert.equal(started, 0, 'no worker of the batch process');
      const batch = pool.open();
      await batch.encode(pcm.slice());
      assert.ok((await batch.finish()).length > 0);
      assert.equal(started, 1);
    } finally {
      await pool.close();
    }
  });

  it('fails the streams of a batch process that died, and encodes again after', async () => {
    const crashes: unknown[] = [];
    const pool = createEncoderPool({ size: 1, batchHost: host, onWorkerCrash: (err) => crashes.push(err) });
    try {
      const encoder = pool.open();
      const pcm = new Int16Array(44_100).fill(1000);
      assert.ok((await encoder.encode(pcm.slice())).length >= 0);
      const pid = host.pid;
      assert.ok(pid !== undefined);
      process.kill(pid, 'SIGKILL');
      await assert.rejects(encoder.encode(pcm.slice()));
      assert.equal(crashes.length, 1);
      const again = pool.open();
      await again.encode(pcm.slice());
      assert.ok((await again.finish()).length > 0);
    } finally {
      await pool.close();
    }
  });
});
