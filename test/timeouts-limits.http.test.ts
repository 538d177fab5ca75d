// Slow clients and unlimited routes: request headers and bodies have timeouts (slowloris), finished
// audio, /healthz and /metrics are rate-limited, /metrics is for operators, and requests during
// shutdown get the error body, not Fastify's own 503 body. Slow clients are driven over raw sockets, so no HTTP client
// completes what the test trickles.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { loadConfig } from '../src/config/config.js';
import { createHttpServer } from '../src/http/server.js';
import { HEALTH_RATE_LIMIT_MAX, METRICS_RATE_LIMIT_MAX } from '../src/http/routes/health.routes.js';
import { bearer, startTestApp, type TestApp } from './helpers/test-app.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Splits one response (the first) out of what the server wrote; a chunked body is decoded. */
function parseResponse(text: string): RawResponse {
  const headEnd = text.indexOf('\r\n\r\n');
  assert.ok(headEnd > 0, `no complete response head in ${JSON.stringify(text.slice(0, 300))}`);
  const [statusLine = '', ...lines] = text.slice(0, headEnd).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = text.slice(headEnd + 4);
  if (headers['transfer-encoding'] === 'chunked') {
    let decoded = '';
    for (let rest = body; ;) {
      const sizeEnd = rest.indexOf('\r\n');
      const size = parseInt(rest.slice(0, sizeEnd), 16);
      if (!(size > 0)) break;
      decoded += rest.slice(sizeEnd + 2, sizeEnd + 2 + size);
      rest = rest.slice(sizeEnd + 2 + size + 2);
    }
    body = decoded;
  } else if (headers['content-length'] !== undefined) {
    body = body.slice(0, Number(headers['content-length']));
  }
  return { status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(statusLine)?.[1]), headers, body };
}

/**
 * Opens a connection, writes `head` at once, then `trickle` one byte every `everyMs` (stopping
 * when it runs out or the server closes the connection), and resolves with everything the server
 * wrote once it closes the connection (or rejects after `deadlineMs`).
 */
function slowClient(
  port: number,
  head: string,
  options: { trickle?: string; everyMs?: number; deadlineMs?: number } = {},
): Promise<{ text: string; trickled: number }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    let trickled = 0;
    const trickle = options.trickle ?? '';
    let timer: NodeJS.Timeout | undefined;
    const deadline = setTimeout(
      () =>
        socket.destroy(
          new Error(`the server did not close within ${String(options.deadlineMs ?? 15_000)} ms`),
        ),
      options.deadlineMs ?? 15_000,
    );
    deadline.unref();
    socket.on('connect', () => {
      socket.write(head);
      // Trickling starts after the head: a byte written while connecting would go before it.
      timer = setInterval(() => {
        if (trickled < trickle.length && socket.writable) socket.write(trickle[trickled++] ?? '');
      }, options.everyMs ?? 100);
      timer.unref();
    });
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    // The server may reset the connection after it answered.
    socket.on('error', (err) => {
      if (received === '') {
        clearInterval(timer);
        clearTimeout(deadline);
        reject(err);
      }
    });
    socket.on('close', () => {
      clearInterval(timer);
      clearTimeout(deadline);
      resolve({ text: received, trickled });
    });
  });
}

function assertSpecError(res: RawResponse, status: number, code: string): Record<string, unknown> {
  assert.equal(res.status, status, res.body);
  assert.match(
    String(res.headers['x-service-app-request-id']),
    UUID,
    `request-id header on ${String(status)}`,
  );
  assert.match(String(res.headers['content-type']), /^application\/json/);
  const body = JSON.parse(res.body) as Record<string, unknown>;
  assert.equal(body.status, status);
  assert.equal(body.code, code);
  assert.equal(typeof body.message, 'string');
  return body;
}

const portOf = (app: FastifyInstance): number => {
  const address = app.server.address();
  assert.ok(address !== null && typeof address === 'object');
  return address.port;
};

describe('slow clients are cut with 408, slow responses are not', () => {
  const HEADERS_TIMEOUT_MS = 400;
  const REQUEST_TIMEOUT_MS = 1_500;
  let app: FastifyInstance;
  let port = 0;
  let longResponseChunks = 0;
  before(async () => {
    app = createHttpServer(
      loadConfig({
        LOG_LEVEL: 'silent',
        HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
        REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
      }),
      false,
    );
    // A response that lasts 3 request timeouts, like a live stream that lasts an hour.
    app.get('/long', async (_request, reply) => {
      reply.raw.writeHead(200, { 'content-type': 'audio/mpeg' });
      for (longResponseChunks = 0; longResponseChunks < 15; longResponseChunks++) {
        reply.raw.write(`chunk ${String(longResponseChunks)}\n`);
        await new Promise((r) => setTimeout(r, (3 * REQUEST_TIMEOUT_MS) / 15));
      }
      reply.raw.end();
      return reply;
    });
    app.post('/upload', async (request) => ({ received: String(request.body).length }));
    app.addContentTypeParser('application/octet-stream', { parseAs: 'string' }, (_r, body, done) => {
      done(null, body);
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    port = portOf(app);
  });
  after(async () => app.close());

  it('headers trickled one byte at a time are cut with 408 REQUEST_TIMEOUT and the spec body', async () => {
    const { text, trickled } = await slowClient(port, 'GET /long HTTP/1.1\r\nHost: x\r\n', {
      trickle: 'X-Slow: '.padEnd(10_000, 'a'),
      everyMs: 50,
    });
    assertSpecError(parseResponse(text), 408, 'REQUEST_TIMEOUT');
    // Cut while the headers were still arriving, not after the client gave up.
    assert.ok(trickled < 10_000);
  });

  it('a connection that sends nothing is closed too', async () => {
    const { text } = await slowClient(port, '');
    // Node answers 408 on a connection that never sent a byte; nothing else is written there.
    if (text !== '') assertSpecError(parseResponse(text), 408, 'REQUEST_TIMEOUT');
  });

  it('a body trickled one byte at a time is cut with 408 REQUEST_TIMEOUT and the spec body', async () => {
    const { text, trickled } = await slowClient(
      port,
      'POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: 10000\r\n\r\n',
      { trickle: 'b'.repeat(10_000), everyMs: 20 },
    );
    assertSpecError(parseResponse(text), 408, 'REQUEST_TIMEOUT');
    assert.ok(trickled < 10_000);
  });

  it('a body slower than the headers timeout but within the request timeout is received', async () => {
    const body = 'c'.repeat(8);
    const { text } = await slowClient(
      port,
      'POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n' +
        `Content-Length: ${String(body.length)}\r\nConnection: close\r\n\r\n`,
      { trickle: body, everyMs: 100 },
    );
    const res = parseResponse(text);
    assert.equal(res.status, 200, res.body);
    assert.deepEqual(JSON.parse(res.body), { received: body.length });
  });

  it('a response that lasts longer than the request timeout is never cut (the request was received)', async () => {
    const { text } = await slowClient(port, 'GET /long HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    const res = parseResponse(text);
    assert.equal(res.status, 200);
    assert.equal(res.body.split('\n').filter((line) => line.startsWith('chunk')).length, 15, res.body);
  });
});

describe('requests during shutdown get the error body', () => {
  it('503 SYSTEM_SHUTTING_DOWN with Retry-After, the request id and Connection: close', async () => {
    const app = createHttpServer(loadConfig({ LOG_LEVEL: 'silent' }), false);
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    let entered: () => void = () => undefined;
    const slowEntered = new Promise<void>((resolve) => (entered = resolve));
    app.get('/slow', async () => {
      entered();
      await released;
      return { ok: true };
    });
    app.get('/fast', async () => ({ ok: true }));
    await app.listen({ host: '127.0.0.1', port: 0 });
    const socket = connect(portOf(app), '127.0.0.1');
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    const deadline = setTimeout(() => socket.destroy(), 10_000);
    deadline.unref();
    try {
      socket.write('GET /slow HTTP/1.1\r\nHost: x\r\n\r\n');
      await slowEntered;
      // Shutdown begins while a request is in flight on a keep-alive connection…
      const closing = app.close();
      // …and the client sends another request on it.
      socket.write('GET /fast HTTP/1.1\r\nHost: x\r\n\r\n');
      await new Promise((r) => setTimeout(r, 200));
      release();
      await closed;
      await closing;
    } finally {
      clearTimeout(deadline);
      socket.destroy();
      release();
    }
    const first = parseResponse(received);
    assert.equal(first.status, 200, received);
    const second = parseResponse(received.slice(received.indexOf('HTTP/1.1', 10)));
    const body = assertSpecError(second, 503, 'SYSTEM_SHUTTING_DOWN');
    assert.equal(body.requestId, second.headers['x-service-app-request-id']);
    assert.equal(second.headers['retry-after'], '5');
    assert.equal(second.headers.connection, 'close');
    assert.ok(!received.includes('Service Unavailable"'), "not Fastify's own 503 body");
  });
});

describe('every route is rate-limited', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { STREAM_RATE_LIMIT_MAX: '3', RATE_LIMIT_IP_MAX: '4' } });
  });
  after(async () => t.close());

  /** Sends `request` until it is refused; returns how many got through. */
  async function requestsUntil429(
    request: () => Promise<{ statusCode: number; json: <T>() => T; headers: Record<string, unknown> }>,
    most: number,
  ): Promise<number> {
    for (let n = 0; n <= most; n++) {
      const res = await request();
      if (res.statusCode === 429) {
        assert.equal(res.json<{ code: string }>().code, 'RATE_LIMIT_EXCEEDED');
        assert.ok(Number(res.headers['retry-after']) >= 1);
        return n;
      }
    }
    assert.fail(`no 429 after ${String(most + 1)} requests`);
  }

  it('finished audio: per client address, whatever the task id', async () => {
    let n = 0;
    const passed = await requestsUntil429(
      () =>
        t.app.http.inject({
          url: `/api/tts/generate/${String(n++)}-unknown/audio.mp3`,
          remoteAddress: '192.0.2.10',
        }),
      10,
    );
    assert.equal(passed, 3);
    // Another address has its own budget.
    const other = await t.app.http.inject({
      url: '/api/tts/generate/x/1/audio.mp3',
      remoteAddress: '192.0.2.11',
    });
    assert.equal(other.statusCode, 401);
  });

  it('/healthz and /metrics: per client address, on this node', async () => {
    const health = await requestsUntil429(
      () => t.app.http.inject({ url: '/healthz', remoteAddress: '127.0.0.2' }),
      HEALTH_RATE_LIMIT_MAX + 1,
    );
    assert.equal(health, HEALTH_RATE_LIMIT_MAX);
    const metrics = await requestsUntil429(
      () => t.app.http.inject({ url: '/metrics', remoteAddress: '127.0.0.3' }),
      METRICS_RATE_LIMIT_MAX + 1,
    );
    assert.equal(metrics, METRICS_RATE_LIMIT_MAX);
  });

  it('bearer routes: per client address before the key is checked, so bad keys are counted', async () => {
    const passed = await requestsUntil429(async () => {
      const res = await t.app.http.inject({
        url: '/api/account/info',
        headers: bearer('sk-00000000000000000000000000000000'),
        remoteAddress: '192.0.2.20',
      });
      if (res.statusCode !== 429) assert.equal(res.statusCode, 401);
      return res;
    }, 10);
    assert.equal(passed, 4);
  });

  it('/admin: per client address before the token is checked', async () => {
    const passed = await requestsUntil429(async () => {
      const res = await t.app.http.inject({
        url: '/admin/accounts',
        headers: { authorization: 'Bearer wrong-admin-token-wrong-admin-token' },
        remoteAddress: '192.0.2.30',
      });
      if (res.statusCode !== 429) assert.equal(res.statusCode, 401);
      return res;
    }, 10);
    assert.equal(passed, 4);
  });
});

describe('/metrics is for operators', () => {
  it('without METRICS_TOKEN: local clients only (not through a proxy); others 403 AUTH_FORBIDDEN', async () => {
    const t = await startTestApp();
    try {
      for (const remoteAddress of ['127.0.0.1', '::1', '::ffff:127.0.0.1']) {
        const res = await t.app.http.inject({ url: '/metrics', remoteAddress });
        assert.equal(res.statusCode, 200, remoteAddress);
        assert.match(res.body, /voicegen_stream_pipeline_runs/);
      }
      for (const [remoteAddress, headers] of [
        ['192.0.2.1', {}],
        ['10.0.0.1', {}],
        ['::2', {}],
        // A proxy on this machine relaying someone else.
        ['127.0.0.1', { 'x-forwarded-for': '198.51.100.7' }],
        ['127.0.0.1', { forwarded: 'for=198.51.100.7' }],
        ['127.0.0.1', { 'x-real-ip': '198.51.100.7' }],
      ] as const) {
        const res = await t.app.http.inject({ url: '/metrics', remoteAddress, headers });
        assert.equal(res.statusCode, 403, `${remoteAddress} ${JSON.stringify(headers)}`);
        assert.equal(res.json<{ code: string }>().code, 'AUTH_FORBIDDEN');
        assert.match(String(res.headers['x-service-app-request-id']), UUID);
      }
    } finally {
      await t.close();
    }
  });

  it('with METRICS_TOKEN: the bearer token from anywhere; none or a wrong one is 401 AUTH_UNAUTHORIZED', async () => {
    const token = 'metrics-token-0123456789abcdef';
    const t = await startTestApp({ env: { METRICS_TOKEN: token } });
    try {
      const ok = await t.app.http.inject({
        url: '/metrics',
        headers: bearer(token),
        remoteAddress: '192.0.2.1',
      });
      assert.equal(ok.statusCode, 200);
      for (const headers of [{}, bearer('metrics-token-0123456789abcdeX'), bearer(t.key)]) {
        for (const remoteAddress of ['127.0.0.1', '192.0.2.1']) {
          const res = await t.app.http.inject({ url: '/metrics', headers, remoteAddress });
          assert.equal(res.statusCode, 401);
          assert.equal(res.json<{ code: string }>().code, 'AUTH_UNAUTHORIZED');
        }
      }
    } finally {
      await t.close();
    }
  });
});
