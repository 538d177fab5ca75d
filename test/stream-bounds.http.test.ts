// Stream sessions are bounded: a session keeps its cache for 30 minutes, so one per distinct `i`
// (HEAD included) would let 100 HEADs cost 100 pipelines and 2.65 GB. HEAD never starts a
// pipeline; live sessions are capped per task and per account (429 with Retry-After and the
// error body), and idle sessions are evicted first to make room.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { encodePiece } from '../src/audio/continuous-encoder.js';
import { REQUEST_ID_HEADER } from '../src/http/server.js';
import { startFaultUpstream, type FaultUpstream } from './helpers/fault-upstream.js';
import { createTask, createVoice, startTestApp, type TestApp } from './helpers/test-app.js';

const MAX_PER_TASK = 3;
let t: TestApp;
let streamUrl = '';
// A remote engine that sends the first half of a tone's MP3 and then nothing until the test ends:
// the task stays `processing`, its stream sessions stay live with some bytes (so readers get
// their headers) and never end.
let upstream: FaultUpstream;
let toneMp3: Buffer = Buffer.alloc(0);

/** A live stream reader of session `i`: its request holds the session until `abort()`. */
interface Reader {
  abort(): void;
  /** Kept referenced: undici cancels the body of a Response that is garbage-collected. */
  reply: Response;
}

async function openReader(i: string): Promise<Reader> {
  const controller = new AbortController();
  const reply = await fetch(`${streamUrl}&i=${i}`, { signal: controller.signal });
  assert.equal(reply.status, 200);
  return { abort: () => controller.abort(), reply };
}

before(async () => {
  upstream = await startFaultUpstream();
  upstream.handle((_request, res) => {
    res.writeHead(200, { 'content-type': 'audio/mpeg' });
    res.write(toneMp3.subarray(0, toneMp3.length >> 1));
  });
  t = await startTestApp({
    listen: true,
    env: {
      STREAM_MAX_SESSIONS_PER_TASK: String(MAX_PER_TASK),
      STREAM_MAX_SESSIONS_PER_ACCOUNT: '50',
      REMOTE_ENGINES: JSON.stringify({ local: { baseUrl: upstream.url } }),
    },
  });
  const pcm = new Int16Array(44_100 * 4);
  for (let n = 0; n < pcm.length; n++) pcm[n] = Math.round(8000 * Math.sin((2 * Math.PI * 440 * n) / 44_100));
  const parts: Uint8Array[] = [];
  for await (const b of encodePiece([pcm], t.app.services.encoders.open())) parts.push(b);
  toneMp3 = Buffer.concat(parts);
  const voiceId = await createVoice(t.app, t.key, {
    name: 'Held',
    engine: { engine: 'remote', endpoint: 'local', voice: 'alloy' },
  });
  const id = await createTask(t.app, t.key, [{ type: 'text', text: 'Bounded sessions.', voiceId }]);
  for (;;) {
    const task = await t.app.services.tasks.get(t.accountId, id, { stream: 'true' });
    if (task.status === 'processing') {
      streamUrl = task.streamUrl ?? assert.fail('no streamUrl');
      break;
    }
    assert.equal(task.status, 'pending', task.error);
    await sleep(20);
  }
});

after(async () => {
  await upstream.close();
  await t.close();
});

describe('stream sessions are bounded', () => {
  it('100 HEAD requests with distinct i start no pipeline and answer the live headers', async () => {
    const runs = t.app.services.stream.pipelineRuns();
    for (let n = 0; n < 100; n++) {
      const head = await fetch(`${streamUrl}&i=probe${String(n)}`, { method: 'HEAD' });
      assert.equal(head.status, 200);
      assert.equal(head.headers.get('content-type'), 'audio/mpeg');
      assert.equal(head.headers.get('accept-ranges'), 'bytes');
      assert.equal(head.headers.get('cache-control'), 'no-store');
    }
    assert.equal(t.app.services.stream.pipelineRuns(), runs);
  });

  it('distinct i values beyond the cap evict idle sessions first', async () => {
    const runs = t.app.services.stream.pipelineRuns();
    const etags: (string | null)[] = [];
    for (let n = 0; n < MAX_PER_TASK + 2; n++) {
      const reader = await openReader(`player${String(n)}`);
      const head = await fetch(`${streamUrl}&i=player${String(n)}`, { method: 'HEAD' });
      etags.push(head.headers.get('etag'));
      reader.abort(); // the reader leaves: its session is idle from now on
      await sleep(50);
    }
    assert.equal(t.app.services.stream.pipelineRuns() - runs, MAX_PER_TASK + 2);
    // The most recent session is still live (same ETag); the oldest was evicted (no session).
    const last = await fetch(`${streamUrl}&i=player${String(MAX_PER_TASK + 1)}`, { method: 'HEAD' });
    assert.equal(last.headers.get('etag'), etags[MAX_PER_TASK + 1]);
    const first = await fetch(`${streamUrl}&i=player0`, { method: 'HEAD' });
    assert.equal(first.headers.get('etag'), null);
  });

  it('answers 429 RATE_LIMIT_EXCEEDED with Retry-After when every session of the task is in use', async () => {
    const readers: Reader[] = [];
    try {
      for (let n = 0; n < MAX_PER_TASK; n++) readers.push(await openReader(`held${String(n)}`));
      const refused = await fetch(`${streamUrl}&i=one-more`);
      assert.equal(refused.status, 429);
      assert.match(refused.headers.get('retry-after') ?? '', /^\d+$/);
      const body = (await refused.json()) as {
        status: number;
        code: string;
        message: string;
        requestId?: string;
      };
      assert.equal(body.status, 429);
      assert.equal(body.code, 'RATE_LIMIT_EXCEEDED');
      assert.match(body.message, /stream sessions/);
      assert.equal(body.requestId, refused.headers.get(REQUEST_ID_HEADER));
      // The sessions in use are still served.
      const again = await fetch(`${streamUrl}&i=held0`, { method: 'HEAD' });
      assert.equal(again.status, 200);
      assert.notEqual(again.headers.get('etag'), null);
    } finally {
      for (const reader of readers) reader.abort();
    }
  });
});
