// Requests whose framing or coding the service does not implement are refused in words instead of
// misread: a body with a Content-Encoding was parsed as if it were plain JSON (400 "not valid
// JSON"), two Host headers and `Transfer-Encoding: gzip, chunked` were accepted. Raw sockets, since
// no HTTP client sends these.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { assertSpecError, rawExchange } from './helpers/raw-http.js';
import { startTestApp, type TestApp } from './helpers/test-app.js';

describe('protocol strictness: content and transfer codings, Host', () => {
  let t: TestApp;
  let port = 0;
  let auth = '';
  before(async () => {
    t = await startTestApp({ listen: true });
    port = Number(new URL(t.baseUrl).port);
    auth = `Authorization: Bearer ${t.key}\r\n`;
  });
  after(async () => t.close());

  const postVoice = (headers: string, body: Buffer) =>
    Buffer.concat([
      Buffer.from(
        `POST /api/voice HTTP/1.1\r\nHost: test\r\n${auth}Content-Type: application/json\r\n${headers}` +
          `Content-Length: ${String(body.length)}\r\nConnection: close\r\n\r\n`,
        'latin1',
      ),
      body,
    ]);

  it('a body with a Content-Encoding is 415 naming the encoding; identity is no encoding', async () => {
    const json = Buffer.from(JSON.stringify({ name: 'Encoded' }));
    for (const [encoding, body] of [
      ['gzip', gzipSync(json)],
      ['GZIP', gzipSync(json)],
      ['deflate', deflateSync(json)],
      ['br', brotliCompressSync(json)],
      ['x-unknown', json],
      ['gzip, identity', gzipSync(json)],
    ] as const) {
      const res = await rawExchange(port, [postVoice(`Content-Encoding: ${encoding}\r\n`, body)]);
      assertSpecError(res, 415, 'REQUEST_UNSUPPORTED_MEDIA_TYPE');
      assert.ok(
        (JSON.parse(res.body) as { message: string }).message.includes(encoding),
        `the message names ${encoding}: ${res.body}`,
      );
      // RFC 9110 §15.5.16: say which codings would have been accepted.
      assert.equal(res.headers['accept-encoding'], 'identity');
    }
    const plain = await rawExchange(port, [postVoice('Content-Encoding: identity\r\n', json)]);
    assert.equal(plain.status, 200, plain.body);
    // The refused bodies created nothing.
    const list = await fetch(`${t.baseUrl}/api/voice`, { headers: { authorization: `Bearer ${t.key}` } });
    const names = ((await list.json()) as { data: Array<{ name: string }> }).data.map((v) => v.name);
    assert.deepEqual(
      names.filter((n) => n === 'Encoded'),
      ['Encoded'],
    );
  });

  it('two Host headers are 400 (RFC 9112 §3.2), with the request id', async () => {
    for (const hosts of [
      'Host: a\r\nHost: b\r\n',
      'Host: same\r\nHost: same\r\n',
      'Host: a\r\nhost: a\r\n',
    ]) {
      const res = await rawExchange(port, [
        `GET /api/voice HTTP/1.1\r\n${hosts}${auth}Connection: close\r\n\r\n`,
      ]);
      assertSpecError(res, 400, 'VALIDATION_INVALID_FORMAT');
      assert.match(res.body, /Host/);
    }
    const one = await rawExchange(port, [
      `GET /api/voice HTTP/1.1\r\nHost: a\r\n${auth}Connection: close\r\n\r\n`,
    ]);
    assert.equal(one.status, 200, one.body);
  });

  it('a Transfer-Encoding other than chunked is 400 and the connection closes; chunked works', async () => {
    const chunked = (codings: string, body: string) =>
      `POST /api/voice HTTP/1.1\r\nHost: test\r\n${auth}Content-Type: application/json\r\n` +
      `Transfer-Encoding: ${codings}\r\nConnection: keep-alive\r\n\r\n` +
      `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    const body = JSON.stringify({ name: 'Chunked' });
    for (const request of [
      `GET /api/voice HTTP/1.1\r\nHost: test\r\n${auth}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n`,
      chunked('gzip, chunked', body),
      chunked('x-custom, chunked', body),
      // Refused by Node's parser itself, answered by the client-error handler.
      chunked('chunked, chunked', body),
      `POST /api/voice HTTP/1.1\r\nHost: test\r\n${auth}Content-Type: application/json\r\n` +
        `Transfer-Encoding: gzip\r\nConnection: keep-alive\r\n\r\n${body}`,
      chunked('chunked', body).replace('HTTP/1.1', 'HTTP/1.0'),
      `POST /api/voice HTTP/1.1\r\nHost: test\r\n${auth}Content-Type: application/json\r\n` +
        `Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n` +
        `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
    ]) {
      // keep-alive asked for: the server must still close, since the body's framing is not trusted.
      const res = await rawExchange(port, [request]);
      assertSpecError(res, 400, 'VALIDATION_INVALID_FORMAT');
      assert.match(res.body, /Transfer-Encoding/);
      assert.equal(res.headers.connection, 'close');
    }
    for (const codings of ['chunked', 'Chunked']) {
      const ok = await rawExchange(port, [chunked(codings, body).replace('keep-alive', 'close')]);
      assert.equal(ok.status, 200, ok.body);
    }
  });
});
