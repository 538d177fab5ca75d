/**
 * Lease fencing of generation tasks: TaskStore.claim and the fenced writes, on the embedded
 * database and on the PostgreSQL test server; and the TaskRunner under a lost lease and at the
 * attempt limit (real database, blob store, piece files and encoders; a gated in-test speech engine
 * so the test decides when synthesis may finish).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { freshPostgresDatabase } from '../../../test/helpers/servers.js';
import { createEncoderPool, type EncoderPool } from '../../audio/encoder-pool.js';
import type { SpeechEngine } from '../../audio/engines/engine.js';
import { AppError } from '../../errors/app-error.js';
import { FsBlobStore } from '../../storage/blob-store.fs.js';
import { openDatabase, type DatabaseHandle } from '../../storage/database.js';
import type { TaskRow, TaskStatus } from '../../storage/schema.js';
import { FsPieceAudioStore } from '../piece-audio.fs.js';
import { MemoryTaskEvents } from '../queue/task-events.memory.js';
import { MemoryTaskQueue } from '../queue/task-queue.memory.js';
import { LeaseLostError } from '../queue/task-queue.js';
import { MAX_ATTEMPTS, TaskRunner, type TaskRunnerDeps } from './task-runner.js';
import { TaskStore } from '../task-store.js';

const ACCOUNT = 'acct-1';

/** Inserts an account (once) and a one-piece task in the given state. */
async function insertTask(
  handle: DatabaseHandle,
  id: string,
  state: { status: TaskStatus; attempts?: number; pieceStatus?: TaskStatus; createdAt?: Date },
): Promise<void> {
  await handle.db
    .insertInto('accounts')
    .values({ id: ACCOUNT, name: 'leases', created_at: new Date() })
    .onConflict((oc) => oc.doNothing())
    .execute();
  const now = state.createdAt ?? new Date();
  const task: TaskRow = {
    id,
    account_id: ACCOUNT,
    status: state.status,
    type: 'contents',
    auth_token: '0'.repeat(32),
    request: '{}',
    characters: 5,
    error: null,
    attempts: state.attempts ?? 0,
    lease_token: null,
    worker_url: null,
    audio_key: null,
    duration_seconds: null,
    created_at: now,
    updated_at: now,
    generated_at: null,
    cancel_reason: null,
    audio_bytes: '0',
  };
  await new TaskStore(handle.db).insert({
    task,
    pieces: [
      {
        task_id: id,
        idx: 0,
        text: 'Hello',
        voice_id: 'voice-1',
        binding: JSON.stringify({ engine: 'espeak', voice: 'en-us' }),
        params: JSON.stringify({ speechRate: 1, interval: 0 }),
        status: state.pieceStatus ?? 'pending',
        samples: null,
        audio_key: null,
        generated_at: null,
      },
    ],
  });
}

async function pieceOf(
  store: TaskStore,
  taskId: string,
): Promise<{ status: string; samples: string | null }> {
  const [piece] = await store.pieces(taskId);
  assert.ok(piece);
  return { status: piece.status, samples: piece.samples };
}

const databases: { name: string; open(): Promise<{ handle: DatabaseHandle; drop(): Promise<void> }> }[] = [
  {
    name: 'embedded (PGlite)',
    open: async () => {
      const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-leases-'));
      const handle = await openDatabase({ dataDir });
      return { handle, drop: () => rm(dataDir, { recursive: true, force: true }) };
    },
  },
  {
    name: 'PostgreSQL',
    open: async () => {
      const server = await freshPostgresDatabase();
      const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-leases-'));
      const handle = await openDatabase({ dataDir, databaseUrl: server.url });
      return {
        handle,
        drop: async () => {
          await rm(dataDir, { recursive: true, force: true });
          await server.drop();
        },
      };
    },
  },
];

for (const database of databases) {
  void describe(`TaskStore leases: ${database.name}`, () => {
    let opened: { handle: DatabaseHandle; drop(): Promise<void> };
    let handle: DatabaseHandle;
    let store: TaskStore;
    before(async () => {
      opened = await database.open();
      handle = opened.handle;
      store = new TaskStore(handle.db);
    });
    after(async () => {
      await handle.close();
      await opened.drop();
    });

    void test('claim marks the task processing under the token, counts the attempt, restarts stale pieces', async () => {
      await insertTask(handle, 'claim-1', { status: 'processing', attempts: 1, pieceStatus: 'processing' });
      const claimed = await store.claim('claim-1', 'token-1', 'http://node-1.test');
      assert.equal(claimed?.status, 'processing');
      assert.equal(claimed?.attempts, 2);
      assert.equal(claimed?.lease_token, 'token-1');
      assert.equal(claimed?.worker_url, 'http://node-1.test');
      assert.equal((await pieceOf(store, 'claim-1')).status, 'pending');
    });

    void test('claim of a finished or missing task returns undefined and changes nothing', async () => {
      for (const status of ['generated', 'failed'] as const) {
        await insertTask(handle, `done-${status}`, { status, attempts: 1 });
        assert.equal(await store.claim(`done-${status}`, 'token-x', 'http://node-1.test'), undefined);
        const row = await store.get(`done-${status}`);
        assert.equal(row?.status, status);
        assert.equal(row?.attempts, 1);
        assert.equal(row?.lease_token, null);
      }
      assert.equal(await store.claim('no-such-task', 'token-x', 'http://node-1.test'), undefined);
    });

    void test('after another delivery claims the task, every write under the old token fails and changes nothing', async () => {
      await insertTask(handle, 'fenced-1', { status: 'pending' });
      await store.claim('fenced-1', 'old', 'http://node-1.test');
      await store.setPieceStatus('fenced-1', 0, 'processing', 'old'); // still the holder: allowed
      await store.claim('fenced-1', 'new', 'http://node-2.test');

      const lost = (err: unknown): boolean => err instanceof LeaseLostError;
      await assert.rejects(store.setPieceStatus('fenced-1', 0, 'processing', 'old'), lost);
      await assert.rejects(store.pieceGenerated('fenced-1', 0, 100, 'k/0.mp3', 'old'), lost);
      await assert.rejects(store.markGenerated('fenced-1', 'k/audio.mp3', 1, 'old'), lost);
      await assert.rejects(store.markFailed('fenced-1', 'boom', 0, 'old'), lost);
      const row = await store.get('fenced-1');
      assert.equal(row?.status, 'processing');
      assert.equal(row?.lease_token, 'new');
      assert.equal(row?.worker_url, 'http://node-2.test');
      assert.equal(row?.audio_key, null);
      assert.equal(row?.error, null);
      assert.deepEqual(await pieceOf(store, 'fenced-1'), { status: 'pending', samples: null });

      // The new holder's writes go through.
      await store.pieceGenerated('fenced-1', 0, 100, 'k/0.mp3', 'new');
      await store.markGenerated('fenced-1', 'k/audio.mp3', 1, 'new');
      const generated = await store.get('fenced-1');
      assert.deepEqual(
        [generated?.status, generated?.audio_key, generated?.duration_seconds],
        ['generated', 'k/audio.mp3', 1],
      );
      assert.deepEqual(await pieceOf(store, 'fenced-1'), { status: 'generated', samples: '100' });
    });

    void test("stored audio bytes: a piece stored again replaces its earlier size in the task's total", async () => {
      await insertTask(handle, 'bytes-1', { status: 'pending' });
      await store.claim('bytes-1', 'first', 'http://node-1.test');
      await store.pieceGenerated('bytes-1', 0, 100, 'k/0.mp3', 'first', 1000);
      // The node died; another delivery generates and stores the same piece again.
      await store.claim('bytes-1', 'second', 'http://node-2.test');
      await store.pieceGenerated('bytes-1', 0, 100, 'k/0.mp3', 'second', 1200);
      assert.equal(Number((await store.get('bytes-1'))?.audio_bytes), 1200);
      await assert.rejects(store.pieceGenerated('bytes-1', 0, 100, 'k/0.mp3', 'first', 5000), LeaseLostError);
      await store.markGenerated('bytes-1', 'k/audio.mp3', 1, 'second', 3000);
      assert.equal(Number((await store.get('bytes-1'))?.audio_bytes), 4200);
    });

    void test('unfinishedIds lists pending and processing tasks, oldest first', async () => {
      const base = Date.parse('2001-01-01T00:00:00Z');
      await insertTask(handle, 'old-processing', { status: 'processing', createdAt: new Date(base) });
      await insertTask(handle, 'older-pending', { status: 'pending', createdAt: new Date(base - 1000) });
      await insertTask(handle, 'old-generated', { status: 'generated', createdAt: new Date(base - 2000) });
      const ids = await store.unfinishedIds();
      assert.deepEqual(ids.slice(0, 2), ['older-pending', 'old-processing']);
      assert.ok(!ids.includes('old-generated'));
    });
  });
}

/** A speech engine that yields one chunk, then waits for `release()` before the last one. */
class GatedEngine implements SpeechEngine {
  calls = 0;
  private readonly startedOnce: Promise<void>;
  private markStarted = (): void => undefined;
  private readonly gate: Promise<void>;
  private open = (): void => undefined;

  constructor() {
    this.startedOnce = new Promise((resolve) => (this.markStarted = resolve));
    this.gate = new Promise((resolve) => (this.open = resolve));
  }

  get started(): Promise<void> {
    return this.startedOnce;
  }

  release(): void {
    this.open();
  }

  async *synthesize(_req: unknown, signal: AbortSignal): AsyncIterable<Int16Array> {
    this.calls++;
    yield new Int16Array(4410);
    this.markStarted();
    await new Promise<void>((resolve, reject) => {
      void this.gate.then(resolve);
      signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
    });
    yield new Int16Array(4410);
  }
}

async function until(condition: () => Promise<boolean> | boolean, what: string): Promise<void> {
  const deadline = AbortSignal.timeout(15_000);
  while (!(await condition())) {
    if (deadline.aborted) assert.fail(`timed out waiting until ${what}`);
    await sleep(10);
  }
}

void describe('TaskRunner under leases', () => {
  let dir: string;
  let handle: DatabaseHandle;
  let store: TaskStore;
  let encoders: EncoderPool;
  let engine: GatedEngine;
  let runner: TaskRunner;
  let logged: { level: 'warn' | 'error'; msg: string }[];

  let blobs: FsBlobStore;
  // One database and encoder pool for the describe (initdb is slow); a runner and engine per test.
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'voicegen-runner-'));
    handle = await openDatabase({ dataDir: join(dir, 'data') });
    store = new TaskStore(handle.db);
    encoders = createEncoderPool({ size: 1 });
  });

  after(async () => {
    await encoders.close();
    await handle.close();
    await rm(dir, { recursive: true, force: true });
  });

  beforeEach(async () => {
    engine = new GatedEngine();
    logged = [];
    blobs = new FsBlobStore(join(dir, 'blobs'));
    const events = new MemoryTaskEvents();
    const deps: TaskRunnerDeps = {
      store,
      queue: new MemoryTaskQueue(),
      workerUrl: 'http://this-node.test',
      pieceAudio: new FsPieceAudioStore(join(dir, 'work'), events, async () => ({
        piece: 'waiting',
        taskUnfinished: true,
      })),
      blobs,
      encoders,
      engineFor: () => engine,
      events,
      concurrency: 1,
      workFilesIdleMs: 60_000,
      log: {
        info: () => undefined,
        warn: (_obj: unknown, msg?: string) => void logged.push({ level: 'warn', msg: String(msg) }),
        error: (_obj: unknown, msg?: string) => void logged.push({ level: 'error', msg: String(msg) }),
      },
    };
    runner = new TaskRunner(deps);
  });

  afterEach(async () => {
    engine.release();
    await runner.stop();
    await blobs.close();
    await handle.db.deleteFrom('tasks').execute();
  });

  void test('a holder whose task was claimed by another delivery stops at its next write, touching nothing', async () => {
    await insertTask(handle, 'taken-over', { status: 'pending' });
    await runner.start();
    await engine.started;
    const mine = await store.get('taken-over');
    assert.equal(mine?.worker_url, 'http://this-node.test');
    // Another node got the task after this node's lease expired (a long pause, a partition).
    const theirs = await store.claim('taken-over', 'their-token', 'http://other-node.test');
    assert.equal(theirs?.attempts, 2);
    engine.release();
    await until(() => runner.active === 0, 'the runner let go of the task');

    const row = await store.get('taken-over');
    assert.equal(row?.status, 'processing');
    assert.equal(row?.lease_token, 'their-token');
    assert.equal(row?.worker_url, 'http://other-node.test');
    assert.equal(row?.audio_key, null);
    assert.equal(row?.error, null);
    assert.deepEqual(await pieceOf(store, 'taken-over'), { status: 'pending', samples: null });
    assert.deepEqual(logged, [{ level: 'warn', msg: 'generation lease lost' }]);
  });

  /**
   * Makes the first call of `store[method]` fail with `message` (as while PostgreSQL restarts);
   * `calls()` counts the calls, `restore()` puts the method back.
   */
  function failingOnce(
    method: 'claimWithin' | 'setPieceStatus' | 'markFailed',
    message: string,
  ): { calls: () => number; restore: () => void } {
    const patched = store as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const original = store[method].bind(store) as (...args: unknown[]) => Promise<unknown>;
    let calls = 0;
    // An own property over the prototype's method, deleted by restore().
    patched[method] = async (...args) => {
      if (calls++ === 0) throw new Error(message);
      return original(...args);
    };
    return { calls: () => calls, restore: () => delete patched[method] };
  }

  /**
   * Starts the runner with the first call of `store[method]` failing with `message`; resolves with
   * the calls of that method once the task is generated. Bounded: without a second delivery the
   * engine is never reached and the wait times out.
   */
  async function generatedAfterOneFailure(
    id: string,
    method: 'claimWithin' | 'setPieceStatus',
    message: string,
  ): Promise<number> {
    const failing = failingOnce(method, message);
    try {
      await runner.start();
      await until(() => engine.calls === 1, 'the task is delivered again and reaches the engine');
      engine.release();
      await until(async () => (await store.get(id))?.status === 'generated', 'the task is generated');
    } finally {
      failing.restore();
    }
    return failing.calls();
  }

  void test('a task whose claim fails (the database did not answer) is delivered again and generated', async () => {
    await insertTask(handle, 'claim-fails', { status: 'pending' });
    const claims = await generatedAfterOneFailure(
      'claim-fails',
      'claimWithin',
      'Connection terminated unexpectedly',
    );
    assert.equal(claims, 2);
    assert.deepEqual(logged, [{ level: 'error', msg: 'could not claim a generation task; retrying later' }]);
  });

  void test('a generation interrupted by the database going away is delivered again and resumed, not failed', async () => {
    await insertTask(handle, 'db-blip', { status: 'pending' });
    const writes = await generatedAfterOneFailure(
      'db-blip',
      'setPieceStatus',
      'Client has encountered a connection error and is not queryable',
    );
    assert.ok(writes >= 2, `${writes} piece writes`);
    const row = await store.get('db-blip');
    assert.equal(row?.attempts, 2, 'a second delivery resumed it');
    assert.equal(row?.error, null);
    assert.deepEqual(logged, [
      { level: 'warn', msg: 'generation interrupted: a backing service is unavailable; retrying later' },
    ]);
  });

  void test('abort(taskId) stops the in-flight engine call at once, fails the task with the reason and frees the slot', async () => {
    await insertTask(handle, 'to-cancel', { status: 'pending' });
    await insertTask(handle, 'next-in-line', { status: 'pending', createdAt: new Date(Date.now() + 1000) });
    await runner.start();
    await engine.started; // the engine call of 'to-cancel' is waiting (gated, never released here)
    assert.equal(runner.abort('next-in-line', new Error('not running here')), false);
    assert.equal(
      runner.abort('to-cancel', new AppError('TTS_GENERATE_FAILED', 'cancelled by the user')),
      true,
    );
    await until(async () => (await store.get('to-cancel'))?.status === 'failed', 'the task is failed');
    const row = await store.get('to-cancel');
    assert.equal(row?.error, 'cancelled by the user');
    assert.equal((await pieceOf(store, 'to-cancel')).status, 'failed');
    // The one slot (concurrency 1) is free: the next task is delivered to the engine.
    await until(() => engine.calls === 2, 'the next task reached the engine');
    assert.equal(runner.abort('to-cancel', new Error('again')), false);
    assert.deepEqual(logged, []);
  });

  void test(`a task delivered after ${MAX_ATTEMPTS} interrupted attempts is failed without generating`, async () => {
    await insertTask(handle, 'crash-loop', {
      status: 'processing',
      attempts: MAX_ATTEMPTS,
      pieceStatus: 'processing',
    });
    await insertTask(handle, 'resumed', { status: 'processing', attempts: MAX_ATTEMPTS - 1 });
    engine.release();
    await runner.start();
    await until(
      async () => (await store.get('resumed'))?.status === 'generated',
      'the resumed task is generated',
    );
    const failed = await store.get('crash-loop');
    assert.equal(failed?.status, 'failed');
    assert.equal(failed?.error, `generation was interrupted ${MAX_ATTEMPTS} times`);
    assert.equal(engine.calls, 1); // only the resumed task was synthesised
    assert.equal((await store.get('resumed'))?.attempts, MAX_ATTEMPTS);
    assert.ok(logged.every((l) => l.level === 'warn'));
  });

  void test('a task whose failure cannot be recorded (the database did not answer) is failed on a later delivery', async () => {
    await insertTask(handle, 'fail-unrecorded', { status: 'processing', attempts: MAX_ATTEMPTS });
    const failing = failingOnce('markFailed', 'Connection terminated unexpectedly');
    try {
      await runner.start();
      await until(
        async () => (await store.get('fail-unrecorded'))?.status === 'failed',
        'the task is failed, not left processing',
      );
    } finally {
      failing.restore();
    }
    assert.equal(failing.calls(), 2);
    const row = await store.get('fail-unrecorded');
    assert.equal(row?.error, `generation was interrupted ${MAX_ATTEMPTS + 1} times`);
    assert.equal(engine.calls, 0);
  });

  void test('a cancellation whose failure cannot be recorded at once still ends the task failed with its reason', async () => {
    await insertTask(handle, 'cancel-unrecorded', { status: 'pending' });
    const failing = failingOnce(
      'markFailed',
      'Client has encountered a connection error and is not queryable',
    );
    try {
      await runner.start();
      await engine.started;
      // What TaskService.cancel does: the reason stored, then the running generation aborted.
      await handle.db
        .updateTable('tasks')
        .set({ cancel_reason: 'cancelled by the user' })
        .where('id', '=', 'cancel-unrecorded')
        .execute();
      runner.abort('cancel-unrecorded', new AppError('TTS_GENERATE_FAILED', 'cancelled by the user'));
      await until(
        async () => (await store.get('cancel-unrecorded'))?.status === 'failed',
        'the task is failed, not left processing',
      );
    } finally {
      failing.restore();
    }
    const row = await store.get('cancel-unrecorded');
    assert.equal(row?.error, 'cancelled by the user');
    assert.equal(engine.calls, 1, 'the later delivery saw the cancellation and did not generate');
  });
});
