// Quotas and fairness through the real app: per-account quotas (429 + Retry-After naming the quota,
// reported with usage in account info), a generation queue fair across accounts, cancellation of
// pending and processing tasks (`POST /api/tts/generate/{id}/cancel`, our extension) and one-shot
// synthesis answering 503 NO_WORKER_AVAILABLE instead of waiting without bound.
// One generation slot per lane (GENERATION_CONCURRENCY=1, SHORT_TASK_CONCURRENCY=1); a task of a remote voice whose local upstream
// never answers holds it while a test needs every slot busy. Assertions are on order and state,
// never on how long anything took; every wait has a deadline.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TaskDetailView } from '../src/tasks/task-service.js';
import { startFaultUpstream, type FaultUpstream, type UpstreamHandler } from './helpers/fault-upstream.js';
import { bearer, speechMp3, startTestApp, type TestApp } from './helpers/test-app.js';

const MAX_QUEUED = 6;
const DAILY_CHARACTERS = 2000;

// The upstream remote engine (test/helpers/fault-upstream.ts): hangs by default (never sends headers).
const hanging: UpstreamHandler = () => undefined;
let upstream: FaultUpstream;

let t: TestApp;
let upstreamMp3: Buffer = Buffer.alloc(0);

before(async () => {
  upstream = await startFaultUpstream();
  upstream.handle(hanging);
  t = await startTestApp({
    listen: true,
    env: {
      GENERATION_CONCURRENCY: '1',
      // One slot in the short lane too, so a test can hold every slot of either lane.
      SHORT_TASK_CONCURRENCY: '1',
      ACCOUNT_MAX_QUEUED_TASKS: String(MAX_QUEUED),
      ACCOUNT_MAX_CONCURRENT_TASKS: '1',
      ACCOUNT_DAILY_CHARACTERS: String(DAILY_CHARACTERS),
      ONE_SHOT_START_TIMEOUT_MS: '1000',
      // The upstream hangs until a test cancels the task: no engine deadline may end it first.
      ENGINE_FIRST_BYTE_TIMEOUT_MS: '120000',
      ENGINE_CALL_TIMEOUT_MS: '120000',
      REMOTE_ENGINES: JSON.stringify({ local: { baseUrl: upstream.url } }),
    },
  });
  upstreamMp3 = await speechMp3(
    t.app,
    'This sentence comes from the remote engine, and it goes on for a little while before it stops.',
  );
});

after(async () => {
  await t.close();
  await upstream.close();
});

// ---------------------------------------------------------------------------------------------

interface Tenant {
  key: string;
  accountId: string;
  espeak: string;
  remote: string;
}

async function tenant(): Promise<Tenant> {
  const { key, accountId } = await t.newAccount();
  const voice = async (payload: object): Promise<string> => {
    const res = await t.app.http.inject({ method: 'POST', url: '/api/voice', headers: bearer(key), payload });
    assert.equal(res.statusCode, 200, res.body);
    return res.json<{ data: { id: string } }>().data.id;
  };
  return {
    key,
    accountId,
    espeak: await voice({ name: 'Narrator' }),
    remote: await voice({ name: 'Remote', engine: { engine: 'remote', endpoint: 'local', voice: 'alloy' } }),
  };
}

/** A create request with `body` as it is, JSON or not. */
async function submitRaw(who: Tenant, body: string) {
  return t.app.http.inject({
    method: 'POST',
    url: '/api/tts/generate',
    headers: { ...bearer(who.key), 'content-type': 'application/json' },
    payload: body,
  });
}

async function submit(who: Tenant, text: string, voiceId = who.espeak) {
  return t.app.http.inject({
    method: 'POST',
    url: '/api/tts/generate',
    headers: bearer(who.key),
    payload: { contents: [{ text, voiceId }] },
  });
}

async function createTask(who: Tenant, text: string, voiceId = who.espeak): Promise<string> {
  const res = await submit(who, text, voiceId);
  assert.equal(res.statusCode, 200, res.body);
  return res.json<{ data: { id: string } }>().data.id;
}

async function cancel(who: Tenant, id: string) {
  return t.app.http.inject({
    method: 'POST',
    url: `/api/tts/generate/${id}/cancel`,
    headers: bearer(who.key),
  });
}

async function accountInfo(who: Tenant) {
  const res = await t.app.http.inject({ method: 'GET', url: '/api/account/info', headers: bearer(who.key) });
  assert.equal(res.statusCode, 200, res.body);
  return res.json<{ data: AccountInfo; user: AccountInfo }>();
}

interface AccountInfo {
  id: string;
  quota: Record<string, number | null>;
  usage: {
    queuedTasks: number;
    pendingTasks: number;
    processingTasks: number;
    charactersToday: number;
    charactersRemaining: number | null;
    resetsAt: string;
  };
}

/** Waits (at most 20 s) until the task satisfies `done`. */
async function taskWhen(
  who: Tenant,
  id: string,
  done: (task: TaskDetailView) => boolean,
  what: string,
): Promise<TaskDetailView> {
  const deadline = AbortSignal.timeout(20_000);
  for (;;) {
    const task = await t.app.services.tasks.get(who.accountId, id);
    if (done(task)) return task;
    if (deadline.aborted) assert.fail(`task ${id} is still ${task.status}, not ${what}`);
    await sleep(20);
  }
}

const finished = (task: TaskDetailView): boolean => task.status === 'generated' || task.status === 'failed';

/** A text above SHORT_TASK_MAX_CHARS (500 by default): its task takes the main lane. */
const LONG_TEXT = 'This long text goes to the main lane of generation. '.repeat(12);

/**
 * Holds a generation slot with a task on the hanging upstream, until release(): the only slot of
 * the short-task lane (every task of these tests is short, so it is the slot they compete for),
 * or with `lane: 'main'` the only slot of the main lane.
 */
async function holdTheSlot(
  lane: 'short' | 'main' = 'short',
  holder?: Tenant,
): Promise<{ id: string; release(): Promise<void> }> {
  upstream.handle(hanging);
  holder ??= await tenant();
  const text = lane === 'short' ? 'This upstream never answers.' : LONG_TEXT;
  const id = await createTask(holder, text, holder.remote);
  await taskWhen(holder, id, (task) => task.status === 'processing', 'processing');
  return {
    id,
    release: async () => {
      const res = await cancel(holder, id);
      assert.equal(res.statusCode, 200, res.body);
      await upstream.connectionsClosed();
    },
  };
}

/** The error body of a reportable error, with the request id of the header. */
function assertReportable(
  res: { statusCode: number; headers: Record<string, unknown>; json<T>(): T },
  status: number,
  code: string,
): string {
  assert.equal(res.statusCode, status);
  const body = res.json<{ status: number; code: string; message: string; requestId?: string }>();
  assert.equal(body.status, status);
  assert.equal(body.code, code);
  assert.equal(body.requestId, res.headers['x-service-app-request-id']);
  return body.message;
}

function retryAfter(res: { headers: Record<string, unknown> }): number {
  const value = Number(res.headers['retry-after']);
  assert.ok(Number.isInteger(value) && value >= 1, `Retry-After is ${String(res.headers['retry-after'])}`);
  return value;
}

// ---------------------------------------------------------------------------------------------

describe('per-account quotas', () => {
  it(`queued tasks: beyond ${MAX_QUEUED} pending or processing → 429 with Retry-After naming the quota; others unaffected`, async () => {
    const slot = await holdTheSlot();
    const flooder = await tenant();
    const other = await tenant();
    const ids: string[] = [];
    for (let i = 0; i < MAX_QUEUED; i++) ids.push(await createTask(flooder, `Task number ${i}.`));

    const refused = await submit(flooder, 'One too many.');
    assert.match(assertReportable(refused, 429, 'RATE_LIMIT_EXCEEDED'), /queued tasks quota exceeded/);
    retryAfter(refused);
    // A large body is refused before it is read: even one that is not JSON at all is a 429, not a 400.
    const large = await submitRaw(flooder, `{"contents": [{"text": "${'Never parsed. '.repeat(3000)}`);
    assert.match(assertReportable(large, 429, 'RATE_LIMIT_EXCEEDED'), /queued tasks quota exceeded/);
    retryAfter(large);
    // Another account's large body is read and answered as usual (here: not JSON).
    const otherLarge = await submitRaw(other, `{"contents": [{"text": "${'Parsed. '.repeat(3000)}`);
    assert.equal(otherLarge.statusCode, 400);
    assert.equal(otherLarge.json<{ code: string }>().code, 'VALIDATION_INVALID_FORMAT');

    const info = await accountInfo(flooder);
    assert.deepEqual(info.user, info.data, 'the hosted API reads the account from top-level user');
    assert.equal(info.data.quota.maxQueuedTasks, MAX_QUEUED);
    assert.equal(info.data.quota.maxConcurrentTasks, 1);
    assert.equal(info.data.quota.asyncBaseConcurrent, 1);
    assert.equal(info.data.usage.queuedTasks, MAX_QUEUED);
    assert.equal(info.data.usage.pendingTasks, MAX_QUEUED);
    assert.equal(info.data.usage.processingTasks, 0);

    // Another account is not limited by the first.
    const theirs = await createTask(other, 'Not affected.');
    // A cancelled task frees its place at once.
    assert.equal((await cancel(flooder, ids[0] ?? '')).statusCode, 200);
    ids.push(await createTask(flooder, 'Fits again.'));

    for (const id of ids.slice(1)) assert.equal((await cancel(flooder, id)).statusCode, 200);
    assert.equal((await cancel(other, theirs)).statusCode, 200);
    assert.equal((await accountInfo(flooder)).data.usage.queuedTasks, 0);
    await slot.release();
  });

  it(`characters per UTC day: beyond ${DAILY_CHARACTERS} → 429 with Retry-After until 00:00 UTC; usage in account info`, async () => {
    const slot = await holdTheSlot();
    const who = await tenant();
    const tooLarge = await submit(who, 'x'.repeat(DAILY_CHARACTERS + 1));
    assert.match(
      assertReportable(tooLarge, 429, 'RATE_LIMIT_EXCEEDED'),
      /this request alone has 2001 characters/,
    );
    const first = await createTask(who, 'a'.repeat(1500));
    const refused = await submit(who, 'b'.repeat(600));
    const message = assertReportable(refused, 429, 'RATE_LIMIT_EXCEEDED');
    assert.match(message, /daily characters quota exceeded: 1500 of 2000/);
    const now = Date.now();
    const midnight = new Date(now);
    midnight.setUTCHours(24, 0, 0, 0);
    const expected = Math.ceil((midnight.getTime() - now) / 1000);
    assert.ok(Math.abs(retryAfter(refused) - expected) <= 5, 'Retry-After counts the seconds to 00:00 UTC');

    // Exactly what is left still fits.
    const second = await createTask(who, 'c'.repeat(500));
    const info = await accountInfo(who);
    assert.equal(info.data.quota.dailyCharacters, DAILY_CHARACTERS);
    assert.equal(info.data.usage.charactersToday, 2000);
    assert.equal(info.data.usage.charactersRemaining, 0);
    assert.equal(info.data.usage.resetsAt, midnight.toISOString());
    assert.equal((await submit(who, 'd')).statusCode, 429);

    // Accepted characters stay counted when a task is cancelled.
    for (const id of [first, second]) assert.equal((await cancel(who, id)).statusCode, 200);
    assert.equal((await accountInfo(who)).data.usage.charactersToday, 2000);
    await slot.release();
  });
});

describe('a generation queue fair across accounts', () => {
  it("a flooding account's tasks do not hold back another account's single task", async () => {
    const slot = await holdTheSlot();
    const flooder = await tenant();
    const single = await tenant();
    const flood: string[] = [];
    for (let i = 0; i < MAX_QUEUED; i++) flood.push(await createTask(flooder, `Flood ${i}.`));
    const mine = await createTask(single, 'Mine.');
    await slot.release();

    const done = await taskWhen(single, mine, finished, 'finished');
    assert.equal(done.status, 'generated', done.error);
    // At most one flood task (the first in line when the slot freed) went before it.
    const generatedBefore: string[] = [];
    for (const id of flood) {
      const task = await t.app.services.tasks.get(flooder.accountId, id);
      const at = task.metadata.generatedAt;
      if (at !== undefined && done.metadata.generatedAt !== undefined && at < done.metadata.generatedAt)
        generatedBefore.push(id);
    }
    assert.ok(generatedBefore.length <= 1, `${generatedBefore.length} flood tasks were generated first`);
    assert.deepEqual(generatedBefore, flood.slice(0, generatedBefore.length), 'the flood keeps its order');

    // Stop the rest of the flood (cancel answers 400 for a task that finished meanwhile).
    for (const id of flood) {
      const res = await cancel(flooder, id);
      assert.ok(res.statusCode === 200 || res.statusCode === 400, res.body);
    }
  });
});

describe('POST /api/tts/generate/{id}/cancel (our extension)', () => {
  it('a pending task fails at once, idempotently; DELETE stays 403 until then; another account gets 404', async () => {
    const slot = await holdTheSlot();
    const who = await tenant();
    const stranger = await tenant();
    const id = await createTask(who, 'Waiting in line.');

    const deleting = await t.app.http.inject({
      method: 'DELETE',
      url: `/api/tts/generate/${id}`,
      headers: bearer(who.key),
    });
    assert.equal(deleting.statusCode, 403);
    assert.equal(deleting.json<{ code: string }>().code, 'GENERATE_DELETE_IN_PROGRESS');

    const foreign = await cancel(stranger, id);
    assert.equal(foreign.statusCode, 404);
    assert.equal(foreign.json<{ code: string }>().code, 'GENERATE_NOT_FOUND');
    assert.equal((await cancel(who, '00000000-0000-4000-8000-000000000000')).statusCode, 404);

    for (let attempt = 0; attempt < 2; attempt++) {
      const res = await cancel(who, id);
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json<{ status: number; data: TaskDetailView }>();
      assert.equal(body.status, 200);
      assert.equal(body.data.id, id);
      assert.equal(body.data.status, 'failed');
      assert.equal(body.data.error, 'cancelled by the client');
    }
    // Its stream endpoints say so; a failed task may be deleted.
    const detail = await t.app.http.inject({
      method: 'GET',
      url: `/api/tts/generate/${id}?stream=true`,
      headers: bearer(who.key),
    });
    const streamUrl = new URL(detail.json<{ data: { streamUrl: string } }>().data.streamUrl);
    const stream = await t.app.http.inject({
      method: 'GET',
      url: `${streamUrl.pathname}${streamUrl.search}`,
    });
    assertReportable(stream, 400, 'STREAM_NOT_READY');
    const deleted = await t.app.http.inject({
      method: 'DELETE',
      url: `/api/tts/generate/${id}`,
      headers: bearer(who.key),
    });
    assert.equal(deleted.statusCode, 200);

    // The cancelled task never reaches the engine: the next task after the slot frees is generated.
    await slot.release();
    const next = await createTask(who, 'After the cancelled one.');
    const generated = await taskWhen(who, next, finished, 'finished');
    assert.equal(generated.status, 'generated', generated.error);

    // A finished task cannot be cancelled.
    const late = await cancel(who, next);
    assert.match(assertPlainError(late, 400, 'VALIDATION_CONFLICT'), /already finished \(generated\)/);
  });

  it('a processing task stops: the engine call is aborted, live readers end, the slot is free again', async () => {
    // The upstream sends half its audio, then stalls: audio flows to the stream, the task runs on.
    upstream.handle((_request, res) => {
      res.writeHead(200, { 'content-type': 'audio/mpeg' });
      res.write(upstreamMp3.subarray(0, upstreamMp3.length >> 1));
    });
    const who = await tenant();
    const id = await createTask(who, 'This upstream stalls halfway.', who.remote);
    await taskWhen(who, id, (task) => task.status === 'processing', 'processing');
    const detail = await t.app.services.tasks.get(who.accountId, id, { stream: 'true' });
    assert.ok(detail.streamUrl);
    const deadline = AbortSignal.timeout(20_000);
    const live = await fetch(detail.streamUrl, { signal: deadline });
    assert.equal(live.status, 200);
    assert.ok(live.body);
    const reader = live.body.getReader();
    const firstChunk = await reader.read();
    assert.equal(firstChunk.done, false, 'audio flows before the cancel');

    const res = await cancel(who, id);
    assert.equal(res.statusCode, 200, res.body);
    const cancelled = res.json<{ data: TaskDetailView }>().data;
    assert.equal(cancelled.status, 'failed');
    assert.equal(cancelled.error, 'cancelled by the client');

    // The live reader ends (truncated, as for a failed task) instead of waiting on.
    let ended = false;
    try {
      while (!(await reader.read()).done);
      ended = true;
    } catch {
      ended = !deadline.aborted; // a cut connection also ends the reader
    }
    assert.ok(ended, 'the live stream ended');
    await upstream.connectionsClosed();
    assert.equal((await cancel(who, id)).statusCode, 200, 'idempotent');

    upstream.handle(hanging);
    const next = await createTask(who, 'The slot is free again.');
    const generated = await taskWhen(who, next, finished, 'finished');
    assert.equal(generated.status, 'generated', generated.error);
  });
});

describe('the short-task lane', () => {
  it('one-shots and short tasks are generated while a long task holds every main slot; long ones wait', async () => {
    const holder = await tenant();
    const slot = await holdTheSlot('main', holder);
    // The holder's own short task: not counted against its one long task at a time.
    const own = await createTask(holder, 'A short task of the busy account.');
    const who = await tenant();
    const mp3 = await fetch(
      `${t.baseUrl}/api/tts/simple-generate.mp3?${new URLSearchParams({ text: 'Straight through.', voiceId: who.espeak }).toString()}`,
      { headers: bearer(who.key) },
    );
    assert.equal(mp3.status, 200, await mp3.clone().text());
    const bytes = Buffer.from(await mp3.arrayBuffer());
    assert.ok(bytes.length > 1000 && bytes[0] === 0xff, 'an MP3 body');
    const small = await createTask(who, 'A small task, number one.');
    const long = await createTask(who, LONG_TEXT);
    for (const [owner, id] of [
      [holder, own],
      [who, small],
    ] as const) {
      const task = await taskWhen(owner, id, finished, 'finished');
      assert.equal(task.status, 'generated', task.error);
    }
    assert.equal((await t.app.services.tasks.get(who.accountId, long)).status, 'pending');
    await slot.release();
    const done = await taskWhen(who, long, finished, 'finished');
    assert.equal(done.status, 'generated', done.error);
  });
});

describe('one-shot synthesis with every slot held', () => {
  it('answers 503 NO_WORKER_AVAILABLE with Retry-After after ONE_SHOT_START_TIMEOUT_MS, and cancels its task', async () => {
    const slot = await holdTheSlot();
    const who = await tenant();
    const json = await fetch(`${t.baseUrl}/api/tts/simple-generate`, {
      method: 'POST',
      headers: { ...bearer(who.key), 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'No slot for me.', voiceId: who.espeak }),
    });
    const mp3 = await fetch(
      `${t.baseUrl}/api/tts/simple-generate.mp3?${new URLSearchParams({ text: 'Nor for me.', voiceId: who.espeak }).toString()}`,
      { headers: bearer(who.key) },
    );
    for (const res of [json, mp3]) {
      assert.equal(res.status, 503);
      assert.equal(res.headers.get('retry-after'), '1');
      const body = (await res.json()) as { status: number; code: string; message: string; requestId: string };
      assert.equal(body.status, 503);
      assert.equal(body.code, 'NO_WORKER_AVAILABLE');
      assert.match(body.message, /no generation slot became free within 1 s/);
      assert.equal(body.requestId, res.headers.get('x-service-app-request-id'));
    }
    const { items } = await t.app.services.tasks.list(who.accountId, {});
    assert.equal(items.length, 2);
    for (const task of items) {
      assert.equal(task.status, 'failed');
      assert.match(task.error ?? '', /^cancelled: no generation slot became free within 1 s/);
    }
    await slot.release();
  });
});

/** The message of a non-reportable error body (no requestId). */
function assertPlainError(res: { statusCode: number; json<T>(): T }, status: number, code: string): string {
  assert.equal(res.statusCode, status);
  const body = res.json<{ status: number; code: string; message: string }>();
  assert.equal(body.status, status);
  assert.equal(body.code, code);
  return body.message;
}
