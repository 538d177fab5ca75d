// CORS for browser clients of the hosted API (docs/compatibility.md): off by default; with
// CORS_ORIGINS, preflights from an allowed origin are answered and responses expose the headers
// those clients read. Real HTTP, as a browser sends it.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../src/config/config.js';
import { startTestApp, type TestApp } from './helpers/test-app.js';

const ORIGIN = 'https://companion.example';

describe('CORS', () => {
  let open: TestApp;
  let closed: TestApp;
  before(async () => {
    open = await startTestApp({ listen: true, env: { CORS_ORIGINS: `${ORIGIN}, https://other.example` } });
    closed = await startTestApp({ listen: true });
  });
  after(async () => {
    await open.close();
    await closed.close();
  });

  const preflight = (base: string, origin: string) =>
    fetch(`${base}/api/tts/simple-generate`, {
      method: 'OPTIONS',
      headers: {
        origin,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type',
      },
    });

  it('answers a preflight from an allowed origin with the method and headers a client needs', async () => {
    const res = await preflight(open.baseUrl, ORIGIN);
    assert.ok(res.status === 204 || res.status === 200, String(res.status));
    assert.equal(res.headers.get('access-control-allow-origin'), ORIGIN);
    assert.match(String(res.headers.get('access-control-allow-methods')), /POST/);
    assert.match(String(res.headers.get('access-control-allow-headers')), /Authorization/i);
    assert.match(String(res.headers.get('access-control-allow-headers')), /Content-Type/i);
  });

  it('exposes the request id and audio headers on the actual response; errors included', async () => {
    const ok = await fetch(`${open.baseUrl}/api/account/info`, {
      headers: { origin: ORIGIN, authorization: `Bearer ${open.key}` },
    });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get('access-control-allow-origin'), ORIGIN);
    assert.match(String(ok.headers.get('access-control-expose-headers')), /X-Service-App-Request-Id/i);
    assert.match(String(ok.headers.get('access-control-expose-headers')), /X-Reecho-Response-Data/i);
    const denied = await fetch(`${open.baseUrl}/api/account/info`, { headers: { origin: ORIGIN } });
    assert.equal(denied.status, 401);
    assert.equal(denied.headers.get('access-control-allow-origin'), ORIGIN);
    assert.ok(denied.headers.get('x-service-app-request-id'));
  });

  it('gives no CORS headers to an origin not listed, nor when CORS_ORIGINS is unset', async () => {
    const stranger = await preflight(open.baseUrl, 'https://evil.example');
    assert.equal(stranger.headers.get('access-control-allow-origin'), null);
    const off = await fetch(`${closed.baseUrl}/api/account/info`, {
      headers: { origin: ORIGIN, authorization: `Bearer ${closed.key}` },
    });
    assert.equal(off.status, 200);
    assert.equal(off.headers.get('access-control-allow-origin'), null);
  });

  it('CORS_ORIGINS must be origins (scheme and host) or *', () => {
    assert.deepEqual(loadConfig({ CORS_ORIGINS: '*' }).http.corsOrigins, ['*']);
    for (const bad of ['companion.example', 'https://a.example/path', 'https://a.example,*']) {
      assert.throws(() => loadConfig({ CORS_ORIGINS: bad }), /CORS_ORIGINS/);
    }
  });
});
