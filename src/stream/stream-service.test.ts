/**
 * Stream sessions end to end below HTTP: the real piece store (FsPieceAudioStore over FsGrowingFile,
 * fed with sine PCM over time), the real encoder pool and continuous encoder, the real session
 * cache on disk; only the task lookup is an in-memory table.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, afterEach, beforeEach, describe, test } from 'node:test';
import v8 from 'node:v8';
import vm from 'node:vm';
import { encodeContinuous } from '../audio/continuous-encoder.js';
import { createEncoderPool } from '../audio/encoder-pool.js';
import { CANONICAL_RATE } from '../audio/pcm.js';
import { AppError, isAppError } from '../errors/app-error.js';
import { runGrowingFileFolder } from '../storage/growing-file.fs.js';
import { FsPieceAudioStore } from '../tasks/piece-audio.fs.js';
import type { PieceState } from '../tasks/piece-audio.js';
import type { StreamTaskLookup, StreamTaskView } from '../tasks/stream-view.js';
import { MemoryTaskEvents } from '../tasks/queue/task-events.memory.js';
import { pcmChunks } from '../audio/pcm-stream.js';
import {
  createStreamService,
  type StreamRequest,
  type StreamResponse,
  type StreamService,
  type StreamSessionBounds,
} from './stream-service.js';

const pool = createEncoderPool({ size: 1 });
after(() => pool.close());

/** A sine tone of `seconds` at `hz`, canonical PCM. */
function sine(seconds: number, hz: number): Int16Array {
  const pcm = new Int16Array(Math.round(seconds * CANONICAL_RATE));
  for (let n = 0; n < pcm.length; n++)
    pcm[n] = Math.round(8000 * Math.sin((2 * Math.PI * hz * n) / CANONICAL_RATE));
  return pcm;
}

async function collect(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of stream) parts.push(chunk as Buffer);
  return Buffer.concat(parts);
}

/** Reads until the stream fails; returns what arrived and the error. */
async function collectUntilError(stream: Readable): Promise<{ bytes: Buffer; error: unknown }> {
  const parts: Buffer[] = [];
  try {
    for await (const chunk of stream) parts.push(chunk as Buffer);
  } catch (error) {
    return { bytes: Buffer.concat(parts), error };
  }
  return { bytes: Buffer.concat(parts), error: undefined };
}

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

/** The MP3 the stream must be: the same PCM through a fresh encoder, in one go. */
async function expectedMp3(pieces: readonly Int16Array[], intervals: readonly number[]): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  const input = pieces.map((pcm, i) => ({ pcm: [pcm], silenceAfterSeconds: intervals[i] ?? 0 }));
  for await (const b of encodeContinuous(input, pool.open())) parts.push(b);
  return Buffer.concat(parts);
}

/** A task table, the real piece store, and a generator that writes pieces over time. */
class Fixture {
  readonly events = new MemoryTaskEvents();
  readonly states = new Map<string, PieceState>();
  readonly views = new Map<string, StreamTaskView>();
  readonly store: FsPieceAudioStore;
  readonly tasks: StreamTaskLookup;
  service!: StreamService;

  constructor(readonly dir: string) {
    this.store = new FsPieceAudioStore(join(dir, 'work'), this.events, async (taskId, idx) => ({
      piece: this.states.get(`${taskId}/${String(idx)}`) ?? 'waiting',
      taskUnfinished: true,
    }));
    const streamView = async (id: string) => {
      const view = this.views.get(id);
      if (view === undefined) throw new AppError('GENERATE_NOT_FOUND', `task ${id} not found`);
      return structuredClone(view);
    };
    this.tasks = {
      streamView,
      liveStreamView: streamView,
      streamUrl: (id, token) => `http://test/api/tts/generate/${id}/stream.mp3?auth=${token}`,
      exists: async (id) => this.views.has(id),
    };
  }

  start(idleReclaimMs = 60_000, bounds?: StreamSessionBounds): StreamService {
    this.service = createStreamService({
      bounds,
      tasks: this.tasks,
      pieces: this.store,
      encoders: pool,
      cacheFiles: runGrowingFileFolder(join(this.dir, 'stream-cache')),
      idleReclaimMs,
      events: this.events,
    });
    return this.service;
  }

  addTask(
    id: string,
    intervals: readonly number[],
    status: StreamTaskView['status'] = 'processing',
    accountId = 'account-1',
  ): StreamTaskView {
    const view: StreamTaskView = {
      id,
      accountId,
      status,
      authToken: `token-${id}`,
      audioUrl: null,
      workerUrl: null,
      pieces: intervals.map((interval, idx) => ({
        idx,
        interval,
        status: 'pending',
        audioUrl: null,
      })),
    };
    this.views.set(id, view);
    return view;
  }

  /** Writes piece `idx` in chunks of `chunk` samples, `delayMs` apart; `failAfter` chunks then fails. */
  async generatePiece(
    taskId: string,
    idx: number,
    pcm: Int16Array,
    opts: { chunk?: number; delayMs?: number; failAfter?: number } = {},
  ): Promise<void> {
    const chunk = opts.chunk ?? 8191;
    const writer = await this.store.startPiece(taskId, idx, { kind: 'none' });
    let n = 0;
    for (let o = 0; o < pcm.length; o += chunk, n++) {
      if (opts.failAfter !== undefined && n === opts.failAfter) {
        this.states.set(`${taskId}/${String(idx)}`, 'failed');
        writer.fail(new AppError('TTS_GENERATE_FAILED', `engine failed on content ${String(idx)}`));
        return;
      }
      await writer.append(pcm.slice(o, o + chunk));
      if (opts.delayMs !== undefined) await sleep(opts.delayMs);
    }
    await writer.finish();
    this.states.set(`${taskId}/${String(idx)}`, 'generated');
    this.store.pieceRecorded(taskId, idx);
  }

  async generate(
    taskId: string,
    pieces: readonly Int16Array[],
    opts: { chunk?: number; delayMs?: number } = {},
  ): Promise<void> {
    for (const [idx, pcm] of pieces.entries()) await this.generatePiece(taskId, idx, pcm, opts);
  }

  request(
    taskId: string,
    extra: Partial<StreamRequest> & { auth?: string | null; i?: string } = {},
  ): Promise<StreamResponse> {
    const { auth, i, ...rest } = extra;
    const query: Record<string, unknown> = { ...(rest.query ?? {}) };
    if (auth !== null) query.auth = auth ?? `token-${taskId}`;
    if (i !== undefined) query.i = i;
    return this.service.stream({
      method: 'GET',
      taskId,
      signal: new AbortController().signal,
      ...rest,
      query,
    });
  }
}

function body(response: StreamResponse): Readable {
  assert.ok(response.body !== null, 'response has a body');
  return response.body;
}

/** Memory after a full GC and the ArrayBuffer sweep that follows it. */
async function settledMemory(gc: () => void): Promise<NodeJS.MemoryUsage> {
  gc();
  await sleep(20);
  gc();
  await sleep(20);
  return process.memoryUsage();
}

async function assertAppError(promise: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(promise, (err: unknown) => isAppError(err) && err.code === code);
}

let fx: Fixture;
let root: string;

async function chunksOf<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

describe('pcmChunks', () => {
  test('carries odd bytes across chunks and keeps every sample', async () => {
    const pcm = sine(0.05, 440);
    const bytes = Buffer.from(pcm.buffer);
    const cuts = [1, 3, 2, 7, 1, 1, 100, 5];
    const chunks: Buffer[] = [];
    for (let o = 0, k = 0; o < bytes.length; k++) {
      const n = cuts[k % cuts.length] ?? 1;
      chunks.push(bytes.subarray(o, o + n));
      o += n;
    }
    const out: number[] = [];
    for await (const samples of pcmChunks(chunks)) out.push(...samples);
    assert.deepEqual(out, [...pcm]);
  });

  test('views aligned bytes without copying and copies unaligned ones', async () => {
    const aligned = Buffer.from(new Int16Array([1, -2, 300, -32768, 32767]).buffer);
    const [view] = await chunksOf(pcmChunks([aligned]));
    assert.deepEqual([...view!], [1, -2, 300, -32768, 32767]);
    assert.equal(view!.buffer, aligned.buffer, 'an aligned chunk is not copied');

    const base = Buffer.alloc(9);
    base.writeInt16LE(-5, 1);
    base.writeInt16LE(7, 3);
    base.writeInt16LE(1234, 5);
    base.writeInt16LE(-1, 7);
    const [copy] = await chunksOf(pcmChunks([base.subarray(1)]));
    assert.deepEqual([...copy!], [-5, 7, 1234, -1]);
    assert.notEqual(copy!.buffer, base.buffer);
    assert.equal(copy!.byteOffset % 2, 0);
  });
});

describe('stream sessions', () => {
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'stream-service-'));
    fx = new Fixture(root);
  });
  afterEach(async () => {
    await fx.service.close();
    await rm(root, { recursive: true, force: true });
  });

  test('concurrent readers share one pipeline run and get the exact continuous encoding', async () => {
    fx.start();
    const pieces = [sine(1.2, 440), sine(0.8, 660), sine(1.0, 550)];
    const intervals = [0.5, 0.25, 0.5];
    fx.addTask('t1', intervals);
    const generation = fx.generate('t1', pieces, { chunk: 4410, delayMs: 5 });
    const responses = await Promise.all(Array.from({ length: 8 }, () => fx.request('t1')));
    for (const r of responses) {
      assert.equal(r.status, 200);
      assert.equal(r.headers['Content-Length'], undefined, 'live: no length');
      assert.equal(r.headers['Cache-Control'], 'no-store');
      assert.equal(r.headers['Content-Type'], 'audio/mpeg');
    }
    assert.equal(new Set(responses.map((r) => r.headers.ETag)).size, 1);
    const bodies = await Promise.all(responses.map((r) => collect(body(r))));
    await generation;
    assert.equal(fx.service.pipelineRuns(), 1);
    const expected = await expectedMp3(pieces, [intervals[0] ?? 0, intervals[1] ?? 0, 0]);
    for (const b of bodies) assert.equal(sha(b), sha(expected));

    // A late joiner reads the finished cache: 200 with Content-Length, same bytes, same ETag.
    const late = await fx.request('t1');
    assert.equal(late.headers['Content-Length'], String(expected.length));
    assert.equal(late.headers.ETag, responses[0]?.headers.ETag);
    assert.equal(late.headers['Cache-Control'], 'private, no-cache');
    assert.equal(sha(await collect(body(late))), sha(expected));
    assert.equal(fx.service.pipelineRuns(), 1);
  });

  test("sessions of one task's other `i`s read the oldest one's build: one encoding, the same bytes", async () => {
    fx.start();
    const pieces = [sine(1.2, 440), sine(0.8, 660), sine(1.0, 550)];
    const intervals = [0.5, 0.25, 0.5];
    fx.addTask('t1', intervals);
    const encodedBefore = pool.encoded.audioSeconds;
    const generation = fx.generate('t1', pieces, { chunk: 4410, delayMs: 5 });
    const first = await fx.request('t1', { i: 'player-1' });
    await sleep(30);
    const others = await Promise.all(['player-2', 'player-3'].map((i) => fx.request('t1', { i })));
    const etags = [first, ...others].map((r) => r.headers.ETag);
    assert.equal(new Set(etags).size, 3, 'each session is a build of its own, with its own ETag');
    const bodies = await Promise.all([first, ...others].map((r) => collect(body(r))));
    await generation;
    const encoded = pool.encoded.audioSeconds - encodedBefore;
    const expected = await expectedMp3(pieces, [intervals[0] ?? 0, intervals[1] ?? 0, 0]);
    for (const b of bodies) assert.equal(sha(b), sha(expected));
    // 3 s of speech and 0.75 s of silence, encoded once, not once per session.
    assert.ok(encoded > 3.5 && encoded < 4, `${encoded.toFixed(2)} s encoded for three sessions`);
  });

  test('a session whose older twin is reclaimed first makes the rest itself: the same bytes', async () => {
    fx.start(100);
    const pieces = [sine(1.2, 440), sine(0.8, 660), sine(1.0, 550)];
    const intervals = [0.5, 0.25, 0.5];
    fx.addTask('t1', intervals);
    const encodedBefore = pool.encoded.audioSeconds;
    const generation = fx.generate('t1', pieces, { chunk: 4410, delayMs: 25 });
    const first = body(await fx.request('t1', { i: 'player-1' }));
    await sleep(50);
    const second = await fx.request('t1', { i: 'player-2' });
    first.destroy(); // its only reader leaves: the twin is reclaimed while generation goes on
    const bytes = await collect(body(second));
    await generation;
    const encoded = pool.encoded.audioSeconds - encodedBefore;
    const expected = await expectedMp3(pieces, [intervals[0] ?? 0, intervals[1] ?? 0, 0]);
    assert.equal(sha(bytes), sha(expected));
    assert.ok(encoded > 3.75 + 0.1, `${encoded.toFixed(2)} s encoded: the second session encoded it again`);
  });

  test('a closed range waits for its bytes; HEAD never waits', async () => {
    fx.start();
    fx.addTask('t2', [0.5]);
    const head = await fx.request('t2', { method: 'HEAD', rangeHeader: 'bytes=0-9999' });
    assert.equal(head.status, 200, 'HEAD: range not produced yet → live headers at once');
    assert.equal(head.body, null);
    assert.equal(head.headers['Transfer-Encoding'], 'chunked');
    let settled = false;
    const ranged = fx.request('t2', { rangeHeader: 'bytes=100-9999' }).finally(() => (settled = true));
    await sleep(50);
    assert.equal(settled, false, 'the closed range waits while nothing is produced');
    const generation = fx.generate('t2', [sine(2, 440)]);
    const r = await ranged;
    assert.equal(r.status, 206);
    assert.equal(r.headers['Content-Range'], 'bytes 100-9999/*');
    assert.equal(r.headers['Content-Length'], '9900');
    const part = await collect(body(r));
    await generation;
    const whole = await collect(body(await fx.request('t2')));
    assert.deepEqual(part, whole.subarray(100, 10000));
    assert.equal(fx.service.pipelineRuns(), 1);
  });

  test('HEAD on a finished session has the GET headers and no body; 416 past the end', async () => {
    fx.start();
    fx.addTask('t3', [0.5]);
    await fx.generate('t3', [sine(0.5, 440)]);
    await collect(body(await fx.request('t3'))); // read to the end: the session is finished
    const get = await fx.request('t3', { rangeHeader: 'bytes=10-' });
    await collect(body(get));
    const head = await fx.request('t3', { method: 'HEAD', rangeHeader: 'bytes=10-' });
    assert.deepEqual(head.headers, get.headers);
    assert.equal(head.status, 206);
    const size = Number(get.headers['Content-Range']?.split('/')[1]);
    await assert.rejects(fx.request('t3', { rangeHeader: `bytes=${String(size)}-` }), (err: unknown) => {
      assert.ok(isAppError(err));
      assert.equal(err.status, 416);
      assert.equal(err.headers['Content-Range'], `bytes */${String(size)}`);
      return true;
    });
  });

  test('an idle session is reclaimed: cache file deleted, rebuilt with a new ETag, same bytes', async () => {
    fx.start(150);
    fx.addTask('t4', [0.5]);
    await fx.generate('t4', [sine(0.6, 440)]);
    const first = await fx.request('t4');
    const firstBytes = await collect(body(first));
    const runDir = (await readdir(join(root, 'stream-cache')))[0] ?? '';
    assert.equal((await readdir(join(root, 'stream-cache', runDir))).length, 1);
    await sleep(400);
    assert.deepEqual(await readdir(join(root, 'stream-cache', runDir)), [], 'cache file deleted');
    const second = await fx.request('t4');
    assert.notEqual(second.headers.ETag, first.headers.ETag);
    assert.equal(sha(await collect(body(second))), sha(firstBytes));
    assert.equal(fx.service.pipelineRuns(), 2);
  });

  test('deleting a task ends its live sessions: the reader is cut and the cache file deleted', async () => {
    fx.start();
    fx.addTask('t-del', [0.5, 0.5]);
    void fx.generatePiece('t-del', 0, sine(1, 440));
    const reading = body(await fx.request('t-del'));
    const first = await new Promise<Buffer>((resolve) => reading.once('data', resolve));
    assert.ok(first.length > 0);
    assert.equal(fx.service.liveSessions(), 1);
    // A spurious wake-up (the task still exists) ends nothing.
    fx.events.changed('t-del', 'deleted');
    await sleep(50);
    assert.equal(fx.service.liveSessions(), 1);
    fx.views.delete('t-del');
    fx.events.changed('t-del', 'deleted');
    await assert.rejects(collect(reading));
    assert.equal(fx.service.liveSessions(), 0);
    // The file is deleted as the session's destruction completes, just after its readers are cut.
    const runDir = join(root, 'stream-cache', (await readdir(join(root, 'stream-cache')))[0] ?? '');
    for (let i = 0; i < 100 && (await readdir(runDir)).length > 0; i++) await sleep(20);
    assert.deepEqual(await readdir(runDir), [], 'cache file deleted');
  });

  test('an attached reader keeps the session; the idle window restarts when it detaches', async () => {
    fx.start(150);
    fx.addTask('t5', [0.5]);
    await fx.generate('t5', [sine(3, 440)]);
    const first = await fx.request('t5');
    const reader = body(first);
    // Hold the reader, unread, for longer than the idle time.
    await sleep(400);
    const again = await fx.request('t5', { method: 'HEAD' });
    assert.equal(again.headers.ETag, first.headers.ETag, 'not reclaimed while a reader is attached');
    await collect(reader);
    await sleep(100);
    assert.equal(
      (await fx.request('t5', { method: 'HEAD' })).headers.ETag,
      first.headers.ETag,
      'window restarted on detach',
    );
    await sleep(400);
    const rebuilt = await fx.request('t5');
    assert.notEqual(rebuilt.headers.ETag, first.headers.ETag);
    await collect(body(rebuilt));
    assert.equal(fx.service.pipelineRuns(), 2);
  });

  test('a pipeline failure truncates live readers and the next request rebuilds', async () => {
    fx.start();
    fx.addTask('t6', [0.5, 0.5, 0.5]);
    const reader = fx.request('t6');
    const generation = (async () => {
      await fx.generatePiece('t6', 0, sine(1, 440), { delayMs: 2 });
      await fx.generatePiece('t6', 1, sine(1, 550), { delayMs: 2 });
      await fx.generatePiece('t6', 2, sine(1, 660), { delayMs: 2, failAfter: 3 });
    })();
    const first = await reader;
    const { bytes, error } = await collectUntilError(body(first));
    await generation;
    assert.ok(isAppError(error) && error.code === 'TTS_GENERATE_FAILED', `reader error: ${String(error)}`);
    assert.ok(bytes.length > 10_000, 'bytes flowed before the failure');

    // Generation is retried (the task is still processing): a new build with a new ETag.
    const retry = fx.generatePiece('t6', 2, sine(1, 660));
    const second = await fx.request('t6');
    assert.notEqual(second.headers.ETag, first.headers.ETag);
    const whole = await collect(body(second));
    await retry;
    assert.equal(fx.service.pipelineRuns(), 2);
    assert.equal(
      sha(whole),
      sha(await expectedMp3([sine(1, 440), sine(1, 550), sine(1, 660)], [0.5, 0.5, 0])),
    );
  });

  test('a failure before any byte of a response is thrown (becomes a JSON error)', async () => {
    fx.start();
    fx.addTask('t7', [0.5]);
    const ranged = fx.request('t7', { rangeHeader: 'bytes=0-99' });
    await sleep(20);
    await fx.generatePiece('t7', 0, sine(1, 440), { failAfter: 0 });
    await assertAppError(ranged, 'TTS_GENERATE_FAILED');
  });

  test('branches: 302, STREAM_NOT_READY, auth, i, content index', async () => {
    fx.start();
    const view = fx.addTask('t8', [0.5, 0.5]);
    await assertAppError(fx.request('t8', { auth: null }), 'AUTH_UNAUTHORIZED');
    await assertAppError(fx.request('t8', { auth: '' }), 'AUTH_UNAUTHORIZED');
    await assertAppError(fx.request('nope', { auth: 'x' }), 'GENERATE_NOT_FOUND');
    await assertAppError(fx.request('t8', { auth: 'token-t9' }), 'AUTH_FORBIDDEN');
    await assertAppError(fx.request('t8', { i: 'a b' }), 'VALIDATION_INVALID_VALUE');
    await assertAppError(fx.request('t8', { i: 'x'.repeat(65) }), 'VALIDATION_INVALID_VALUE');
    await assertAppError(fx.request('t8', { query: { i: ['a', 'b'] } }), 'VALIDATION_INVALID_VALUE');
    await assertAppError(
      fx.request('t8', { query: { 'response-content-disposition': 'attachment; filename="a\nb"' } }),
      'VALIDATION_INVALID_VALUE',
    );
    await assertAppError(fx.request('t8', { contentIndex: '2' }), 'RESOURCE_NOT_FOUND');
    await assertAppError(fx.request('t8', { contentIndex: '01' }), 'RESOURCE_NOT_FOUND');
    assert.equal(fx.service.pipelineRuns(), 0, 'no pipeline for rejected requests');

    for (const status of ['pending', 'failed'] as const) {
      view.status = status;
      await assertAppError(fx.request('t8'), 'STREAM_NOT_READY');
      await assertAppError(fx.request('t8', { contentIndex: '1' }), 'STREAM_NOT_READY');
    }
    view.status = 'generated';
    view.audioUrl = 'http://test/blobs/t8.mp3';
    const pieceView = view.pieces[1];
    assert.ok(pieceView);
    pieceView.audioUrl = 'http://test/blobs/t8-1.mp3';
    assert.deepEqual(await fx.request('t8'), {
      status: 302,
      headers: { Location: 'http://test/blobs/t8.mp3' },
      body: null,
    });
    assert.equal(
      (await fx.request('t8', { contentIndex: '1' })).headers.Location,
      'http://test/blobs/t8-1.mp3',
    );
    assert.equal(
      (await fx.service.pseudoStream('t8', '1', { auth: 'token-t8' })).headers.Location,
      'http://test/blobs/t8-1.mp3',
    );
    await assertAppError(fx.service.pseudoStream('t8', '0', { auth: 'token-t8' }), 'STREAM_NOT_READY');
    await assertAppError(fx.service.pseudoStream('t8', '0', {}), 'AUTH_UNAUTHORIZED');
    assert.deepEqual(await fx.service.streamUrl('t8', { auth: 'token-t8' }), {
      url: 'http://test/api/tts/generate/t8/stream.mp3?auth=token-t8',
    });
    await assertAppError(fx.service.streamUrl('t8', { auth: 'bad' }), 'AUTH_FORBIDDEN');
    assert.equal(fx.service.pipelineRuns(), 0, 'redirects never start a pipeline');
  });

  test('`i` and the content index key separate sessions; per-content is the piece alone', async () => {
    fx.start();
    fx.addTask('t9', [0.5, 0.5]);
    const pieces = [sine(0.5, 440), sine(0.7, 550)];
    await fx.generate('t9', pieces);
    const a = await fx.request('t9');
    const b = await fx.request('t9', { i: 'player-2' });
    await Promise.all([collect(body(a)), collect(body(b))]);
    const a2 = await fx.request('t9', { method: 'HEAD', query: { i: '' } });
    assert.notEqual(a.headers.ETag, b.headers.ETag);
    assert.equal(a.headers.ETag, a2.headers.ETag, 'empty i = absent i');
    const c = await fx.request('t9', { contentIndex: '1' });
    assert.equal(sha(await collect(body(c))), sha(await expectedMp3([pieces[1] ?? new Int16Array()], [0])));
    assert.equal(fx.service.pipelineRuns(), 3);
  });

  test('a piece with engine MP3 streams those bytes unchanged; a piece kept as PCM only is encoded', async () => {
    fx.start();
    fx.addTask('t11', [0.5, 0.5]);
    const pcm = sine(0.5, 440);
    // Piece 0: its engine delivered MP3 (stand-in bytes: the session forwards, never decodes).
    const engineMp3 = Buffer.from(Array.from({ length: 50_000 }, (_, n) => (n * 7) % 251));
    const writer = await fx.store.startPiece('t11', 0, { kind: 'engine' });
    const live = await fx.request('t11', { contentIndex: '0' });
    const reading = collect(body(live));
    for (let o = 0; o < engineMp3.length; o += 4096) await writer.appendMp3(engineMp3.subarray(o, o + 4096));
    await writer.append(pcm);
    await writer.finish();
    fx.states.set('t11/0', 'generated');
    fx.store.pieceRecorded('t11', 0);
    assert.equal(sha(await reading), sha(engineMp3), 'forwarded byte for byte');
    const finished = await fx.request('t11', { contentIndex: '0', rangeHeader: 'bytes=100-199' });
    assert.equal(finished.status, 206);
    assert.equal(finished.headers['Content-Range'], `bytes 100-199/${String(engineMp3.length)}`);
    assert.ok((await collect(body(finished))).equals(engineMp3.subarray(100, 200)));

    // Piece 1: instruct, but its engine delivered PCM only: encoded like any piece.
    await fx.generatePiece('t11', 1, pcm);
    const encoded = await fx.request('t11', { contentIndex: '1' });
    assert.equal(sha(await collect(body(encoded))), sha(await expectedMp3([pcm], [0])));
    // The full-task stream encodes the PCM of both pieces through one encoder, as always.
    const full = await fx.request('t11');
    assert.equal(sha(await collect(body(full))), sha(await expectedMp3([pcm, pcm], [0.5, 0])));
  });

  test('close() aborts running pipelines and removes the cache directory', async () => {
    fx.start();
    fx.addTask('t10', [0.5]);
    const r = await fx.request('t10', { method: 'HEAD' });
    assert.equal(r.status, 200);
    await fx.service.close();
    assert.deepEqual(await readdir(join(root, 'stream-cache')), []);
  });

  test('a slow reader does not grow the heap and does not slow a fast reader', async () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    fx.start();
    fx.addTask('t11', [0.5]);
    await fx.generate('t11', [sine(60, 440)], { chunk: 44100 });
    // Build the session to its end first, so that only reading is measured below.
    for await (const _chunk of body(await fx.request('t11'))) {
      // drained
    }
    const slow = body(await fx.request('t11'));
    // Paused mode: the slow reader takes 1 KiB per tick and its buffer is all it holds.
    slow.pause();
    await sleep(50);
    const before = await settledMemory(gc);
    // Count the fast reader's bytes without keeping them: only what the service holds may count.
    let fastLength = 0;
    for await (const chunk of body(await fx.request('t11'))) fastLength += (chunk as Buffer).length;
    let slowRead = 0;
    for (let k = 0; k < 20; k++) {
      const chunk = slow.read(1024) as Buffer | null;
      slowRead += chunk?.length ?? 0;
      await sleep(50);
    }
    const after = await settledMemory(gc);
    assert.ok(fastLength > 2_000_000, `fast reader got ${String(fastLength)} bytes`);
    // The fast reader reached the end while the slow one is still near the start: it was not held back.
    assert.ok(slowRead < fastLength / 10, `slow reader read ${String(slowRead)} bytes`);
    assert.ok(
      slowRead > 0 && slow.readableLength <= 128 * 1024,
      `slow reader buffers ${String(slow.readableLength)} bytes`,
    );
    const growth = after.heapUsed + after.arrayBuffers - (before.heapUsed + before.arrayBuffers);
    assert.ok(
      growth < 1024 * 1024,
      `memory grew by ${String(growth)} bytes (heap ${String(after.heapUsed - before.heapUsed)}, buffers ${String(after.arrayBuffers - before.arrayBuffers)}) while 2.4 MB were read past the slow reader`,
    );
    slow.destroy();
  });
});

describe('bounded sessions', () => {
  const unbounded: StreamSessionBounds = { maxPerTask: 0, maxPerAccount: 0, cacheBudgetBytes: 0 };
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'stream-bounds-'));
    fx = new Fixture(root);
  });
  afterEach(async () => {
    await fx.service.close();
    await rm(root, { recursive: true, force: true });
  });

  /** Files in the run's cache directory (one per live session build). */
  async function cacheFiles(): Promise<number> {
    const runs = await readdir(join(root, 'stream-cache'));
    let n = 0;
    for (const run of runs) n += (await readdir(join(root, 'stream-cache', run))).length;
    return n;
  }

  test('HEAD never starts a pipeline: 100 distinct i values → 0 runs, 0 cache files', async () => {
    fx.start(60_000, unbounded);
    fx.addTask('h1', [0.5]);
    for (let n = 0; n < 100; n++) {
      const head = await fx.request('h1', { method: 'HEAD', i: `probe-${String(n)}` });
      assert.equal(head.status, 200);
      assert.equal(head.body, null);
      assert.equal(head.headers['Transfer-Encoding'], 'chunked');
      assert.equal(head.headers.ETag, undefined, 'no build, no ETag');
    }
    assert.equal(fx.service.pipelineRuns(), 0);
    assert.equal(await cacheFiles(), 0);
    // A HEAD after a GET answers from that GET's session.
    await fx.generate('h1', [sine(0.3, 440)]);
    const get = await fx.request('h1', { i: 'player' });
    await collect(body(get));
    const head = await fx.request('h1', { method: 'HEAD', i: 'player' });
    assert.equal(head.headers.ETag, get.headers.ETag);
    assert.equal(fx.service.pipelineRuns(), 1);
  });

  test('per task: idle sessions are evicted for new ones; all in use → 429 with Retry-After', async () => {
    fx.start(60_000, { ...unbounded, maxPerTask: 2 });
    fx.addTask('p1', [0.5]);
    await fx.generate('p1', [sine(0.3, 440)]);
    // Two idle sessions, then a third: the least recently used one goes.
    for (const i of ['a', 'b', 'c']) await collect(body(await fx.request('p1', { i })));
    assert.equal(fx.service.pipelineRuns(), 3);
    assert.equal(await cacheFiles(), 2, 'the oldest idle session was evicted');
    // Sessions in use are never evicted: hold two readers, the third key is refused.
    const held = [await fx.request('p1', { i: 'b' }), await fx.request('p1', { i: 'c' })];
    await assert.rejects(fx.request('p1', { i: 'd' }), (err: unknown) => {
      assert.ok(isAppError(err));
      assert.equal(err.code, 'RATE_LIMIT_EXCEEDED');
      assert.equal(err.status, 429);
      assert.match(err.headers['Retry-After'] ?? '', /^\d+$/);
      return true;
    });
    for (const r of held) await collect(body(r));
    // Readers gone: the next new key fits again.
    await collect(body(await fx.request('p1', { i: 'd' })));
    // Another task of the same account is not limited by p1's sessions.
    fx.addTask('p2', [0.5]);
    await fx.generate('p2', [sine(0.3, 440)]);
    await collect(body(await fx.request('p2', { i: 'a' })));
  });

  test('per account: a second account is never limited by the first', async () => {
    fx.start(60_000, { ...unbounded, maxPerAccount: 2 });
    for (const id of ['x1', 'x2', 'x3']) {
      fx.addTask(id, [0.5], 'processing', 'hostile');
      await fx.generate(id, [sine(0.3, 440)]);
    }
    fx.addTask('y1', [0.5], 'processing', 'other');
    await fx.generate('y1', [sine(0.3, 440)]);
    const held = [await fx.request('x1'), await fx.request('x2')];
    await assertAppError(fx.request('x3'), 'RATE_LIMIT_EXCEEDED');
    const other = await fx.request('y1');
    assert.equal(other.status, 200);
    await collect(body(other));
    for (const r of held) await collect(body(r));
  });

  test('cache budget: idle sessions are evicted first; when all are in use → 503 STREAM_CAPACITY_EXHAUSTED', async () => {
    fx.start(60_000, { ...unbounded, cacheBudgetBytes: 30_000 });
    fx.addTask('b1', [0.5]);
    await fx.generate('b1', [sine(1, 440)]); // ≈ 40 kB of MP3: one finished session exceeds the budget
    await collect(body(await fx.request('b1', { i: 'one' })));
    await collect(body(await fx.request('b1', { i: 'two' })));
    assert.equal(await cacheFiles(), 1, 'the idle session over budget was evicted for the new one');
    const held = await fx.request('b1', { i: 'two' });
    await assert.rejects(fx.request('b1', { i: 'three' }), (err: unknown) => {
      assert.ok(isAppError(err));
      assert.equal(err.code, 'STREAM_CAPACITY_EXHAUSTED');
      assert.equal(err.status, 503);
      assert.ok(err.headers['Retry-After'] !== undefined);
      return true;
    });
    await collect(body(held));
    await collect(body(await fx.request('b1', { i: 'three' })));
    assert.equal(await cacheFiles(), 1);
  });
});
