// The pace of live listeners, over real sockets: a listener joining a live session late gets a
// bounded burst and then the history at the configured rate, never more than burst + rate × time,
// yet every byte in order (byte-compared with the finished audio). A reader with a Range on the
// same live session is not paced.
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { VoiceBinding } from '../src/audio/engines/engine.js';
import type { TaskDetailView } from '../src/tasks/task-service.js';
import { paced } from './helpers/console-browser.js';
import { bearer, startTestApp, type TestApp } from './helpers/test-app.js';

const BURST = 64_000;
const RATE = 100_000;

/** A GET read to its end, with when (ms after the request went out) each byte count arrived. */
interface TimedRead {
  status: number;
  body: Buffer;
  /** [ms since the request was sent, bytes received by then] after every chunk. */
  timeline: [number, number][];
}

function timedRead(url: string, headers: Record<string, string> = {}, onBytes?: (n: number) => void) {
  return new Promise<TimedRead>((resolve, reject) => {
    const sent = performance.now();
    const parts: Buffer[] = [];
    const timeline: [number, number][] = [];
    let received = 0;
    const req = httpRequest(url, { agent: false, headers });
    req.on('error', reject);
    req.on('response', (res) => {
      res.on('data', (chunk: Buffer) => {
        parts.push(chunk);
        received += chunk.length;
        timeline.push([performance.now() - sent, received]);
        onBytes?.(received);
      });
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts), timeline }));
    });
    req.end();
  });
}

let t: TestApp;
/** Synthesis speed (audio seconds per second) of the engine; null = full speed. */
let pace: number | null = 10;

before(async () => {
  t = await startTestApp({
    listen: true,
    env: {
      STREAM_RATE_LIMIT_MAX: '1000',
      STREAM_PACE_BURST_BYTES: String(BURST),
      STREAM_PACE_BYTES_PER_SECOND: String(RATE),
    },
  });
  // Generation slowed to 10× realtime, so the task is still live while the late listener joins.
  const registry = t.app.services.synthesis;
  const engineFor = registry.engineFor.bind(registry);
  registry.engineFor = (binding: VoiceBinding) => paced(engineFor(binding), () => pace);
});
after(async () => {
  pace = null;
  await t.close();
});

describe('a listener joining a live session late', () => {
  it('gets a bounded burst, then the paced history, every byte in order', { timeout: 180_000 }, async () => {
    const voice = (
      await t.app.http.inject({
        method: 'POST',
        url: '/api/voice',
        headers: bearer(t.key),
        payload: { name: 'Narrator' },
      })
    ).json<{ data: { id: string } }>().data.id;
    const sentence = 'The quick brown fox jumps over the lazy dog, and the dog does not mind at all. ';
    const contents = Array.from({ length: 3 }, () => ({
      type: 'text',
      text: sentence.repeat(4),
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
    let detail: TaskDetailView;
    for (;;) {
      detail = await t.app.services.tasks.get(t.accountId, id);
      if (detail.status === 'processing' || detail.status === 'failed') break;
      await sleep(20);
    }
    const url = (
      await t.app.http.inject({
        method: 'GET',
        url: `/api/tts/generate/${id}?stream=true`,
        headers: bearer(t.key),
      })
    ).json<{ data: { streamUrl: string } }>().data.streamUrl;

    // A first reader (a Range: not paced) follows the live edge; once it holds more than twice the
    // burst, the session has that much history for the late listener.
    const history = 2 * BURST + 100_000;
    let reachedHistory: () => void = () => undefined;
    const historyReady = new Promise<void>((resolve) => (reachedHistory = resolve));
    const first = timedRead(url, { Range: 'bytes=0-' }, (n) => {
      if (n >= history) reachedHistory();
    });
    await historyReady;
    assert.equal((await t.app.services.tasks.get(t.accountId, id)).status, 'processing');

    // The late listener and, beside it, a Range reader of the same history.
    const [late, ranged, edge] = await Promise.all([
      timedRead(url),
      timedRead(url, { Range: 'bytes=0-' }),
      first,
    ]);
    assert.equal(late.status, 200);
    assert.equal(ranged.status, 200);
    assert.equal(edge.status, 200);

    // Never more than the burst plus the rate since the request went out (the server's clock for
    // this listener starts later than the client's, so this bound holds whatever the machine's load).
    for (const [ms, bytes] of late.timeline)
      assert.ok(bytes <= BURST + (RATE * ms) / 1000, `${String(bytes)} bytes after ${ms.toFixed(0)} ms`);
    // The Range reader was not held to the pace: it got the history faster than the pace allows.
    assert.ok(
      ranged.timeline.some(([ms, bytes]) => bytes > BURST + (RATE * ms) / 1000),
      'the Range reader was paced',
    );

    // Every byte, in order: the finished audio of the task is the session's bytes.
    for (;;) {
      detail = await t.app.services.tasks.get(t.accountId, id);
      if (detail.metadata.audio !== undefined || detail.status === 'failed') break;
      await sleep(50);
    }
    assert.equal(detail.status, 'generated', detail.error);
    const finished = Buffer.from(await (await fetch(String(detail.metadata.audio))).arrayBuffer());
    assert.ok(finished.length > history + BURST, `${String(finished.length)} bytes of audio`);
    assert.ok(late.body.equals(finished), 'the late listener got the finished audio byte for byte');
    assert.ok(ranged.body.equals(finished), 'the Range reader got the finished audio byte for byte');
    assert.ok(edge.body.equals(finished), 'the first reader got the finished audio byte for byte');
    assert.equal(t.app.services.stream.listeners(), 0);
  });
});
