// /metrics is prom-client's exposition, parsed by a Prometheus text parser, and
// counts what happened; /healthz says alive, /readyz says whether the dependencies answer.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import parsePrometheusTextFormat, { type ParsedFamily } from 'parse-prometheus-text-format';
import { readLive } from './helpers/http-client.js';
import {
  bearer,
  createTask,
  createVoice,
  startTestApp,
  waitForTask,
  type TestApp,
} from './helpers/test-app.js';

/** The raw exposition of /metrics, scraped from loopback (no METRICS_TOKEN). */
async function scrapeText(t: TestApp): Promise<string> {
  const res = await t.app.http.inject({ url: '/metrics', remoteAddress: '127.0.0.1' });
  assert.equal(res.statusCode, 200);
  assert.match(String(res.headers['content-type']), /^text\/plain; version=0\.0\.4/);
  return res.body;
}

/** Scrapes /metrics and parses it with a Prometheus text-format parser. */
async function scrape(t: TestApp): Promise<Map<string, ParsedFamily>> {
  return new Map(parsePrometheusTextFormat(await scrapeText(t)).map((family) => [family.name, family]));
}

/** The value of the sample of `name` whose labels include `labels` (0 when absent). */
function value(
  families: Map<string, ParsedFamily>,
  name: string,
  labels: Record<string, string> = {},
): number {
  const family = families.get(name);
  const sample = family?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  return Number(sample?.value ?? sample?.count ?? 0);
}

describe('Prometheus metrics', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ listen: true, env: { RATE_LIMIT_MAX: '100000' } });
  });
  after(async () => t.close());

  it('has the documented families with their types, and the default process metrics', async () => {
    const families = await scrape(t);
    const types: Record<string, ParsedFamily['type']> = {
      voicegen_http_requests_total: 'COUNTER',
      voicegen_http_request_duration_seconds: 'HISTOGRAM',
      voicegen_http_response_bytes_total: 'COUNTER',
      voicegen_stream_sessions: 'GAUGE',
      voicegen_stream_listeners: 'GAUGE',
      voicegen_stream_pipeline_runs: 'COUNTER',
      voicegen_stream_relay_runs: 'COUNTER',
      voicegen_active_generations: 'GAUGE',
      voicegen_encoder_streams: 'GAUGE',
      voicegen_encoder_audio_seconds_total: 'COUNTER',
      voicegen_encoder_worker_seconds_total: 'COUNTER',
      voicegen_encoder_realtime_factor: 'GAUGE',
      voicegen_engine_errors_total: 'COUNTER',
      voicegen_queue_depth: 'GAUGE',
      voicegen_finished_audio_connections_total: 'COUNTER',
      voicegen_process_resident_memory_bytes: 'GAUGE',
    };
    for (const [name, type] of Object.entries(types)) {
      assert.equal(families.get(name)?.type, type, `${name} is a ${type}`);
    }
  });

  it('counts requests by route pattern and status, never by raw URL', async () => {
    const before = await scrape(t);
    const route = '/api/voice/:id';
    const statusBefore = value(before, 'voicegen_http_requests_total', {
      method: 'GET',
      route,
      status: '404',
    });
    for (let i = 0; i < 7; i++) {
      const res = await t.app.http.inject({ url: `/api/voice/no-such-voice-${i}`, headers: bearer(t.key) });
      assert.equal(res.statusCode, 404);
    }
    const afterwards = await scrape(t);
    assert.equal(
      value(afterwards, 'voicegen_http_requests_total', { method: 'GET', route, status: '404' }) -
        statusBefore,
      7,
    );
    const urls = afterwards
      .get('voicegen_http_requests_total')
      ?.metrics.map((m) => m.labels?.route ?? '')
      .filter((r) => r.includes('no-such-voice'));
    assert.deepEqual(urls, [], 'no series per raw URL');
    // The parser folds a histogram's label sets together (prom-client writes `le` first), so its
    // per-route count is read from the exposition's `_count` line itself.
    const count = new RegExp(
      `^voicegen_http_request_duration_seconds_count\\{method="GET",route="${route.replace(/[/:]/g, '\\$&')}"\\} (\\d+)$`,
      'm',
    ).exec(await scrapeText(t));
    assert.ok(Number(count?.[1]) >= 7, 'latencies observed per route');
  });

  it('counts a generated task (encoder), a live stream (sessions, listeners, pipeline runs, bytes)', async () => {
    const voiceId = await createVoice(t.app, t.key);
    const before = await scrape(t);
    // Long enough to be still processing when the stream is opened (a generated task answers 302).
    const text = 'Counting what happened on this node, one sentence after another. '.repeat(40);
    const id = await createTask(t.app, t.key, [{ type: 'text', text, voiceId }]);
    const task = await waitForTask(
      t.app,
      t.accountId,
      id,
      (v) => v.status === 'processing' && v.streamUrl !== undefined,
    );
    const live = new URL(task.streamUrl ?? '');
    const reading = readLive(`${t.baseUrl}${live.pathname}${live.search}&i=metrics`);
    assert.equal((await reading.status).status, 200);
    await reading.until(1);
    const open = await scrape(t);
    assert.ok(value(open, 'voicegen_stream_sessions') >= 1, 'a live session');
    assert.ok(value(open, 'voicegen_stream_listeners') >= 1, 'a listener');
    assert.ok(value(open, 'voicegen_active_generations') + value(open, 'voicegen_encoder_streams') >= 1);
    const reply = await reading.done;
    assert.ok(reply.body.length > 100_000);
    const afterwards = await scrape(t);
    assert.ok(
      value(afterwards, 'voicegen_stream_pipeline_runs') > value(before, 'voicegen_stream_pipeline_runs'),
      'a pipeline ran',
    );
    assert.ok(
      value(afterwards, 'voicegen_encoder_audio_seconds_total') >
        value(before, 'voicegen_encoder_audio_seconds_total') + 1,
      'the task was encoded',
    );
    assert.ok(value(afterwards, 'voicegen_encoder_realtime_factor') > 1, 'faster than real time');
    const streamRoute = '/api/tts/generate/:id/stream.mp3';
    assert.ok(
      value(afterwards, 'voicegen_http_response_bytes_total', { route: streamRoute }) > 1000,
      'stream bytes served',
    );
  });

  it('shows the queue depth of the accounts with pending work', async () => {
    const families = await scrape(t);
    assert.equal(families.get('voicegen_queue_depth')?.type, 'GAUGE');
  });
});

describe('/healthz and /readyz', () => {
  it('embedded: alive and ready (the database answers)', async () => {
    const t = await startTestApp();
    try {
      const health = await t.app.http.inject({ url: '/healthz' });
      assert.equal(health.statusCode, 200);
      const ready = await t.app.http.inject({ url: '/readyz' });
      assert.equal(ready.statusCode, 200);
      assert.deepEqual(ready.json(), {
        status: 200,
        message: 'OK',
        data: { ready: true, checks: { database: 'ok' } },
      });
    } finally {
      await t.close();
    }
  });
});
