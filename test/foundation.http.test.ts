// HTTP conventions on the real app: envelopes, error bodies, request ids, auth, limits.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { bearer, startTestApp, type TestApp } from './helpers/test-app.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function assertErrorShape(
  res: { statusCode: number; headers: Record<string, unknown>; json(): unknown },
  status: number,
  code: string,
  reportable: boolean,
) {
  assert.equal(res.statusCode, status);
  const requestId = res.headers['x-service-app-request-id'];
  assert.match(String(requestId), UUID);
  const body = res.json() as Record<string, unknown>;
  assert.equal(body.status, status);
  assert.equal(body.code, code);
  assert.equal(typeof body.message, 'string');
  if (reportable) assert.equal(body.requestId, requestId);
  else assert.equal('requestId' in body, false);
}

describe('HTTP conventions', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({
      env: { RATE_LIMIT_MAX: '5', RATE_LIMIT_WINDOW_MS: '60000', BODY_LIMIT_BYTES: '2048' },
    });
  });
  after(async () => t.close());

  it('GET /healthz answers OK with a request id', async () => {
    const res = await t.app.http.inject({ method: 'GET', url: '/healthz' });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['x-service-app-request-id']), UUID);
    assert.deepEqual(res.json(), { status: 200, message: 'OK', data: { healthy: true } });
  });

  it('401 AUTH_UNAUTHORIZED without, with a malformed, and with an unknown bearer key', async () => {
    for (const headers of [
      {},
      { authorization: 'Bearer nope' },
      bearer(`sk-${'a'.repeat(32)}`),
      { authorization: `Basic ${t.key}` },
    ]) {
      const res = await t.app.http.inject({ method: 'GET', url: '/api/account/info', headers });
      assertErrorShape(res, 401, 'AUTH_UNAUTHORIZED', false);
    }
  });

  it('GET /api/account/info returns the account of the key', async () => {
    const other = await t.newAccount('info-check');
    const res = await t.app.http.inject({
      method: 'GET',
      url: '/api/account/info',
      headers: bearer(other.key),
    });
    assert.equal(res.statusCode, 200);
    const body = res.json<{ status: number; message: string; data: { id: string; name: string } }>();
    assert.equal(body.status, 200);
    assert.equal(body.data.id, other.accountId);
    assert.equal(body.data.name, 'info-check');
  });

  it('a revoked key stops working', async () => {
    const account = await t.app.services.accounts.createAccount('revoked-one');
    const { key, info } = await t.app.services.accounts.createKey(account.id);
    await t.app.services.accounts.revokeKey(info.id);
    const res = await t.app.http.inject({ method: 'GET', url: '/api/account/info', headers: bearer(key) });
    assertErrorShape(res, 401, 'AUTH_UNAUTHORIZED', false);
  });

  it('unknown routes are 404 RESOURCE_NOT_FOUND', async () => {
    const res = await t.app.http.inject({ method: 'GET', url: '/api/nothing/here' });
    assertErrorShape(res, 404, 'RESOURCE_NOT_FOUND', false);
  });

  it('malformed JSON is 400 VALIDATION_INVALID_FORMAT', async () => {
    const other = await t.newAccount();
    const res = await t.app.http.inject({
      method: 'POST',
      url: '/api/splitter',
      headers: { ...bearer(other.key), 'content-type': 'application/json' },
      payload: '{"name": "x", "config": {',
    });
    assertErrorShape(res, 400, 'VALIDATION_INVALID_FORMAT', false);
  });

  it('a body over the limit is 413 UPLOAD_TOO_LARGE', async () => {
    const other = await t.newAccount();
    const res = await t.app.http.inject({
      method: 'POST',
      url: '/api/splitter',
      headers: { ...bearer(other.key), 'content-type': 'application/json' },
      payload: JSON.stringify({
        name: 'x',
        config: { fallbackConfig: { voiceId: 'v' }, pad: { text: 'x'.repeat(4096) } },
      }),
    });
    assertErrorShape(res, 413, 'UPLOAD_TOO_LARGE', false);
  });

  it('429 RATE_LIMIT_EXCEEDED with Retry-After after the per-account limit, other accounts unaffected', async () => {
    const limited = await t.newAccount();
    const statuses: number[] = [];
    let last;
    for (let i = 0; i < 7; i++) {
      last = await t.app.http.inject({
        method: 'GET',
        url: '/api/account/info',
        headers: bearer(limited.key),
      });
      statuses.push(last.statusCode);
    }
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429, 429]);
    assert.ok(last);
    assertErrorShape(last, 429, 'RATE_LIMIT_EXCEEDED', true);
    assert.match(String(last.headers['retry-after']), /^\d+$/);
    assert.ok(Number(last.headers['retry-after']) >= 1);
    const fresh = await t.newAccount();
    const ok = await t.app.http.inject({
      method: 'GET',
      url: '/api/account/info',
      headers: bearer(fresh.key),
    });
    assert.equal(ok.statusCode, 200);
  });

  it('an internal failure is a reportable 500 SYSTEM_INTERNAL_ERROR without internals', async () => {
    const other = await t.newAccount();
    const created = await t.app.http.inject({
      method: 'POST',
      url: '/api/voice',
      headers: bearer(other.key),
      payload: { name: 'broken' },
    });
    const id = created.json<{ data: { id: string } }>().data.id;
    // Corrupt the stored engine binding underneath the service.
    await t.app.services.database.db
      .updateTable('voices')
      .set({ engine: '{not json' })
      .where('id', '=', id)
      .execute();
    const res = await t.app.http.inject({
      method: 'GET',
      url: `/api/voice/${id}`,
      headers: bearer(other.key),
    });
    assertErrorShape(res, 500, 'SYSTEM_INTERNAL_ERROR', true);
    assert.doesNotMatch(res.body, /JSON|stack|at /);
  });
});
