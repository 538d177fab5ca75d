// The finished-audio process (FINISHED_AUDIO_PROCESS=on), over real HTTP: a connection that starts
// with a plain finished-audio request is served by the child with the routes' answers, access
// lines, metrics and rate limit; any other request on it — another route, a split or pipelined
// head, a spent window — is answered by the service as if the connection had always been its own.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { Agent } from 'node:http';
import { connect, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  bearer,
  createTask,
  createVoice,
  startTestApp,
  waitForTask,
  type TestApp,
} from './helpers/test-app.js';
import {
  assertAccessLineAsRoutes,
  errorCode,
  finishedAudio,
  get,
  routed,
  VOLATILE,
  type Answer,
} from './helpers/audio-answers.js';

/** What the server sends on `socket`, as latin1 text, read on from where the last call stopped. */
function reader(socket: Socket): (done: (text: string) => boolean) => Promise<string> {
  let text = '';
  socket.on('data', (chunk: Buffer) => {
    text += chunk.toString('latin1');
  });
  return async (done) => {
    for (let i = 0; i < 200 && !done(text); i++) await sleep(25);
    const read = text;
    text = '';
    return read;
  };
}

// Bodies end without a line break: the next status line follows the last byte of audio.
const statusLines = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));

const LIMIT = 60;

describe('the finished-audio process', () => {
  let t: TestApp;
  const lines: string[] = [];
  let audio = '';
  let host = '';

  before(async () => {
    t = await startTestApp({
      listen: true,
      env: {
        FINISHED_AUDIO_PROCESS: 'on',
        LOG_LEVEL: 'info',
        STREAM_RATE_LIMIT_MAX: String(LIMIT),
        RATE_LIMIT_WINDOW_MS: '3600000',
      },
      logger: { stream: { write: (line: string) => lines.push(line) } },
    });
    host = new URL(t.baseUrl).host;
    const voiceId = await createVoice(t.app, t.key);
    const taskId = await createTask(t.app, t.key, [
      { text: 'Served by a process of its own.', voiceId },
      { text: 'A second piece.', voiceId },
    ]);
    const task = await waitForTask(t.app, t.accountId, taskId);
    const url = new URL(String(task.metadata.audio));
    audio = `${url.pathname}${url.search}`;
    // The routes remember the task and hold its audio; the first plain request starts the child.
    assert.equal((await get(t.baseUrl, routed(audio))).status, 200);
    const process = t.app.finishedAudio!;
    for (let i = 0; process.handedOff === 0 && i < 100; i++) {
      assert.equal((await get(t.baseUrl, audio, { range: 'bytes=0-9' })).status, 206);
      await sleep(50);
    }
    assert.ok(process.handedOff > 0, 'a connection went to the child');
  });

  after(async () => {
    await t.close();
  });

  it('answers every request of a kept-alive connection as the routes do', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    // The routes' answers on a kept-alive connection of their own (its first request is routed).
    const routesAgent = new Agent({ keepAlive: true, maxSockets: 1 });
    const process = t.app.finishedAudio!;
    const before = process.handedOff;
    try {
      for (const path of [audio, audio.replace('/audio.mp3', '/1/audio.mp3')]) {
        for (const headers of [{ range: 'bytes=10-4009' }, { range: 'bytes=-100' }, {}] as Record<
          string,
          string
        >[]) {
          const viaRoutes = await get(t.baseUrl, routed(path), headers, routesAgent);
          const direct = await get(t.baseUrl, path, headers, agent);
          assert.equal(direct.status, viaRoutes.status);
          assert.deepEqual(direct.body, viaRoutes.body);
          assert.deepEqual(direct.names, viaRoutes.names);
          for (const name of direct.names.filter((n) => !VOLATILE.has(n)))
            assert.equal(direct.headers[name], viaRoutes.headers[name], name);
          assert.match(String(direct.headers['x-service-app-request-id']), /^[0-9a-f-]{36}$/);
        }
      }
      assert.equal(process.handedOff, before + 1, 'one connection, sent once');
    } finally {
      agent.destroy();
      routesAgent.destroy();
    }
  });

  it('sends a connection back for another route, which the service answers', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const process = t.app.finishedAudio!;
    const back = process.handedBack;
    try {
      assert.equal((await get(t.baseUrl, audio, { range: 'bytes=0-9' }, agent)).status, 206);
      const voices = await get(t.baseUrl, '/api/voice', bearer(t.key), agent);
      assert.equal(voices.status, 200);
      assert.equal(voices.headers['content-type'], 'application/json; charset=utf-8');
      assert.equal(process.handedBack, back + 1);
      // The service keeps the connection from there; its shortcut answers the audio.
      assert.equal((await get(t.baseUrl, audio, { range: 'bytes=0-9' }, agent)).status, 206);
    } finally {
      agent.destroy();
    }
  });

  it('answers pipelined and split requests in order, whichever process holds the connection', async () => {
    const socket = connect(Number(new URL(t.baseUrl).port), '127.0.0.1');
    const readUntil = reader(socket);
    try {
      const head = (path: string, extra = '') => `GET ${path} HTTP/1.1\r\nHost: ${host}\r\n${extra}\r\n`;
      const ranged = head(audio, 'Range: bytes=0-9\r\n');
      // Two audio requests and an unknown route in one write, then a head in two parts.
      socket.write(ranged + ranged + head('/api/nothing-here'));
      const first = await readUntil((text) => statusLines(text).length === 3 && text.endsWith('}'));
      assert.deepEqual(statusLines(first), [206, 206, 404]);
      socket.write(ranged.slice(0, 20));
      await sleep(100);
      socket.write(ranged.slice(20));
      const second = await readUntil((text) => /\r\n\r\n[\s\S]{10}$/.test(text));
      assert.deepEqual(statusLines(second), [206]);
    } finally {
      socket.destroy();
    }
  });

  it('writes the routes’ access line and counts the routes’ metrics for its answers', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      await get(t.baseUrl, audio, { range: 'bytes=0-9' }, agent);
      lines.length = 0;
      const direct = await get(t.baseUrl, audio, { range: 'bytes=0-99' }, agent);
      const viaRoutes = await get(t.baseUrl, routed(audio), { range: 'bytes=0-99' });
      await assertAccessLineAsRoutes(lines, direct, viaRoutes, audio);
      const metrics = await t.app.http.inject({ method: 'GET', url: '/metrics' });
      assert.match(
        metrics.body,
        /voicegen_http_requests_total\{method="GET",route="\/api\/tts\/generate\/:id\/audio\.mp3",status="206"\} \d+/,
      );
    } finally {
      agent.destroy();
    }
  });

  it('a deleted task is forgotten: its audio answers 404 on a connection the child holds', async () => {
    const { id, path } = await finishedAudio(t, 'Deleted soon.');
    assert.equal((await get(t.baseUrl, routed(path))).status, 200);
    // A kept-alive connection the child holds (once the service holds the audio in memory).
    let agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (let i = 0; i < 20; i++) {
        const before = t.app.finishedAudio!.handedOff;
        assert.equal((await get(t.baseUrl, path, { range: 'bytes=0-9' }, agent)).status, 206);
        if (t.app.finishedAudio!.handedOff > before) break;
        agent.destroy();
        agent = new Agent({ keepAlive: true, maxSockets: 1 });
        await sleep(50);
      }
      assert.equal((await get(t.baseUrl, path, { range: 'bytes=0-9' }, agent)).status, 206);
      const deleted = await t.app.http.inject({
        method: 'DELETE',
        url: `/api/tts/generate/${id}`,
        headers: bearer(t.key),
      });
      assert.equal(deleted.statusCode, 200);
      assert.equal((await get(t.baseUrl, path, { range: 'bytes=0-9' }, agent)).status, 404);
    } finally {
      agent.destroy();
    }
  });

  it('is given only a finished task’s audio, as the routes would answer it', async () => {
    const tasks = t.app.services.tasks;
    const voiceId = await createVoice(t.app, t.key);
    const id = await createTask(t.app, t.key, [{ text: 'Not yet finished.', voiceId }]);
    const created = await tasks.get(t.accountId, id, { stream: 'true' });
    const auth = new URL(created.streamUrl!).searchParams.get('auth')!;
    // Until it has finished its pieces may be written again: the child must not hold them.
    if (created.status !== 'generated') assert.equal(await tasks.finishedAudioKey(id, 0, auth), undefined);
    await waitForTask(t.app, t.accountId, id);
    assert.equal(await tasks.finishedAudioKey(id, 0, auth), await tasks.audioKeyFor(id, 0, auth));
    assert.equal(await tasks.finishedAudioKey(id, null, auth), await tasks.audioKeyFor(id, null, auth));
    assert.equal(await tasks.finishedAudioKey(id, 0, 'wrong'), undefined);
    assert.equal(await tasks.finishedAudioKey(id, 7, auth), undefined);
    assert.equal(await tasks.finishedAudioKey('no-such-task', null, auth), undefined);
  });

  it('starts a new child when its child has died, and answers meanwhile', async () => {
    const process = t.app.finishedAudio!;
    const pid = process.pid!;
    globalThis.process.kill(pid, 'SIGKILL');
    for (let i = 0; i < 100 && process.pid === pid; i++) await sleep(20);
    assert.notEqual(process.pid, pid, 'the dead child was noticed');
    const before = process.handedOff;
    const viaRoutes = await get(t.baseUrl, routed(audio), { range: 'bytes=0-99' });
    const answer = await get(t.baseUrl, audio, { range: 'bytes=0-99' });
    assert.equal(answer.status, 206);
    assert.deepEqual(answer.body, viaRoutes.body);
    assert.equal(process.handedOff, before + 1, 'a new child took the connection');
    assert.notEqual(process.pid, undefined);
  });

  // Last: it spends this address's window.
  it('counts in the routes’ rate-limit window; the service answers the 429', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      // What is left of this address's window (earlier tests spent some), read from the routes.
      const left = Number(
        (await get(t.baseUrl, routed(audio), { range: 'bytes=0-9' })).headers['x-ratelimit-remaining'],
      );
      let answered = 0;
      let refused: Answer | undefined;
      for (let i = 0; i < LIMIT * 2 && refused === undefined; i++) {
        // Alternate the child and the routes: both count in one window.
        const next =
          i % 3 === 0
            ? await get(t.baseUrl, routed(audio), { range: 'bytes=0-9' })
            : await get(t.baseUrl, audio, { range: 'bytes=0-9' }, agent);
        if (next.status === 429) refused = next;
        else {
          assert.equal(next.status, 206);
          assert.equal(next.headers['x-ratelimit-limit'], String(LIMIT));
          answered++;
        }
        // The child's counts reach the service's window every 200 ms.
        if (i % 10 === 9) await sleep(250);
      }
      assert.ok(refused !== undefined, 'the window was spent');
      assert.equal(errorCode(refused), 'RATE_LIMIT_EXCEEDED');
      // The child learns of the routes' counts at its next count (at most 10 requests here).
      assert.ok(Math.abs(answered - left) <= 10, `${answered} answered of ${left} left`);
    } finally {
      agent.destroy();
    }
  });

  it('closes with connections the child holds, idle or not, without waiting for them', async () => {
    const other = await startTestApp({ listen: true, env: { FINISHED_AUDIO_PROCESS: 'on' } });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    let closed = false;
    try {
      const { path } = await finishedAudio(other, 'Closing soon.');
      assert.equal((await get(other.baseUrl, routed(path))).status, 200);
      for (let i = 0; i < 40 && other.app.finishedAudio!.handedOff === 0; i++) {
        agent.destroy();
        assert.equal((await get(other.baseUrl, path, { range: 'bytes=0-9' }, agent)).status, 206);
        await sleep(50);
      }
      assert.ok(other.app.finishedAudio!.handedOff > 0);
      // The agent keeps its connection open and idle in the child: the close must not wait for it.
      const closing = other.close().then(() => {
        closed = true;
      });
      await Promise.race([closing, sleep(10_000)]);
      assert.ok(closed, 'the app closed within 10 s');
    } finally {
      agent.destroy();
      if (!closed) await other.close().catch(() => undefined);
    }
  });
});

describe('the finished-audio process where the service has forgotten the task', () => {
  it('starts with its first connection and keeps serving it: the service looks the task up again', async () => {
    // The service remembers a finished task for 100 ms only; the child trusts it as long.
    const other = await startTestApp({
      listen: true,
      env: { FINISHED_AUDIO_PROCESS: 'on', AUTH_CACHE_MS: '100' },
    });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const { path } = await finishedAudio(other, 'Looked up again.');
      const viaRoutes = await get(other.baseUrl, routed(path), {}, false);
      const process = other.app.finishedAudio!;
      // The child starts with the first connection for it, which waits for it.
      assert.equal(process.running, false, 'not started before any finished audio is asked for');
      // A new connection whose task the service no longer remembers still goes to the child.
      await sleep(200);
      const first = await get(other.baseUrl, path, {}, agent);
      assert.equal(first.status, 200);
      assert.deepEqual(first.body, viaRoutes.body);
      assert.equal(process.handedOff, 1);
      // On the same connection once neither process trusts what they knew: answered there still.
      await sleep(200);
      const again = await get(other.baseUrl, path, { range: 'bytes=100-199' }, agent);
      assert.equal(again.status, 206);
      assert.deepEqual(again.body, viaRoutes.body.subarray(100, 200));
      assert.equal(process.handedBack, 0, 'nothing was sent back');
      // A token the service refuses: sent back, and the routes' 403 from the service.
      const refused = await get(other.baseUrl, path.replace(/auth=[^&]+/, 'auth=wrong'), {}, false);
      assert.equal(refused.status, 403);
      assert.equal(process.handedBack, 1);
      const metrics = await other.app.http.inject({ method: 'GET', url: '/metrics' });
      assert.match(metrics.body, /voicegen_finished_audio_connections_total\{event="sent"\} 2/);
      assert.match(metrics.body, /voicegen_finished_audio_connections_total\{event="back_refused"\} 1/);
    } finally {
      agent.destroy();
      await other.close();
    }
  });
});

describe('the finished-audio process’s own access lines', () => {
  it('writes them on the standard output it shares with the service, whole, as the service would', async () => {
    // A service logging JSON lines to standard output, as `npm start` runs it.
    const script = `
      import { Agent } from 'node:http';
      import { startTestApp, createVoice, createTask, waitForTask } from ${JSON.stringify(new URL('./helpers/test-app.ts', import.meta.url).href)};
      import { get } from ${JSON.stringify(new URL('./helpers/audio-answers.ts', import.meta.url).href)};
      const t = await startTestApp({ listen: true, logger: true, env: { FINISHED_AUDIO_PROCESS: 'on', LOG_LEVEL: 'info' } });
      const voiceId = await createVoice(t.app, t.key);
      const id = await createTask(t.app, t.key, [{ text: 'Logged by a process of its own.', voiceId }]);
      const task = await waitForTask(t.app, t.accountId, id);
      const url = new URL(String(task.metadata.audio));
      const path = url.pathname + url.search;
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      for (let i = 0; i < 40 && t.app.finishedAudio.handedOff === 0; i++) {
        agent.destroy();
        await get(t.baseUrl, path, { range: 'bytes=0-9' }, agent);
        await new Promise((r) => setTimeout(r, 50));
      }
      const ids = [];
      for (let i = 0; i < 200; i++) {
        const answer = await get(t.baseUrl, path, { range: 'bytes=' + i + '-' + (i + 99) }, agent);
        ids.push(answer.headers['x-service-app-request-id']);
      }
      agent.destroy();
      await new Promise((r) => setTimeout(r, 300));
      const here = t.app.finishedAudio.linesWrittenHere;
      await t.close();
      process.stderr.write(JSON.stringify({ ids, here, path }) + '\\n');
    `;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => (stdout += text));
    child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
    const [code] = (await once(child, 'close')) as [number | null];
    assert.equal(code, 0, stderr);
    const result = JSON.parse(stderr.trim().split('\n').at(-1)!) as {
      ids: string[];
      here: number;
      path: string;
    };
    const parsed = stdout
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const byId = new Map(parsed.map((line) => [line.reqId, line]));
    for (const id of result.ids) {
      const line = byId.get(id);
      assert.ok(line !== undefined, `a line for ${id}`);
      assert.equal(line.pid, child.pid);
      assert.equal(line.msg, 'request completed');
      assert.deepEqual(line.res, { statusCode: 206 });
      assert.equal((line.req as { url: string }).url, result.path.replace(/auth=.*/, 'auth=[redacted]'));
      assert.equal(typeof line.time, 'number');
    }
    assert.ok(
      result.here < result.ids.length / 2,
      `${result.here} of ${result.ids.length} written by the service`,
    );
  });
});
