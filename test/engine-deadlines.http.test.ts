// Engine call deadlines and engine errors through the real app, against a local OpenAI-compatible upstream
// that hangs, stalls mid-body or fails echoing the request's API key:
//  - every engine call has its own deadline (first byte 500 ms, whole call 8 s here): a hanging or
//    stalled upstream fails its piece with a clear message and frees the only generation slot at
//    once (the next task is generated right after), leaving no upstream connection open;
//  - tenants see a generic engine error (task `error`, one-shot error bodies), never the engine's
//    URL, status or body; the operator's log has the detail (status, URL) without the key.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TaskDetailView } from '../src/tasks/task-service.js';
import { bearer, speechMp3, startTestApp, type TestApp } from './helpers/test-app.js';

const SECRET = 'sk-upstream-secret-0123456789abcdef';
const TIMEOUT_MESSAGE = 'the speech engine did not answer in time';
const FAILED_MESSAGE = 'the speech engine failed (engine error)';

// ---------------------------------------------------------------------------------------------
// The upstream: each test sets its behaviour; its sockets are tracked to prove none is left open.

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
let upstreamHandler: Handler = (_req, res) => void res.writeHead(404).end();
const upstreamSockets = new Set<Socket>();
const upstream = createServer((req, res) => {
  req.resume();
  req.on('end', () => upstreamHandler(req, res));
});
upstream.on('connection', (socket: Socket) => {
  upstreamSockets.add(socket);
  socket.once('close', () => upstreamSockets.delete(socket));
});
let upstreamUrl = '';
let upstreamMp3: Buffer = Buffer.alloc(0);

// ---------------------------------------------------------------------------------------------

let t: TestApp;
const logLines: string[] = [];
let espeakVoiceId = '';
let remoteVoiceId = '';

before(async () => {
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  t = await startTestApp({
    env: {
      LOG_LEVEL: 'info',
      GENERATION_CONCURRENCY: '1',
      ENGINE_CONNECT_TIMEOUT_MS: '500',
      ENGINE_FIRST_BYTE_TIMEOUT_MS: '500',
      // Long enough for espeak's first call (it starts its worker threads) on a loaded CI machine.
      ENGINE_CALL_TIMEOUT_MS: '8000',
      REMOTE_ENGINES: JSON.stringify({ local: { baseUrl: upstreamUrl, apiKey: SECRET } }),
    },
    logger: { stream: { write: (line: string) => void logLines.push(line) } },
  });
  espeakVoiceId = await createVoice({ name: 'Narrator' });
  remoteVoiceId = await createVoice({
    name: 'Alloy',
    engine: { engine: 'remote', endpoint: 'local', voice: 'alloy' },
  });
  // The upstream's MP3 comes from an app of default deadlines: on a loaded machine the first call of
  // an embedded engine (its threads starting) may take longer than this app's 8 s.
  const fixtures = await startTestApp();
  try {
    upstreamMp3 = await speechMp3(
      fixtures.app,
      'This sentence comes from the remote engine, and then it stalls.',
    );
  } finally {
    await fixtures.close();
  }
  await warmUp(espeakVoiceId);
});

/** Starts the local voice's engine threads here, retrying a first call that the 8 s limit cut. */
async function warmUp(voiceId: string): Promise<void> {
  const voice = await t.app.services.voices.get(t.accountId, voiceId);
  for (let attempt = 1; ; attempt++) {
    try {
      const chunks = t.app.services.synthesis
        .engineFor(voice.engine)
        .synthesize({ text: 'Warm up.', voice: voice.engine, speechRate: 1 }, new AbortController().signal);
      for await (const _ of chunks);
      return;
    } catch (err) {
      if (attempt === 3) throw err;
    }
  }
}

after(async () => {
  await t.close();
  for (const socket of upstreamSockets) socket.destroy();
  await new Promise((resolve) => upstream.close(resolve));
});

async function createVoice(payload: object): Promise<string> {
  const res = await t.app.http.inject({ method: 'POST', url: '/api/voice', headers: bearer(t.key), payload });
  assert.equal(res.statusCode, 200, res.body);
  return res.json<{ data: { id: string } }>().data.id;
}

async function createTask(text: string, voiceId: string): Promise<string> {
  const res = await t.app.http.inject({
    method: 'POST',
    url: '/api/tts/generate',
    headers: bearer(t.key),
    payload: { contents: [{ text, voiceId }] },
  });
  assert.equal(res.statusCode, 200, res.body);
  return res.json<{ data: { id: string } }>().data.id;
}

/** Waits (at most 20 s) until the task is generated or failed. */
async function finished(id: string): Promise<TaskDetailView> {
  const deadline = AbortSignal.timeout(20_000);
  for (;;) {
    const task = await t.app.services.tasks.get(t.accountId, id);
    if (task.status === 'failed' || task.status === 'generated') return task;
    if (deadline.aborted) assert.fail(`task ${id} still ${task.status}`);
    await sleep(20);
  }
}

/** Waits (at most 5 s) until the service has closed every connection to the upstream. */
async function upstreamConnectionsClosed(): Promise<void> {
  const deadline = AbortSignal.timeout(5000);
  while (upstreamSockets.size > 0) {
    if (deadline.aborted) assert.fail(`${upstreamSockets.size} upstream connection(s) left open`);
    await sleep(10);
  }
}

/** The upstream holds every response (never sends headers) until the test ends. */
function hangingUpstream(): void {
  upstreamHandler = () => undefined;
}

describe('engine call deadlines: first byte 500 ms, whole call 8 s, one generation slot', () => {
  it('an upstream that never answers fails its piece with a clear message; the next task starts at once', async () => {
    hangingUpstream();
    const hung = await createTask('This upstream never answers.', remoteVoiceId);
    // Queued behind the hung task on the only slot: it is generated only if that slot is freed.
    const next = await createTask('Right after the hung one.', espeakVoiceId);
    const failed = await finished(hung);
    assert.equal(failed.status, 'failed');
    assert.equal(failed.error, `content 0 of task ${hung}: ${TIMEOUT_MESSAGE}`);
    const done = await finished(next);
    assert.equal(done.status, 'generated', done.error);
    await upstreamConnectionsClosed();
  });

  it('a body that stalls mid-stream is cut by the whole-call deadline; the slot is freed', async () => {
    upstreamHandler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'audio/mpeg' });
      res.write(upstreamMp3.subarray(0, upstreamMp3.length >> 1));
    };
    const stalled = await createTask('This upstream stalls halfway.', remoteVoiceId);
    const next = await createTask('Right after the stalled one.', espeakVoiceId);
    const failed = await finished(stalled);
    assert.equal(failed.status, 'failed');
    assert.equal(failed.error, `content 0 of task ${stalled}: ${TIMEOUT_MESSAGE}`);
    assert.equal((await finished(next)).status, 'generated');
    await upstreamConnectionsClosed();
    const logged = logLines.find((line) => line.includes(stalled) && line.includes('"generation failed"'));
    assert.ok(logged, 'the timeout is logged');
    assert.match(logged, /total time limit of 8000 ms passed/);
  });

  it('the one-shot JSON form reports the timeout with the request id', async () => {
    hangingUpstream();
    const res = await t.app.http.inject({
      method: 'POST',
      url: '/api/tts/simple-generate',
      headers: bearer(t.key),
      payload: { text: 'One shot, no answer.', voiceId: remoteVoiceId },
    });
    assert.equal(res.statusCode, 500);
    const body = res.json<{ code: string; message: string; requestId: string }>();
    assert.equal(body.code, 'TTS_GENERATE_FAILED');
    assert.match(
      body.message,
      new RegExp(`^generation failed: content 0 of task [0-9a-f-]{36}: ${TIMEOUT_MESSAGE}$`),
    );
    assert.match(body.requestId, /^[0-9a-f-]{36}$/);
    assert.equal(body.requestId, res.headers['x-service-app-request-id']);
    await upstreamConnectionsClosed();
  });
});

describe('engine errors: generic for tenants, detailed for operators', () => {
  it('an upstream error echoing the API key and its URL reaches tenants as a generic error only', async () => {
    upstreamHandler = (req, res) =>
      void res.writeHead(401, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          error: `invalid key ${String(req.headers.authorization)} for ${upstreamUrl}${String(req.url)}`,
        }),
      );
    const leaks = (text: string): string[] =>
      [SECRET, upstreamUrl, '127.0.0.1', 'HTTP 401', 'invalid key'].filter((s) => text.includes(s));

    const taskId = await createTask('Refused upstream.', remoteVoiceId);
    const failed = await finished(taskId);
    assert.equal(failed.error, `content 0 of task ${taskId}: ${FAILED_MESSAGE}`);
    const detail = await t.app.http.inject({
      method: 'GET',
      url: `/api/tts/generate/${taskId}`,
      headers: bearer(t.key),
    });
    assert.deepEqual(leaks(detail.body), []);

    for (const request of [
      {
        method: 'POST',
        url: '/api/tts/simple-generate',
        payload: { text: 'One shot.', voiceId: remoteVoiceId },
      },
      {
        method: 'POST',
        url: '/api/tts/simple-generate',
        payload: { text: 'One shot.', voiceId: remoteVoiceId, direct_stream: true },
      },
      { method: 'GET', url: `/api/tts/simple-generate.mp3?text=One%20shot.&voiceId=${remoteVoiceId}` },
    ] as const) {
      const res = await t.app.http.inject({ ...request, headers: bearer(t.key) });
      assert.equal(res.statusCode, 500, `${request.method} ${request.url}`);
      const body = res.json<{ code: string; message: string; requestId: string }>();
      assert.equal(body.code, 'TTS_GENERATE_FAILED');
      assert.match(body.message, new RegExp(`: ${FAILED_MESSAGE.replace(/[()]/g, '\\$&')}$`));
      assert.match(body.requestId, /^[0-9a-f-]{36}$/);
      assert.deepEqual(leaks(res.body), [], res.body);
    }

    // The operator's log has the status and the URL, never the key.
    const logged = logLines.find((line) => line.includes(taskId) && line.includes('"generation failed"'));
    assert.ok(logged, 'the failure is logged');
    const entry = JSON.parse(logged) as { level: number; engine: Record<string, unknown> };
    assert.equal(entry.level, 50, 'error level');
    assert.equal(entry.engine.status, 401);
    assert.equal(entry.engine.url, `${upstreamUrl}/v1/audio/speech`);
    assert.match(String(entry.engine.body), /invalid key Bearer \[redacted\]/);
    assert.deepEqual(
      logLines.filter((line) => line.includes(SECRET)),
      [],
      'no log line holds the upstream key',
    );
    await upstreamConnectionsClosed();
  });
});
