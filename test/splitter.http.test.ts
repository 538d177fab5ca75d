// Splitter configurations through HTTP. The rule-by-rule validation table
// lives next to the validator (src/splitter/splitter-config.test.ts); here: the HTTP contract.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { bearer, startTestApp, type TestApp } from './helpers/test-app.js';

const ISO_UTC = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe('splitter configurations', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(async () => t.close());

  const post = (payload: unknown, key = t.key, url = '/api/splitter') =>
    t.app.http.inject({ method: 'POST', url, headers: bearer(key), payload: payload as object });

  it('creates and returns {status:200, data:{id,name,config,createdAt,updatedAt}} with config as stored', async () => {
    const config = {
      '<CharacterB>': { voiceId: 'vb', speechRate: 1.1, extra: 'kept' },
      splitterMarks: ['[]', '【】'],
      '<CharacterA>': { voiceId: 'va', speechRate: 1 },
      lookupTable: { angry: { tags: ['angry', ['loud', 'red']], speechRate: 1.3 } },
      fallbackConfig: { voiceId: 'vf' },
    };
    const res = await post({ name: '  Dialogue ', config });
    assert.equal(res.statusCode, 200);
    const body = res.json<{ status: number; data: Record<string, unknown> }>();
    assert.deepEqual(Object.keys(body), ['status', 'data']);
    assert.equal(body.status, 200);
    assert.deepEqual(Object.keys(body.data), ['id', 'name', 'config', 'createdAt', 'updatedAt']);
    assert.equal(body.data.name, 'Dialogue');
    assert.deepEqual(body.data.config, config);
    // Key order is preserved exactly (compare the serialised text).
    assert.ok(res.body.includes(JSON.stringify(config)));
    assert.match(String(body.data.createdAt), ISO_UTC);
    assert.match(String(body.data.updatedAt), ISO_UTC);
    const got = await t.app.http.inject({
      method: 'GET',
      url: `/api/splitter/${String(body.data.id)}`,
      headers: bearer(t.key),
    });
    assert.ok(got.body.includes(JSON.stringify(config)));
  });

  it('rejects invalid configurations with 400 TTS_SPLITTER_INVALID', async () => {
    const invalid: unknown[] = [
      [],
      'text',
      { lookupTable: {} },
      { '': { voiceId: 'x' } },
      { A: [] },
      { splitterMarks: ['[', '[]'] },
      { splitterMarks: ['[]]'] },
      { fallbackConfig: [] },
      { fallbackConfig: {} },
      { lookupTable: { a: { tags: [['x', 1]] } }, fallbackConfig: { voiceId: 'v' } },
      { lookupTable: [], fallbackConfig: { voiceId: 'v' } },
    ];
    for (const config of invalid) {
      const res = await post({ name: 'bad', config });
      assert.equal(res.statusCode, 400, JSON.stringify(config));
      const body = res.json<Record<string, unknown>>();
      assert.equal(body.code, 'TTS_SPLITTER_INVALID', JSON.stringify(config));
      assert.equal(body.status, 400);
      assert.equal('requestId' in body, false);
    }
  });

  it('accepts minimal valid configurations', async () => {
    for (const config of [{ splitterMarks: ['[]'] }, { fallbackConfig: { voiceId: 'v' } }, { A: {} }]) {
      const res = await post({ name: 'ok', config });
      assert.equal(res.statusCode, 200, JSON.stringify(config));
    }
  });

  it('validates the name: required, non-blank, trimmed, at most 100 characters', async () => {
    const config = { fallbackConfig: { voiceId: 'v' } };
    const cases: [unknown, string][] = [
      [{ config }, 'VALIDATION_MISSING_FIELD'],
      [{ name: '   ', config }, 'VALIDATION_MISSING_FIELD'],
      [{ name: 'x'.repeat(101), config }, 'VALIDATION_TOO_LONG'],
      [{ name: 42, config }, 'VALIDATION_INVALID_VALUE'],
      [{ name: 'no config' }, 'VALIDATION_MISSING_FIELD'],
    ];
    for (const [payload, code] of cases) {
      const res = await post(payload);
      assert.equal(res.statusCode, 400);
      assert.equal(res.json<{ code: string }>().code, code, JSON.stringify(payload).slice(0, 80));
    }
    assert.equal((await post({ name: ` ${'x'.repeat(100)} `, config })).statusCode, 200);
  });

  it('requires a bearer key', async () => {
    const res = await t.app.http.inject({
      method: 'POST',
      url: '/api/splitter',
      payload: { name: 'x', config: { A: {} } },
    });
    assert.equal(res.statusCode, 401);
  });

  it('lists newest first with limit/offset and total; other accounts see nothing', async () => {
    const acct = await t.newAccount();
    for (const name of ['one', 'two', 'three']) await post({ name, config: { A: {} } }, acct.key);
    const res = await t.app.http.inject({
      method: 'GET',
      url: '/api/splitter?limit=2&offset=1',
      headers: bearer(acct.key),
    });
    const body = res.json<{ status: number; data: { name: string }[]; total: number }>();
    assert.equal(body.total, 3);
    assert.deepEqual(
      body.data.map((s) => s.name),
      ['two', 'one'],
    );
    const stranger = await t.newAccount();
    const none = await t.app.http.inject({
      method: 'GET',
      url: '/api/splitter',
      headers: bearer(stranger.key),
    });
    assert.equal(none.json<{ total: number }>().total, 0);
    assert.equal(
      (await t.app.http.inject({ method: 'GET', url: '/api/splitter?limit=51', headers: bearer(acct.key) }))
        .statusCode,
      400,
    );
  });

  it('diff-updates: objects merged, arrays replaced, null deletes; invalid results roll back', async () => {
    const created = await post({
      name: 'upd',
      config: { A: { voiceId: 'a', speechRate: 1 }, B: { voiceId: 'b' }, splitterMarks: ['[]', '<>'] },
    });
    const id = created.json<{ data: { id: string; createdAt: string } }>().data.id;
    const res = await post(
      { config: { A: { speechRate: 1.5 }, B: null, splitterMarks: ['【】'] } },
      t.key,
      `/api/splitter/${id}`,
    );
    assert.equal(res.statusCode, 200);
    const data = res.json<{ data: { name: string; config: unknown } }>().data;
    assert.equal(data.name, 'upd');
    assert.deepEqual(data.config, { A: { voiceId: 'a', speechRate: 1.5 }, splitterMarks: ['【】'] });

    const bad = await post({ config: { splitterMarks: ['[[['] } }, t.key, `/api/splitter/${id}`);
    assert.equal(bad.json<{ code: string }>().code, 'TTS_SPLITTER_INVALID');
    const emptied = await post({ config: { A: null, splitterMarks: null } }, t.key, `/api/splitter/${id}`);
    assert.equal(emptied.json<{ code: string }>().code, 'TTS_SPLITTER_INVALID');
    const after = await t.app.http.inject({
      method: 'GET',
      url: `/api/splitter/${id}`,
      headers: bearer(t.key),
    });
    assert.deepEqual(after.json<{ data: { config: unknown } }>().data.config, data.config);

    const renamed = await post({ name: 'renamed' }, t.key, `/api/splitter/${id}`);
    assert.equal(renamed.json<{ data: { name: string } }>().data.name, 'renamed');
  });

  it('get/update/delete of unknown or foreign ids → 404 SPLITTER_NOT_FOUND; delete answers {status:200}', async () => {
    const created = await post({ name: 'mine', config: { A: {} } });
    const id = created.json<{ data: { id: string } }>().data.id;
    const other = await t.newAccount();
    for (const [method, url] of [
      ['GET', `/api/splitter/${id}`],
      ['POST', `/api/splitter/${id}`],
      ['DELETE', `/api/splitter/${id}`],
    ] as const) {
      const res = await t.app.http.inject({
        method,
        url,
        headers: bearer(other.key),
        payload: method === 'POST' ? { name: 'x' } : undefined,
      });
      assert.equal(res.statusCode, 404);
      assert.equal(res.json<{ code: string }>().code, 'SPLITTER_NOT_FOUND');
    }
    const del = await t.app.http.inject({
      method: 'DELETE',
      url: `/api/splitter/${id}`,
      headers: bearer(t.key),
    });
    assert.deepEqual(del.json(), { status: 200 });
    const again = await t.app.http.inject({
      method: 'GET',
      url: `/api/splitter/${id}`,
      headers: bearer(t.key),
    });
    assert.equal(again.statusCode, 404);
  });
});
