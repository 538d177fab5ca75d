// Fault injection on the embedded (single-node) deployment,
// through the real app and real file systems, with the figures recorded in docs/reliability.md:
//  1. the remote engine throws (connection cut) or hangs mid-piece: the task fails with a
//     tenant-safe error, live readers are cut without JSON after the bytes, the only generation
//     slot is freed, nothing is left open (counts equal before/after, no temp files or sessions);
//  2. a full or read-only blob/work file system (a real tmpfs of a few MiB): generation fails
//     cleanly, no half-written blob is visible, a voice upload answers 503 STORAGE_UNAVAILABLE,
//     and a new task succeeds once space returns;
//  3. `kill -9` of the real server process at each stage of storing finished audio, then a
//     restart on the same DATA_DIR: the task ends generated with a valid MP3, never stuck;
//  4. clients that disconnect at seeded random points of every kind of request: file
//     descriptors, sockets, stream sessions, encoder streams and generations equal before/after.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, open, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { once } from 'node:events';
import { connect } from 'node:net';
import { join } from 'node:path';
import { request as httpRequest, type ServerResponse } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { FsPieceAudioStore } from '../src/tasks/piece-audio.fs.js';
import { MemoryTaskEvents } from '../src/tasks/queue/task-events.memory.js';
import type { TaskDetailView } from '../src/tasks/task-service.js';
import { startFaultUpstream, toneMp3, type FaultUpstream } from './helpers/fault-upstream.js';
import { ffmpegErrors, probeAudio } from './helpers/audio-check.js';
import { readLive, send, type Reply } from './helpers/http-client.js';
import { stableCounts, settledCounts, warmWorkers } from './helpers/resource-counts.js';
import { startServerProcess, type ServerProcess } from './helpers/server-process.js';
import { bearer, startTestApp, type TestApp } from './helpers/test-app.js';
import { mountTmpfs, tmpfsUnavailable, type Tmpfs } from './helpers/tmpfs.js';

const TIMEOUT_MESSAGE = 'the speech engine did not answer in time';
const FAILED_MESSAGE = 'the speech engine failed (engine error)';

/** Every file under `dir` (relative paths), [] when it does not exist. */
async function filesUnder(dir: string): Promise<string[]> {
  const names = await readdir(dir, { recursive: true }).catch(() => [] as string[]);
  const files: string[] = [];
  for (const name of names)
    if ((await stat(join(dir, name)).catch(() => undefined))?.isFile()) files.push(name);
  return files.sort();
}

/** API helpers bound to one test app. */
function api(t: TestApp) {
  const call = async <T>(method: 'GET' | 'POST' | 'PUT', url: string, payload?: object): Promise<T> => {
    const res = await t.app.http.inject({ method, url, headers: bearer(t.key), ...(payload && { payload }) });
    assert.equal(res.statusCode, 200, `${method} ${url}: ${res.body}`);
    return res.json<{ data: T }>().data;
  };
  return {
    createVoice: async (payload: object) => (await call<{ id: string }>('POST', '/api/voice', payload)).id,
    createTask: async (contents: { text: string; voiceId: string; interval?: number }[]) =>
      (await call<{ id: string }>('POST', '/api/tts/generate', { contents })).id,
    detail: (id: string) => call<TaskDetailView>('GET', `/api/tts/generate/${id}`),
    /** The full stream.mp3 URL with the task's `auth` token. */
    streamUrl: async (id: string) =>
      String((await call<TaskDetailView>('GET', `/api/tts/generate/${id}?stream=true`)).streamUrl),
    /** Waits (at most `ms`) until the task is generated or failed. */
    async finished(id: string, ms = 20_000): Promise<TaskDetailView> {
      const deadline = AbortSignal.timeout(ms);
      for (;;) {
        const task = await t.app.services.tasks.get(t.accountId, id);
        if (task.status === 'failed' || task.status === 'generated') return task;
        if (deadline.aborted) assert.fail(`task ${id} still ${task.status}`);
        await sleep(20);
      }
    },
  };
}

/** Whether a cut audio body ends in JSON (an error envelope appended after bytes: never allowed). */
function endsInJson(reply: Reply): boolean {
  return /"code"\s*:/.test(reply.body.subarray(-512).toString('latin1'));
}

// ---------------------------------------------------------------------------------------------
// 1. The engine throws or hangs mid-piece.

describe('fault: the remote engine throws or hangs mid-piece (one generation slot)', () => {
  let t: TestApp;
  let upstream: FaultUpstream;
  let tone: Buffer;
  let remoteVoice = '';
  let calls: ReturnType<typeof api>;

  before(async () => {
    upstream = await startFaultUpstream();
    tone = await toneMp3(3);
    upstream.handle(
      (_request, res: ServerResponse) => void res.writeHead(200, { 'content-type': 'audio/mpeg' }).end(tone),
    );
    t = await startTestApp({
      listen: true,
      env: {
        GENERATION_CONCURRENCY: '1',
        RATE_LIMIT_MAX: '100000',
        ENGINE_CONNECT_TIMEOUT_MS: '500',
        ENGINE_FIRST_BYTE_TIMEOUT_MS: '500',
        ENGINE_CALL_TIMEOUT_MS: '3000',
        REMOTE_ENGINES: JSON.stringify({ local: { baseUrl: upstream.url, apiKey: 'sk-fault-test' } }),
      },
    });
    calls = api(t);
    remoteVoice = await calls.createVoice({
      name: 'Remote',
      engine: { engine: 'remote', endpoint: 'local', voice: 'alloy' },
    });
  });

  after(async () => {
    await t.close();
    await upstream.close();
  });

  for (const fault of ['throws', 'hangs'] as const) {
    it(`${fault} mid-piece: tenant-safe failure, live reader cut, slot freed, nothing left behind`, async () => {
      // Warm the encoder pool and the espeak workers so the baseline counts hold their descriptors.
      const warm = await calls.createTask([{ text: 'Warm up.', voiceId: remoteVoice }]);
      assert.equal((await calls.finished(warm)).status, 'generated');
      await warmWorkers(t.app);
      const baseline = await stableCounts(t.app);

      // Piece 0 is whole; piece 1 sends half its MP3, then (throws) its connection is cut when the
      // test says so, or (hangs) nothing more comes until the 3 s call deadline.
      let cutPiece: (() => void) | undefined;
      upstream.handle(({ input }, res: ServerResponse) => {
        res.writeHead(200, { 'content-type': 'audio/mpeg' });
        if (!input.includes('midway')) return void res.end(tone);
        res.write(tone.subarray(0, tone.length >> 1));
        if (fault === 'throws') cutPiece = () => res.socket?.destroy();
      });
      const id = await calls.createTask([
        { text: 'The first piece is whole.', voiceId: remoteVoice },
        { text: 'The second piece fails midway.', voiceId: remoteVoice },
      ]);
      // Queued behind it on the only slot: generated only if the failure frees the slot.
      const next = await calls.createTask([{ text: 'Right after the failure.', voiceId: remoteVoice }]);

      // A live reader: bytes of piece 0 (and the start of piece 1) arrive, then the failure.
      const streamUrl = await calls.streamUrl(id);
      const live = readLive(String(streamUrl));
      // Piece 0 is 3 s of audio: 320 kbps → 120,000 bytes; wait for well into it.
      await live.until(100_000);
      const deadline = AbortSignal.timeout(15_000);
      while (fault === 'throws' && cutPiece === undefined) {
        if (deadline.aborted) assert.fail(`the upstream never started the failing piece`);
        await sleep(10);
      }
      cutPiece?.();

      const failed = await calls.finished(id);
      assert.equal(failed.status, 'failed');
      assert.equal(
        failed.error,
        `content 1 of task ${id}: ${fault === 'throws' ? FAILED_MESSAGE : TIMEOUT_MESSAGE}`,
      );
      const reply = await live.done;
      assert.equal(reply.status, 200);
      assert.ok(
        reply.body.length >= 100_000,
        `the reader got the audio before the failure (${reply.body.length})`,
      );
      assert.equal(reply.truncated, true, 'the live stream is cut (no terminating chunk)');
      assert.equal(endsInJson(reply), false, 'no JSON after the audio bytes');
      // A reader arriving after the failure gets the clear refusal, not audio.
      const late = await send(String(streamUrl));
      assert.equal(late.status, 400);
      assert.equal((JSON.parse(late.body.toString()) as { code: string }).code, 'STREAM_NOT_READY');

      assert.equal((await calls.finished(next)).status, 'generated', 'the slot was freed');
      await upstream.connectionsClosed();
      const settledNow = await settledCounts(t.app, baseline);
      assert.deepEqual(settledNow, baseline);
      const dataDir = t.app.config.dataDir;
      assert.deepEqual(
        (await filesUnder(join(dataDir, 'blobs'))).filter((f) => f.includes('.tmp-')),
        [],
        'no temporary blob',
      );
      assert.deepEqual(
        (await filesUnder(join(dataDir, 'blobs'))).filter((f) => f.includes(id)),
        [`tasks/${id}/contents/0.mp3`],
        'only the piece that was generated has audio',
      );
      assert.deepEqual(await filesUnder(join(dataDir, 'stream-cache')), [], 'no session cache left');
      assert.deepEqual(await filesUnder(join(dataDir, 'work', 'tasks', id)), [], 'no piece PCM left');
    });
  }
});

// ---------------------------------------------------------------------------------------------
// 2. A full or read-only file system under DATA_DIR (real tmpfs mounts on blobs/ and work/).

describe('fault: full or read-only DATA_DIR (tmpfs of 4 MiB on blobs/ and work/)', async () => {
  const unavailable = await tmpfsUnavailable();
  let t: TestApp;
  let calls: ReturnType<typeof api>;
  let voice = '';
  let dataDir = '';
  const mounts: Tmpfs[] = [];

  /** Fills the file system of `dir` with a file `name` until `leave` bytes are free (rm it to recover). */
  async function fill(dir: string, name: string, leave = 0): Promise<void> {
    const chunk = Buffer.alloc(64 * 1024, 1);
    const file = await open(join(dir, name), 'w');
    try {
      let written = 0;
      for (let size = chunk.length; size >= 1;) {
        // Halve the write once the disk refuses, down to one byte: the disk is then full.
        await file.write(chunk.subarray(0, size)).then(
          ({ bytesWritten }) => void (written += bytesWritten),
          (err: NodeJS.ErrnoException) => {
            if (err.code !== 'ENOSPC') throw err;
            size >>= 1;
          },
        );
      }
      await file.truncate(Math.max(0, written - leave));
    } finally {
      await file.close();
    }
  }

  /** Files named like a temporary or partial blob, anywhere under blobs/. */
  const partialBlobs = async () =>
    (await filesUnder(join(dataDir, 'blobs'))).filter((f) => f.includes('.tmp-'));

  /** A voice upload (PUT …/lora, 256 KiB): its status and error code. */
  async function upload(): Promise<{ status: number; code?: string; message?: string }> {
    const res = await t.app.http.inject({
      method: 'PUT',
      url: `/api/voice/${voice}/lora`,
      headers: { ...bearer(t.key), 'content-type': 'application/octet-stream' },
      payload: randomBytes(256 * 1024),
    });
    const body = res.json<{ code?: string; message?: string }>();
    return { status: res.statusCode, ...body };
  }

  before(async () => {
    if (unavailable !== undefined) return;
    dataDir = await mkdtemp(join(tmpdir(), 'voicegen-faults-disk-'));
    mounts.push(await mountTmpfs(join(dataDir, 'blobs'), 4 << 20));
    mounts.push(await mountTmpfs(join(dataDir, 'work'), 4 << 20));
    t = await startTestApp({ dataDir, env: { RATE_LIMIT_MAX: '100000' } });
    calls = api(t);
    voice = await calls.createVoice({ name: 'Narrator' });
  });

  after(async () => {
    if (unavailable !== undefined) return;
    await t.close();
    for (const m of mounts) await m.unmount();
    await rm(dataDir, { recursive: true, force: true });
  });

  // About 4 s of speech: its piece MP3 (~150 KB) is larger than the 64 KiB left free below.
  const text = 'The disk under this task is full, so its audio cannot be stored anywhere at all.';
  const storageError = (id: string) => `content 0 of task ${id}: storage is full or read-only; retry later`;

  /** The service still answers, and a new task is generated (the recovery). */
  async function recovers(): Promise<void> {
    assert.equal((await t.app.http.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
    const again = await calls.createTask([{ text, voiceId: voice }]);
    const done = await calls.finished(again);
    assert.equal(done.status, 'generated', done.error);
  }

  it(
    'blobs/ full mid-write: the task fails naming storage, no partial blob, upload 503; recovery',
    {
      skip: unavailable,
    },
    async () => {
      await fill(join(dataDir, 'blobs'), 'filler', 64 * 1024);
      const id = await calls.createTask([{ text, voiceId: voice }]);
      const failed = await calls.finished(id);
      assert.equal(failed.status, 'failed');
      assert.equal(failed.error, storageError(id));
      assert.deepEqual(await partialBlobs(), [], 'the half-written piece MP3 was removed');
      assert.deepEqual(
        (await filesUnder(join(dataDir, 'blobs'))).filter((f) => f.includes(id)),
        [],
      );
      assert.deepEqual(
        await filesUnder(join(dataDir, 'work', 'tasks', id)),
        [],
        'no piece PCM of the failed task',
      );
      const uploaded = await upload();
      assert.equal(uploaded.status, 503);
      assert.equal(uploaded.code, 'STORAGE_UNAVAILABLE');
      assert.equal(uploaded.message, 'storage is full or read-only; retry later');
      assert.deepEqual(await partialBlobs(), [], 'the refused upload left nothing');
      await rm(join(dataDir, 'blobs', 'filler'));
      await recovers();
      assert.equal((await upload()).status, 200, 'uploads work again');
    },
  );

  it(
    'work/ full: the piece PCM cannot be written; the task fails naming storage; recovery',
    {
      skip: unavailable,
    },
    async () => {
      await fill(join(dataDir, 'work'), 'filler');
      const id = await calls.createTask([{ text, voiceId: voice }]);
      const failed = await calls.finished(id);
      assert.equal(failed.status, 'failed');
      assert.equal(failed.error, storageError(id));
      await rm(join(dataDir, 'work', 'filler'));
      await recovers();
    },
  );

  it(
    'blobs/ read-only: the task fails naming storage, upload 503; recovery after remount',
    {
      skip: unavailable,
    },
    async () => {
      const blobs = mounts[0];
      assert.ok(blobs);
      await blobs.remount('ro');
      try {
        const id = await calls.createTask([{ text, voiceId: voice }]);
        const failed = await calls.finished(id);
        assert.equal(failed.status, 'failed');
        assert.equal(failed.error, storageError(id));
        const uploaded = await upload();
        assert.equal(uploaded.status, 503);
        assert.equal(uploaded.code, 'STORAGE_UNAVAILABLE');
      } finally {
        await blobs.remount('rw');
      }
      assert.deepEqual(await partialBlobs(), []);
      await recovers();
    },
  );
});

// ---------------------------------------------------------------------------------------------
// 4. Clients that disconnect at seeded random points.

/** mulberry32: a small seeded PRNG, so a failing run can be replayed with FAULT_SEED. */
function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

/** Writes `bytes` (all, or the first `cut`) on a raw connection, waits `holdMs`, then destroys it. */
async function rawDrop(baseUrl: string, bytes: Buffer, cut: number, holdMs: number): Promise<void> {
  const { port } = new URL(baseUrl);
  const socket = connect(Number(port), '127.0.0.1');
  socket.on('error', () => undefined);
  socket.on('data', () => undefined);
  await once(socket, 'connect');
  socket.write(bytes.subarray(0, cut));
  await sleep(holdMs);
  socket.destroy();
  if (!socket.closed) await once(socket, 'close');
}

/**
 * A request on its own connection (no keep-alive pool, so nothing of the client's stays open)
 * that the client drops after `bytes` body bytes or `ms`, whichever comes first.
 */
async function dropRequest(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string },
  bytes: number,
  ms: number,
): Promise<void> {
  await new Promise<void>((resolve) => {
    const req = httpRequest(url, { method: options.method ?? 'GET', headers: options.headers, agent: false });
    const timer = setTimeout(() => req.destroy(), ms);
    req.on('close', () => {
      clearTimeout(timer);
      resolve();
    });
    req.on('error', () => undefined);
    req.on('response', (res) => {
      let received = 0;
      res.on('error', () => undefined);
      res.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received >= bytes) req.destroy();
      });
    });
    req.end(options.body);
  });
}

describe('fault: clients disconnecting at random points leave nothing behind', () => {
  const seed = Number(process.env.FAULT_SEED ?? 11);
  const random = seededRandom(seed);
  const between = (lo: number, hi: number) => lo + Math.floor(random() * (hi - lo + 1));
  let t: TestApp;
  let upstream: FaultUpstream;
  let calls: ReturnType<typeof api>;
  let slowVoice = '';
  let espeakVoice = '';
  let finishedAudioUrl = '';
  const figures: string[] = [];

  before(async () => {
    upstream = await startFaultUpstream();
    const tone = await toneMp3(4, 330);
    // A slow engine: the MP3 trickles in 16 pieces 40 ms apart, so a piece takes ~0.7 s.
    upstream.handle((_request, res: ServerResponse) => {
      res.writeHead(200, { 'content-type': 'audio/mpeg' });
      const step = Math.ceil(tone.length / 16);
      let offset = 0;
      const timer = setInterval(() => {
        if (res.destroyed) return void clearInterval(timer);
        res.write(tone.subarray(offset, offset + step));
        offset += step;
        if (offset >= tone.length) {
          clearInterval(timer);
          res.end();
        }
      }, 40);
    });
    t = await startTestApp({
      listen: true,
      env: {
        RATE_LIMIT_MAX: '100000',
        STREAM_RATE_LIMIT_MAX: '100000',
        // Sessions nobody reads are reclaimed quickly, so "sessions before = after" can settle.
        STREAM_IDLE_RECLAIM_MS: '300',
        GENERATION_CONCURRENCY: '4',
        ACCOUNT_MAX_CONCURRENT_TASKS: '4',
        REMOTE_ENGINES: JSON.stringify({ slow: { baseUrl: upstream.url, apiKey: 'sk-fault-test' } }),
      },
    });
    calls = api(t);
    slowVoice = await calls.createVoice({
      name: 'Slow',
      engine: { engine: 'remote', endpoint: 'slow', voice: 'a' },
    });
    espeakVoice = await calls.createVoice({ name: 'Narrator' });
    // Warm-up: a generated task read in full through its stream and finished audio, and a one-shot.
    const warm = await calls.createTask([{ text: 'Warm up the pools.', voiceId: slowVoice }]);
    const warmStream = await calls.streamUrl(warm);
    assert.equal((await send(warmStream)).status, 200);
    const done = await calls.finished(warm);
    assert.equal(done.status, 'generated');
    finishedAudioUrl = String(done.metadata.audio);
    assert.equal((await send(finishedAudioUrl)).status, 200);
    await dropRequest(
      `${t.baseUrl}/api/tts/simple-generate`,
      {
        method: 'POST',
        headers: { ...bearer(t.key), 'content-type': 'application/json' },
        body: JSON.stringify({ text: 'Warm up.', voiceId: espeakVoice, direct_stream: true }),
      },
      Infinity,
      20_000,
    );
  });

  after(async () => {
    await t.close();
    await upstream.close();
    console.log(`disconnect figures (seed ${seed}):\n  ${figures.join('\n  ')}`);
  });

  it('headers, live bodies, finished audio, waiting ranges, one-shot and uploads: counts equal before/after', async () => {
    // Samples further apart than the idle reclaim time: a warm-up session still in its idle window
    // is not taken for part of the baseline.
    await warmWorkers(t.app);
    const baseline = await stableCounts(t.app, 700);
    const voiceForUpload = await calls.createVoice({ name: 'Upload target' });
    const tally: Record<string, number> = {};
    const count = (kind: string) => void (tally[kind] = (tally[kind] ?? 0) + 1);
    const rounds = 4;
    for (let round = 0; round < rounds; round++) {
      // A fresh task generating slowly: its live stream and closed ranges are really live.
      const live = await calls.createTask([
        { text: `Round ${round}, first piece.`, voiceId: slowVoice },
        { text: `Round ${round}, second piece.`, voiceId: slowVoice },
      ]);
      const streamUrl = await calls.streamUrl(live);
      const target = new URL(streamUrl);
      const drops: Promise<void>[] = [];

      // During the request headers (and just after them, before the answer).
      const head = Buffer.from(
        `GET ${target.pathname}${target.search} HTTP/1.1\r\nHost: ${target.host}\r\nRange: bytes=0-\r\n\r\n`,
      );
      drops.push(
        rawDrop(t.baseUrl, head, between(1, head.length), between(0, 50)).then(() => count('headers')),
      );
      // Mid-body of the live stream, on the default session and on new sessions (`i`).
      for (const i of ['', `r${round}`]) {
        const url = i === '' ? streamUrl : `${streamUrl}&i=${i}`;
        drops.push(
          dropRequest(url, {}, between(1, 200_000), between(20, 1500)).then(() => count('live body')),
        );
      }
      // A closed range far beyond what exists yet: the request waits; the client leaves.
      drops.push(
        dropRequest(streamUrl, { headers: { range: 'bytes=5000000-5000999' } }, 1, between(10, 800)).then(
          () => count('waiting range'),
        ),
      );
      // Mid-body of the finished audio.
      drops.push(
        dropRequest(finishedAudioUrl, {}, between(1, 150_000), between(5, 300)).then(() =>
          count('finished audio'),
        ),
      );
      // During one-shot synthesis: the JSON form (waits for storage) and the streamed MP3 forms.
      const oneShotBody = (direct: boolean) =>
        JSON.stringify({
          text: `One shot ${round}.`,
          voiceId: slowVoice,
          ...(direct && { direct_stream: true }),
        });
      for (const direct of [false, true]) {
        const body = oneShotBody(direct);
        const request = Buffer.from(
          `POST /api/tts/simple-generate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.key}\r\n` +
            `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        );
        // Cut anywhere in the request, or after it while the synthesis runs.
        const cut = random() < 0.3 ? between(1, request.length - 1) : request.length;
        drops.push(rawDrop(t.baseUrl, request, cut, between(0, 1500)).then(() => count('one-shot')));
      }
      drops.push(
        dropRequest(
          `${t.baseUrl}/api/tts/simple-generate.mp3?text=${encodeURIComponent(`Streamed ${round}.`)}&voiceId=${slowVoice}`,
          { headers: bearer(t.key) },
          between(1, 100_000),
          between(50, 1500),
        ).then(() => count('one-shot')),
      );
      // During an upload: part of a 512 KiB body, then gone.
      const size = 512 * 1024;
      const upload = Buffer.concat([
        Buffer.from(
          `PUT /api/voice/${voiceForUpload}/lora HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.key}\r\n` +
            `Content-Type: application/octet-stream\r\nContent-Length: ${size}\r\n\r\n`,
        ),
        randomBytes(size),
      ]);
      drops.push(
        rawDrop(t.baseUrl, upload, between(1, upload.length - 1), between(0, 300)).then(() =>
          count('upload'),
        ),
      );
      await Promise.all(drops);
    }

    // Settled: every task (the one-shots' too) finished, sessions reclaimed, nothing open.
    const deadline = AbortSignal.timeout(30_000);
    const unfinished = async () =>
      (await t.app.services.tasks.list(t.accountId, { status: 'pending' })).total +
      (await t.app.services.tasks.list(t.accountId, { status: 'processing' })).total;
    while ((await unfinished()) > 0) {
      if (deadline.aborted) assert.fail('tasks still unfinished');
      await sleep(50);
    }
    const after = await settledCounts(t.app, baseline, 15_000);
    figures.push(`requests dropped: ${JSON.stringify(tally)}`);
    figures.push(`before: ${JSON.stringify(baseline)}`);
    figures.push(`after:  ${JSON.stringify(after)}`);
    assert.deepEqual(after, baseline);
    const dataDir = t.app.config.dataDir;
    assert.deepEqual(
      (await filesUnder(join(dataDir, 'blobs'))).filter((f) => f.includes('.tmp-')),
      [],
    );
    assert.deepEqual(await filesUnder(join(dataDir, 'stream-cache')), [], 'session caches deleted');
  });
});

// ---------------------------------------------------------------------------------------------
// 3. `kill -9` of the real server process at each stage of storing finished audio.

describe('fault: kill -9 at each stage of storing finished audio, restart on the same DATA_DIR', () => {
  const PIECE_SECONDS = 6;
  let upstream: FaultUpstream;
  let tone: Buffer;
  let dataDir = '';
  let key = '';
  let voice = '';
  let env: Record<string, string> = {};
  let server: ServerProcess | undefined;
  const figures: string[] = [];

  before(async () => {
    upstream = await startFaultUpstream();
    tone = await toneMp3(PIECE_SECONDS, 523);
    upstream.handle(
      (_request, res: ServerResponse) => void res.writeHead(200, { 'content-type': 'audio/mpeg' }).end(tone),
    );
    env = {
      RATE_LIMIT_MAX: '100000',
      REMOTE_ENGINES: JSON.stringify({ local: { baseUrl: upstream.url, apiKey: 'sk-fault-test' } }),
    };
    // Seed DATA_DIR in process (a database from the migrated template, an account, a key, a voice).
    dataDir = await mkdtemp(join(tmpdir(), 'voicegen-faults-kill-'));
    const seed = await startTestApp({ dataDir, env });
    key = seed.key;
    voice = await api(seed).createVoice({
      name: 'Tone',
      engine: { engine: 'remote', endpoint: 'local', voice: 'a' },
    });
    await seed.close();
    server = await startServerProcess(dataDir, env);
  });

  after(async () => {
    const code = await server?.stop();
    await upstream.close();
    await rm(dataDir, { recursive: true, force: true });
    console.log(`kill -9 figures:\n  ${figures.join('\n  ')}`);
    assert.equal(code, 0, 'the last server shut down cleanly');
  });

  async function http<T>(method: 'GET' | 'POST', path: string, body?: object): Promise<T> {
    assert.ok(server);
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body && { 'content-type': 'application/json' }) },
      ...(body && { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    assert.equal(res.status, 200, `${method} ${path}: ${text}`);
    return (JSON.parse(text) as { data: T }).data;
  }

  /** Polls (every 2 ms, at most 30 s) until `reached()` holds, then kills the server at once. */
  async function killWhen(reached: () => Promise<boolean>): Promise<void> {
    assert.ok(server);
    const deadline = AbortSignal.timeout(30_000);
    while (!(await reached())) {
      if (deadline.aborted) assert.fail(`stage not reached; server log: ${server.stderr()}`);
      await sleep(2);
    }
    await server.kill9();
  }

  const taskDir = (id: string) => join(dataDir, 'blobs', 'tasks', id);
  const exists = (path: string) =>
    stat(path).then(
      (s) => s.size >= 0,
      () => false,
    );
  /** Sizes of the merged write's temporary files (top level of the task's blob folder). */
  const mergedTmp = async (id: string) => {
    const names = (await readdir(taskDir(id)).catch(() => [] as string[])).filter((n) =>
      n.startsWith('.tmp-'),
    );
    return Promise.all(
      names.map(async (n) => (await stat(join(taskDir(id), n)).catch(() => undefined))?.size ?? 0),
    );
  };

  /** After a restart: the task ends generated (never stuck processing) with a valid, whole MP3. */
  async function recovered(id: string, stage: string, atKill: string): Promise<void> {
    const leftByKill = (await filesUnder(join(dataDir, 'blobs'))).filter((f) => f.includes('.tmp-'));
    const started = Date.now();
    server = await startServerProcess(dataDir, env);
    const startMs = Date.now() - started;
    // The restart sweeps what the killed write left (a resumed merge may have begun a new one).
    const left = (await filesUnder(join(dataDir, 'blobs'))).filter((f) => leftByKill.includes(f));
    assert.deepEqual(left, [], "the restart removed the killed write's temporary file");
    const deadline = AbortSignal.timeout(40_000);
    let task: TaskDetailView;
    for (;;) {
      task = await http<TaskDetailView>('GET', `/api/tts/generate/${id}`);
      if (task.status === 'generated' || task.status === 'failed') break;
      if (deadline.aborted) assert.fail(`task ${id} still ${task.status} after the restart`);
      await sleep(100);
    }
    assert.equal(task.status, 'generated', task.error);
    const res = await fetch(String(task.metadata.audio));
    assert.equal(res.status, 200);
    const mp3 = Buffer.from(await res.arrayBuffer());
    assert.equal(await ffmpegErrors(mp3), '', 'the served MP3 decodes cleanly');
    const info = await probeAudio(mp3);
    assert.equal(info.codec, 'mp3');
    // Two pieces of PIECE_SECONDS and the default interval between them: never a cut-off file.
    assert.ok(info.durationSeconds >= 2 * PIECE_SECONDS - 0.5, `duration ${info.durationSeconds} s`);
    assert.deepEqual(
      (await filesUnder(join(dataDir, 'blobs'))).filter((f) => f.includes('.tmp-')),
      [],
      'no temporary file once generated',
    );
    figures.push(
      `${stage}: at kill ${atKill}, ${leftByKill.length} temp file(s) → restart ${startMs} ms, generated, ${mp3.length} bytes, ${info.durationSeconds.toFixed(2)} s, ffmpeg clean`,
    );
  }

  const twoPieces = (label: string) => [
    { text: `${label}: the first piece.`, voiceId: voice },
    { text: `${label}: the second piece.`, voiceId: voice },
  ];

  it('while a piece is being generated (its engine call in flight, partial PCM on disk)', async () => {
    let release: (() => void) | undefined;
    upstream.handle(({ input }, res: ServerResponse) => {
      res.writeHead(200, { 'content-type': 'audio/mpeg' });
      if (!input.includes('second')) return void res.end(tone);
      res.write(tone.subarray(0, tone.length >> 1)); // then holds until the server dies
      release = () => res.destroy();
    });
    const { id } = await http<{ id: string }>('POST', '/api/tts/generate', {
      contents: twoPieces('generating'),
    });
    const pcm = join(dataDir, 'work', 'tasks', id, '1.pcm');
    await killWhen(
      async () => release !== undefined && ((await stat(pcm).catch(() => undefined))?.size ?? 0) > 0,
    );
    release?.();
    const atKill = `piece 0 stored: ${await exists(join(taskDir(id), 'contents', '0.mp3'))}, piece 1 PCM ${(await stat(pcm)).size} bytes`;
    upstream.handle(
      (_request, res: ServerResponse) => void res.writeHead(200, { 'content-type': 'audio/mpeg' }).end(tone),
    );
    await recovered(id, 'while pieces generate', atKill);
  });

  it('after every piece is stored, before the merged audio is', async () => {
    const { id } = await http<{ id: string }>('POST', '/api/tts/generate', {
      contents: twoPieces('pieces stored'),
    });
    await killWhen(() => exists(join(taskDir(id), 'contents', '1.mp3')));
    const tmp = await mergedTmp(id);
    const atKill = `pieces stored, merged audio.mp3 ${(await exists(join(taskDir(id), 'audio.mp3'))) ? 'present' : 'absent'}, merged temp files ${JSON.stringify(tmp)}`;
    await recovered(id, 'pieces stored, merged not yet', atKill);
  });

  it('while the merged audio is encoded (its file growing beside the pieces, before its blob write)', async () => {
    const { id } = await http<{ id: string }>('POST', '/api/tts/generate', {
      contents: twoPieces('merging'),
    });
    // The merged MP3 grows in the work folder while the pieces are generated; its blob is written
    // (a temporary file renamed into place) once it is complete.
    const merged = join(dataDir, 'work', 'tasks', id, 'task.mp3');
    await killWhen(async () => ((await stat(merged).catch(() => undefined))?.size ?? 0) > 64 * 1024);
    const atKill = `merged work file ${(await stat(merged)).size} bytes, merged temp files ${JSON.stringify(await mergedTmp(id))}, audio.mp3 ${(await exists(join(taskDir(id), 'audio.mp3'))) ? 'present' : 'absent'}`;
    await recovered(id, 'during the merged encode', atKill);
  });

  it('right after the merged blob is in place (before the task is marked generated)', async () => {
    const { id } = await http<{ id: string }>('POST', '/api/tts/generate', { contents: twoPieces('merged') });
    await killWhen(() => exists(join(taskDir(id), 'audio.mp3')));
    const atKill = `audio.mp3 ${(await stat(join(taskDir(id), 'audio.mp3'))).size} bytes`;
    await recovered(id, 'merged blob stored', atKill);
  });
});

// ---------------------------------------------------------------------------------------------
// Found by the disconnect runs: a session destroyed (idle reclaim, eviction, shutdown) between
// opening a piece and the encoder starting to read it crashed the process (uncaughtException).

describe('fault: a piece reader aborted before anyone reads it', () => {
  it('is no uncaught error; reading it later reports the abort', async () => {
    const root = await mkdtemp(join(tmpdir(), 'voicegen-faults-piece-'));
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => void uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    try {
      let generated = false;
      const pieces = new FsPieceAudioStore(root, new MemoryTaskEvents(), async () => ({
        piece: generated ? 'generated' : 'waiting',
        taskUnfinished: !generated,
      }));
      const writer = await pieces.startPiece('task', 0, { kind: 'none' });
      await writer.append(new Int16Array(4096));
      // The piece being generated (a live cache reader), then complete (a file reader).
      for (const stage of ['live piece', 'complete piece'] as const) {
        if (stage === 'complete piece') {
          await writer.finish();
          generated = true;
          pieces.pieceRecorded('task', 0);
        }
        const controller = new AbortController();
        const reader = await pieces.openPiece('task', 0, controller.signal);
        controller.abort(new Error('stream session closed'));
        await sleep(20);
        assert.deepEqual(uncaught, [], stage);
        await assert.rejects(async () => {
          for await (const chunk of reader) void chunk;
        }, stage);
      }
    } finally {
      process.off('uncaughtException', onUncaught);
      await rm(root, { recursive: true, force: true });
    }
  });
});
