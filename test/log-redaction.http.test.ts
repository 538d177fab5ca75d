// No credential or database data in any log line: a token passed as `?%61uth=` must be redacted like
// `?auth=`, and database errors must not log their SQL parameters (texts, keys). This drives every logged
// path of a real app at level trace — 2xx/4xx request logs, a forced 500 from a failing insert, a
// socket-level parse error, hostile spellings of `auth` — captures every line through a pino stream and
// scans them for the secrets.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { bearer, startTestApp, type TestApp } from './helpers/test-app.js';

const ADMIN_TOKEN = 'admin-Token-for-log-test-7Kq9Zr2';
/** A value no redaction pattern knows by shape: only the parameter name can tell it is a token. */
const MARKER_TOKEN = 'MarkerTok-QpZr';
const SECRET_NAME = 'SecretSplitterName-Xv81';
const SECRET_TEXT = 'SecretConfigText-Lm42';

/** Sends raw bytes and waits (with a deadline) until the server closes the connection. */
function rawRequest(port: number, text: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    const deadline = setTimeout(() => socket.destroy(), 10_000);
    deadline.unref();
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(deadline);
      resolve(received);
    });
  });
}

describe('no credential or database data in any log line', () => {
  let t: TestApp;
  const lines: string[] = [];
  before(async () => {
    t = await startTestApp({
      listen: true,
      env: { LOG_LEVEL: 'trace', ADMIN_TOKEN },
      logger: { stream: { write: (line: string) => lines.push(line) } },
    });
  });
  after(async () => t.close());

  it('every logged path is free of tokens, keys and SQL data', async () => {
    const port = Number(new URL(t.baseUrl).port);
    const json = { ...bearer(t.key), 'content-type': 'application/json' };

    // A real task and its real stream token.
    const voice = await fetch(`${t.baseUrl}/api/voice`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ name: 'Logged' }),
    });
    const voiceId = ((await voice.json()) as { data: { id: string } }).data.id;
    const created = await fetch(`${t.baseUrl}/api/tts/generate`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ contents: [{ type: 'text', text: 'Hello.', voiceId }] }),
    });
    const taskId = ((await created.json()) as { data: { id: string } }).data.id;
    const detail = await fetch(`${t.baseUrl}/api/tts/generate/${taskId}?stream=true`, { headers: json });
    const streamUrl = ((await detail.json()) as { data: { streamUrl: string } }).data.streamUrl;
    const taskToken = new URL(streamUrl).searchParams.get('auth') ?? '';
    assert.match(taskToken, /^[0-9a-f]{32}$/);

    // Hostile spellings of `auth`, with the real token and with a token of no known shape.
    const stream = `${t.baseUrl}/api/tts/generate/${taskId}/stream.mp3`;
    for (const token of [taskToken, MARKER_TOKEN]) {
      for (const query of [
        `auth=${token}`,
        `%61uth=${token}`,
        `AUTH=${token}`,
        `a%75th=${token}`,
        `%2561uth=${token}`,
        `i=x&auth=nope&auth=${token}`,
        `next=${encodeURIComponent(`http://other/stream.mp3?auth=${token}&i=1`)}`,
      ]) {
        const res = await fetch(`${stream}?${query}`, { method: 'HEAD' });
        await res.arrayBuffer();
      }
    }

    // 4xx: unknown route, unknown key, a key in the path and in the query, the admin token in a URL.
    const fakeKey = `sk-${'0123456789abcdefghijklmnopqrstuv'}`;
    for (const [url, headers] of [
      [`/api/nothing?auth=${MARKER_TOKEN}`, {}],
      ['/api/account/info', bearer(fakeKey)],
      ['/api/account/info', bearer(MARKER_TOKEN)],
      [`/api/voice/${fakeKey}`, bearer(t.key)],
      [`/api/voice?key=${MARKER_TOKEN}&x=${fakeKey}`, bearer(t.key)],
      [`/admin/accounts?x=${ADMIN_TOKEN}`, bearer('wrong-admin-token')],
      ['/admin/accounts', bearer(ADMIN_TOKEN)],
    ] as const) {
      const res = await fetch(`${t.baseUrl}${url}`, { headers });
      await res.arrayBuffer();
    }

    // Socket level: a request Node's parser refuses, with credentials in its bytes.
    const refused = await rawRequest(
      port,
      `GET /x?auth=${MARKER_TOKEN} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.key}\r\nBad Header: 1\r\n\r\n`,
    );
    assert.match(refused, /^HTTP\/1\.1 400 /);
    const badUrl = await rawRequest(
      port,
      `GET /api/voice/%E0?auth=${MARKER_TOKEN} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
    );
    assert.match(badUrl, /^HTTP\/1\.1 400 /);

    // A forced 500: an insert PostgreSQL refuses, whose error carries the SQL, its parameters and
    // the failing row (PGlite: query/params; PostgreSQL: detail "Failing row contains (…)").
    await sql`ALTER TABLE splitters ADD CONSTRAINT log_test_refuses_secrets CHECK (name NOT LIKE '%Secret%')`.execute(
      t.app.services.database.db,
    );
    const failed = await fetch(`${t.baseUrl}/api/splitter`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({
        name: SECRET_NAME,
        config: { '<A>': { voiceId, note: SECRET_TEXT }, fallbackConfig: { voiceId } },
      }),
    });
    const failure = (await failed.json()) as { status: number; code: string; requestId: string };
    assert.equal(failure.code, 'SYSTEM_INTERNAL_ERROR');
    await sql`ALTER TABLE splitters DROP CONSTRAINT log_test_refuses_secrets`.execute(
      t.app.services.database.db,
    );

    const log = lines.join('');
    // The paths were logged (else the scan below proves nothing) …
    assert.match(log, /stream\.mp3\?%61uth=\[redacted\]/);
    assert.match(log, /stream\.mp3\?a%75th=\[redacted\]/);
    assert.match(log, /refused a malformed request/);
    assert.ok(log.includes('/api/voice/%E0?auth=[redacted]'), 'the bad-URL request is logged, redacted');
    const errorLine = lines.find(
      (line) => line.includes(failure.requestId) && line.includes('unhandled error'),
    );
    assert.ok(errorLine, 'the 500 is logged with its request id');
    // … with what an operator needs: the error, the table and the constraint.
    const logged = JSON.parse(errorLine) as { err: { message: string; table?: string; constraint?: string } };
    assert.match(logged.err.message, /log_test_refuses_secrets/);
    // … and none of the secrets, in any line.
    for (const secret of [taskToken, MARKER_TOKEN, t.key, fakeKey, ADMIN_TOKEN, SECRET_NAME, SECRET_TEXT]) {
      const leak = lines.find((line) => line.includes(secret));
      assert.equal(leak, undefined, `${secret} leaked in: ${leak ?? ''}`);
    }
    assert.doesNotMatch(log, /"(params|parameters|query|queryOptions|detail|rawPacket)"/);
  });
});

describe('user content in query strings is redacted in access logs like tokens', () => {
  let t: TestApp;
  const lines: string[] = [];
  before(async () => {
    t = await startTestApp({
      listen: true,
      // The level a service runs at by default: one access line per request.
      env: { LOG_LEVEL: 'info' },
      logger: { stream: { write: (line: string) => lines.push(line) } },
    });
  });
  after(async () => t.close());

  it('the one-shot text, a download file name and unknown parameters never reach a line', async () => {
    const PIN = 'My secret PIN is 4242';
    const FILE_NAME = 'Diagnosis-Ab12.mp3';
    const NOTE = 'PrivateNote-Kw93';
    const voice = await fetch(`${t.baseUrl}/api/voice`, {
      method: 'POST',
      headers: { ...bearer(t.key), 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Logged' }),
    });
    const voiceId = ((await voice.json()) as { data: { id: string } }).data.id;
    const oneShot = (query: string) =>
      fetch(`${t.baseUrl}/api/tts/simple-generate.mp3?${query}`, { headers: bearer(t.key) });

    // 200: audio; its X-Service-Response-Data names the task whose audio URL is used below.
    const ok = await oneShot(
      `voiceId=${voiceId}&language=auto&speechRate=1.1&text=${encodeURIComponent(PIN)}&note=${NOTE}`,
    );
    assert.equal(ok.status, 200);
    await ok.arrayBuffer();
    const info = JSON.parse(String(ok.headers.get('x-service-response-data'))) as { audio: string };
    // 4xx paths log the URL too: an unknown voice, text in another spelling, a bad switch.
    for (const query of [
      `voiceId=no-such-voice&text=${encodeURIComponent(PIN)}`,
      `voiceId=${voiceId}&%74ext=${encodeURIComponent(PIN)}`,
      `voiceId=${voiceId}&text=${encodeURIComponent(PIN)}&emo_switch=x&TEXT=${encodeURIComponent(PIN)}`,
    ]) {
      await (await oneShot(query)).arrayBuffer();
    }
    // A download with a file name of the user's choosing.
    const audio = new URL(info.audio);
    audio.searchParams.set('response-content-disposition', `attachment; filename="${FILE_NAME}"`);
    const download = await fetch(audio);
    assert.equal(download.status, 200);
    await download.arrayBuffer();

    const access = lines.filter((line) => line.includes('simple-generate.mp3'));
    assert.ok(access.length >= 4, `the one-shot requests were logged: ${access.length}`);
    // What an operator needs stays: the route, the voice, the switches, that a text was sent.
    assert.ok(
      access.some((line) => line.includes(`voiceId=${voiceId}&language=auto&speechRate=1.1&text=[redacted]`)),
      access.join(''),
    );
    assert.ok(lines.some((line) => line.includes('response-content-disposition=[redacted]')));
    for (const secret of [PIN, encodeURIComponent(PIN), 'secret%20PIN', FILE_NAME, 'Diagnosis', NOTE]) {
      const leak = lines.find((line) => line.includes(secret));
      assert.equal(leak, undefined, `${secret} leaked in: ${leak ?? ''}`);
    }
  });
});
