// Errors raised by Fastify and by Node's HTTP parser (bad URL encoding, 414, 431, 417, unsupported
// media type, a malformed request) go through the one error handler: request-id header and error
// body. `__proto__` keys are removed, not refused, and DELETE with a JSON Content-Type and an empty
// body is no 400. Socket-level cases use raw sockets, so no HTTP client fixes the request up.
import assert from 'node:assert/strict';
import { Duplex } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { answerClientError } from '../src/http/error-handler.js';
import { MAX_URL_LENGTH } from '../src/http/server.js';
import { assertSpecError, parseResponse, rawExchange, UUID } from './helpers/raw-http.js';
import { bearer, startTestApp, type TestApp } from './helpers/test-app.js';

describe('framework-level errors go through the one error handler', () => {
  let t: TestApp;
  let port = 0;
  let auth = '';
  before(async () => {
    t = await startTestApp({ listen: true });
    port = Number(new URL(t.baseUrl).port);
    auth = `Authorization: Bearer ${t.key}\r\n`;
  });
  after(async () => t.close());

  const get = (target: string, extraHeaders = '') =>
    `GET ${target} HTTP/1.1\r\nHost: test\r\n${auth}${extraHeaders}Connection: close\r\n\r\n`;

  it('bad percent-encoding in the path is 400 VALIDATION_INVALID_FORMAT with the request id', async () => {
    for (const target of ['/api/voice/%E0%A4%A', '/api/voice/%ZZ', '/%C0%AF']) {
      assertSpecError(await rawExchange(port, [get(target)]), 400, 'VALIDATION_INVALID_FORMAT');
    }
  });

  it(`a URL longer than ${MAX_URL_LENGTH} characters is 414, whether Fastify or Node's parser sees it first`, async () => {
    const query = (length: number) => `/api/voice?x=${'a'.repeat(length - '/api/voice?x='.length)}`;
    const atLimit = await rawExchange(port, [get(query(MAX_URL_LENGTH))]);
    assert.equal(atLimit.status, 200, atLimit.body);
    // Between our limit and Node's 16 KiB header limit: refused by the onRequest hook.
    assertSpecError(await rawExchange(port, [get(query(MAX_URL_LENGTH + 1))]), 414, 'REQUEST_URI_TOO_LONG');
    // Beyond Node's limit: refused by the parser, answered by the client-error handler.
    assertSpecError(await rawExchange(port, [get(query(40_000))]), 414, 'REQUEST_URI_TOO_LONG');
    // A long unknown path and a long path with bad encoding are 414 too, not 404/400.
    assertSpecError(await rawExchange(port, [get(`/${'p'.repeat(10_000)}`)]), 414, 'REQUEST_URI_TOO_LONG');
    assertSpecError(
      await rawExchange(port, [get(`/api/voice/%E0${'a'.repeat(10_000)}`)]),
      414,
      'REQUEST_URI_TOO_LONG',
    );
  });

  it('headers over 16 KiB are 431 REQUEST_HEADERS_TOO_LARGE with the request id', async () => {
    assertSpecError(
      await rawExchange(port, [get('/api/voice', `X-Filler: ${'f'.repeat(20_000)}\r\n`)]),
      431,
      'REQUEST_HEADERS_TOO_LARGE',
    );
    const many = Array.from({ length: 400 }, (_, i) => `X-H${String(i)}: ${'v'.repeat(50)}\r\n`).join('');
    assertSpecError(await rawExchange(port, [get('/api/voice', many)]), 431, 'REQUEST_HEADERS_TOO_LARGE');
  });

  it('a malformed request is 400 VALIDATION_INVALID_FORMAT with the request id', async () => {
    for (const request of [
      'GARBAGE\r\n\r\n',
      'GET /api/voice HTTP/9.9\r\nHost: x\r\n\r\n',
      'GET /api/voice HTTP/1.1\r\nHost: x\r\nBad Header Name: 1\r\n\r\n',
      'GET /api/voice HTTP/1.1\r\nHost: x\r\nX-Nul: a\u0000b\r\n\r\n',
      // Request smuggling stays refused (CL + TE).
      'POST /api/voice HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
    ]) {
      assertSpecError(await rawExchange(port, [request]), 400, 'VALIDATION_INVALID_FORMAT');
    }
  });

  it('an unknown Expect is 417 REQUEST_EXPECTATION_FAILED with the request id; 100-continue still works', async () => {
    const body = JSON.stringify({ name: 'Expecting' });
    const post = (expect: string) =>
      `POST /api/voice HTTP/1.1\r\nHost: x\r\n${auth}Expect: ${expect}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${String(body.length)}\r\nConnection: close\r\n\r\n`;
    for (const expect of ['something-unknown', '200-ok', 'x']) {
      assertSpecError(await rawExchange(port, [post(expect) + body]), 417, 'REQUEST_EXPECTATION_FAILED');
    }
    // 100-continue: the body is sent only after the interim 100, and the voice is created.
    const continued = await rawExchange(port, [post('100-continue'), body], { awaitReplyBetween: true });
    assert.deepEqual(continued.interim, [100]);
    assert.equal(continued.status, 200, continued.body);
    assert.match(String(continued.headers['x-service-app-request-id']), UUID);
    assert.equal((JSON.parse(continued.body) as { data: { name: string } }).data.name, 'Expecting');
  });

  it('an unsupported or malformed Content-Type is 415 REQUEST_UNSUPPORTED_MEDIA_TYPE', async () => {
    for (const contentType of ['text/x-unknown', 'application/xml', ';;;']) {
      const res = await rawExchange(port, [
        `POST /api/voice HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: ${contentType}\r\n` +
          'Content-Length: 2\r\nConnection: close\r\n\r\n{}',
      ]);
      assertSpecError(res, 415, 'REQUEST_UNSUPPORTED_MEDIA_TYPE');
    }
  });

  it('a request timeout reported by Node is 408 REQUEST_TIMEOUT, unless a response has begun', () => {
    const written: string[] = [];
    const socket = new Duplex({
      read() {},
      write(chunk: Buffer, _encoding, callback) {
        written.push(chunk.toString('latin1'));
        callback();
      },
    });
    const timeout = Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' });
    answerClientError(t.app.http.log, timeout, socket);
    assertSpecError(parseResponse(written.join('')), 408, 'REQUEST_TIMEOUT');
    assert.equal(socket.destroyed, true);

    const busy = Object.assign(new Duplex({ read() {}, write: (_c, _e, cb: () => void) => cb() }), {
      _httpMessage: { _headerSent: true },
    });
    let wrote = false;
    const original = busy.write.bind(busy);
    busy.write = ((...args: Parameters<typeof original>) => {
      wrote = true;
      return original(...args);
    }) as typeof busy.write;
    answerClientError(t.app.http.log, timeout, busy);
    assert.equal(wrote, false, 'nothing is appended to a response already under way');
    assert.equal(busy.destroyed, true);
  });

  it('a path segment longer than any id is 404 like an unknown id, with the request id', async () => {
    assertSpecError(
      await rawExchange(port, [get(`/api/voice/${'a'.repeat(200)}`)]),
      404,
      'RESOURCE_NOT_FOUND',
    );
  });

  it('an empty body with a JSON Content-Type is no body: DELETE/GET/POST without a body work', async () => {
    const json = { ...bearer(t.key), 'content-type': 'application/json' };
    const splitter = await fetch(`${t.baseUrl}/api/splitter`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ name: 'to delete', config: { '<A>': { speechRate: 1 } } }),
    });
    assert.equal(splitter.status, 200, await splitter.clone().text());
    const { data } = (await splitter.json()) as { data: { id: string } };
    // Both forms: Content-Length: 0 and no length at all (raw, so nothing adds one).
    const listed = await rawExchange(port, [get('/api/splitter', 'Content-Type: application/json\r\n')]);
    assert.equal(listed.status, 200, listed.body);
    const deleted = await rawExchange(port, [
      `DELETE /api/splitter/${data.id} HTTP/1.1\r\nHost: x\r\n${auth}` +
        'Content-Type: application/json\r\nContent-Length: 0\r\nConnection: close\r\n\r\n',
    ]);
    assert.equal(deleted.status, 200, deleted.body);
    assert.match(String(deleted.headers['x-service-app-request-id']), UUID);
    const again = await fetch(`${t.baseUrl}/api/splitter/${data.id}`, { method: 'DELETE', headers: json });
    assert.equal(again.status, 404, await again.text());

    // A POST that takes no body (migration) answers on its merits, not "empty JSON body".
    const voice = await fetch(`${t.baseUrl}/api/voice`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ name: 'Already v3' }),
    });
    const voiceId = ((await voice.json()) as { data: { id: string } }).data.id;
    const migrated = await fetch(`${t.baseUrl}/api/voice/${voiceId}/migrateV3`, {
      method: 'POST',
      headers: json,
    });
    assert.equal(((await migrated.json()) as { code: string }).code, 'VOICE_MIGRATE_NOT_NEEDED');

    // A route that needs a body still says what is missing.
    const nameless = await fetch(`${t.baseUrl}/api/voice`, { method: 'POST', headers: json });
    assert.equal(nameless.status, 400);
    assert.deepEqual(await nameless.json(), {
      status: 400,
      code: 'VALIDATION_MISSING_FIELD',
      message: 'name is required',
    });
  });

  it('__proto__ and constructor keys are parsed safely: accepted, removed, no prototype polluted', async () => {
    const post = (url: string, text: string) =>
      t.app.http.inject({
        method: 'POST',
        url,
        headers: { ...bearer(t.key), 'content-type': 'application/json' },
        payload: text,
      });
    // Written as text: an object literal's __proto__ would set a prototype instead of a key.
    const voice = await post(
      '/api/voice',
      '{"name":"Proto","__proto__":{"polluted":"voice"},"constructor":{"prototype":{"polluted":"ctor"}}}',
    );
    assert.equal(voice.statusCode, 200, voice.body);
    assert.equal(voice.json<{ data: { name: string } }>().data.name, 'Proto');

    const voiceId = JSON.stringify(voice.json<{ data: { id: string } }>().data.id);
    const created = await post(
      '/api/splitter',
      '{"name":"Proto splitter","__proto__":{"polluted":"top"},' +
        '"config":{"__proto__":{"polluted":"config"},"<A>":{"speechRate":1,"__proto__":{"polluted":"entry"}},' +
        `"fallbackConfig":{"voiceId":${voiceId},"constructor":{"prototype":{"polluted":"fallback"}}}}}`,
    );
    assert.equal(created.statusCode, 200, created.body);
    const splitter = created.json<{ data: { id: string; config: Record<string, unknown> } }>().data;
    assert.deepEqual(Object.keys(splitter.config).sort(), ['<A>', 'fallbackConfig']);
    assert.equal(Object.hasOwn(splitter.config['<A>'] as object, '__proto__'), false);

    // The diff update deep-merges objects: the classic pollution path.
    const updated = await post(
      `/api/splitter/${splitter.id}`,
      '{"config":{"__proto__":{"polluted":"merge"},"<A>":{"__proto__":{"polluted":"merge-entry"}},' +
        '"constructor":{"prototype":{"polluted":"merge-ctor"}}}}',
    );
    assert.equal(updated.statusCode, 200, updated.body);

    const generate = await post(
      '/api/tts/generate',
      '{"__proto__":{"polluted":"generate"},"contents":[{"type":"text","text":"Hi.","voiceId":' +
        `${voiceId},"__proto__":{"isAdmin":true}}]}`,
    );
    assert.equal(generate.statusCode, 200, generate.body);

    const probe: Record<string, unknown> = {};
    assert.equal(probe.polluted, undefined);
    assert.equal(probe.isAdmin, undefined);
    assert.equal(Object.hasOwn(Object.prototype, 'polluted'), false);
    assert.equal(Object.hasOwn(Object.prototype, 'isAdmin'), false);
    // The server still works as before for everyone.
    const list = await t.app.http.inject({ method: 'GET', url: '/api/splitter', headers: bearer(t.key) });
    assert.equal(list.statusCode, 200, list.body);
  });
});
