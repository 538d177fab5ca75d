// Backpressure: a client reading 1 KiB/s for 20 s next to a client reading at full speed,
// both on one stream session of a real app over real sockets. The server must follow each socket's
// pace (no buffering of what the slow client has not taken), so the heap stays flat and the fast
// client is not held back.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import v8 from 'node:v8';
import vm from 'node:vm';
import type { TaskDetailView } from '../src/tasks/task-service.js';
import { bearer, startTestApp, type TestApp } from './helpers/test-app.js';

const MiB = 1024 * 1024;
const SLOW_SECONDS = 20;

let t: TestApp;
before(async () => {
  t = await startTestApp({ listen: true, env: { STREAM_RATE_LIMIT_MAX: '1000' } });
});
after(() => t.close());

function open(url: string): Promise<{ res: IncomingMessage; destroy(): void }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent: false });
    req.on('error', reject);
    req.on('response', (res) => resolve({ res, destroy: () => req.destroy() }));
    req.end();
  });
}

/** Reads a whole response, hashing as it goes (nothing kept in memory). */
async function drain(
  url: string,
): Promise<{ status: number; length: number; sha: string; ms: number; contentLength: string | undefined }> {
  const started = Date.now();
  const { res } = await open(url);
  const hash = createHash('sha256');
  let length = 0;
  for await (const chunk of res) {
    hash.update(chunk as Buffer);
    length += (chunk as Buffer).length;
  }
  return {
    status: res.statusCode ?? 0,
    length,
    sha: hash.digest('hex'),
    ms: Date.now() - started,
    contentLength: res.headers['content-length'],
  };
}

/**
 * Memory after a full GC. V8 frees the backing stores of dead ArrayBuffers (every 64 KiB chunk a
 * response wrote) in a sweep after the GC, so a second GC after a turn of the event loop is needed
 * before `arrayBuffers` stops counting buffers that are already garbage.
 */
async function settledMemory(gc: () => void): Promise<NodeJS.MemoryUsage> {
  gc();
  await sleep(20);
  gc();
  await sleep(20);
  return process.memoryUsage();
}

describe('a slow reader next to a fast one', () => {
  it('keeps the heap flat and does not slow the fast reader', { timeout: 180_000 }, async (ctx) => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;

    // About three minutes of speech (≈ 7 MB of MP3) from the embedded engine.
    const voice = (
      await t.app.http.inject({
        method: 'POST',
        url: '/api/voice',
        headers: bearer(t.key),
        payload: { name: 'Narrator' },
      })
    ).json<{ data: { id: string } }>().data.id;
    const sentence = 'The quick brown fox jumps over the lazy dog, and the dog does not mind at all. ';
    const contents = Array.from({ length: 4 }, () => ({
      type: 'text',
      text: sentence.repeat(12).trim(),
      voiceId: voice,
    }));
    const created = await t.app.http.inject({
      method: 'POST',
      url: '/api/tts/generate',
      headers: bearer(t.key),
      payload: { contents },
    });
    assert.equal(created.statusCode, 200, created.body);
    const id = created.json<{ data: { id: string } }>().data.id;
    let task: TaskDetailView;
    for (;;) {
      task = await t.app.services.tasks.get(t.accountId, id);
      if (task.status === 'failed' || task.metadata.audio !== undefined) break;
      await sleep(50);
    }
    assert.equal(task.status, 'generated', task.error);
    // A task "generated without finished audio": the session serves it, not the 302.
    await t.app.services.database.db
      .updateTable('tasks')
      .set({ audio_key: null })
      .where('id', '=', id)
      .execute();
    const detail = await t.app.http.inject({
      method: 'GET',
      url: `/api/tts/generate/${id}?stream=true`,
      headers: bearer(t.key),
    });
    const url = String(detail.json<{ data: TaskDetailView }>().data.streamUrl);

    // Build the session and let it finish.
    const built = await drain(url);
    assert.equal(built.status, 200);
    assert.ok(built.length > 5 * MiB, `${String(built.length)} bytes`);

    const base = await settledMemory(gc);
    const baseline = base.heapUsed + base.arrayBuffers;
    let peak = 0;

    const slow = await open(url);
    assert.equal(slow.res.statusCode, 200);
    slow.res.pause();
    let slowRead = 0;
    let fast: Awaited<ReturnType<typeof drain>> | undefined;
    for (let s = 0; s < SLOW_SECONDS; s++) {
      if (s === 2) fast = await drain(url);
      const chunk = slow.res.read(1024) as Buffer | null;
      slowRead += chunk?.length ?? 0;
      await sleep(1000);
      const m = await settledMemory(gc);
      peak = Math.max(peak, m.heapUsed + m.arrayBuffers - baseline);
    }
    slow.destroy();

    assert.ok(fast, 'the fast reader ran');
    ctx.diagnostic(
      `stream ${String(built.length)} B, fast reader ${String(fast.ms)} ms, slow reader ${String(slowRead)} B, peak growth ${(peak / MiB).toFixed(2)} MiB`,
    );
    assert.equal(fast.status, 200);
    assert.equal(fast.contentLength, String(built.length));
    assert.equal(fast.length, built.length);
    assert.equal(fast.sha, built.sha);
    assert.ok(
      slowRead <= SLOW_SECONDS * 1024 && slowRead >= (SLOW_SECONDS - 1) * 1024,
      `slow reader took ${String(slowRead)} bytes`,
    );
    // The session holds ≈ 8 MB the slow client has not taken; none of it may sit in the heap. (On
    // loopback the kernel's autotuned socket buffers can take several MB of it: that is outside
    // the process. The cache reader's own bound is tested on 50 MiB in src/storage/growing-file.fs.test.ts.)
    assert.ok(peak < 4 * MiB, `heap and buffers grew by ${(peak / MiB).toFixed(2)} MiB`);
  });
});
