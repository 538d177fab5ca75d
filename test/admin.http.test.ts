// The operator API under /admin on the real app: admin-token auth (never a tenant key, and the
// admin token never on tenant routes), accounts, keys, revocation and voice imports.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { freshPostgresDatabase } from './helpers/servers.js';
import { bearer, startTestApp, type TestApp } from './helpers/test-app.js';

interface Injected {
  statusCode: number;
  headers: Record<string, unknown>;
  json<T = unknown>(): T;
}

function assertError(res: Injected, status: number, code: string, message?: RegExp): void {
  assert.equal(res.statusCode, status, JSON.stringify(res.json()));
  const body = res.json<{ status: number; code: string; message: string }>();
  assert.equal(body.status, status);
  assert.equal(body.code, code);
  assert.equal(typeof body.message, 'string');
  if (message) assert.match(body.message, message);
  assert.ok(res.headers['x-service-app-request-id'], 'every response carries the request id');
}

function dataOf<T>(res: Injected): T {
  assert.equal(res.statusCode, 200, JSON.stringify(res.json()));
  const body = res.json<{ status: number; message: string; data: T }>();
  assert.equal(body.status, 200);
  assert.equal(body.message, 'OK');
  return body.data;
}

interface AccountRecord {
  id: string;
  name: string;
  createdAt: string;
}

interface KeyRecord {
  id: string;
  accountId: string;
  prefix: string;
  createdAt: string;
  revokedAt: string | null;
}

describe('admin API', () => {
  let t: TestApp;
  let admin: { authorization: string };
  const call = (method: 'GET' | 'POST', url: string, payload?: unknown, headers = admin) =>
    t.app.http.inject({
      method,
      url,
      headers,
      ...(payload !== undefined && { payload: payload as Record<string, unknown> }),
    });

  before(async () => {
    t = await startTestApp();
    assert.ok(t.app.adminToken !== undefined, 'an embedded install generates an admin token');
    assert.ok(t.app.adminToken.length >= 24);
    admin = bearer(t.app.adminToken);
  });
  after(async () => t.close());

  it('requires the admin token: missing, wrong and tenant keys are 401', async () => {
    const wrong = `${t.app.adminToken ?? ''}x`;
    for (const [headers, message] of [
      [{}, /admin token/],
      [{ authorization: `Basic ${t.app.adminToken ?? ''}` }, /admin token/],
      [bearer(wrong), /wrong admin token/],
      [bearer(t.key), /API keys are not accepted/],
    ] as const) {
      for (const [method, url] of [
        ['GET', '/admin/accounts'],
        ['POST', '/admin/accounts'],
        ['GET', `/admin/accounts/${t.accountId}/keys`],
        ['POST', '/admin/keys/whatever/revoke'],
      ] as const) {
        const res = await t.app.http.inject({ method, url, headers });
        assertError(res, 401, 'AUTH_UNAUTHORIZED', message);
      }
    }
  });

  it('tenant routes never accept the admin token', async () => {
    const res = await t.app.http.inject({ method: 'GET', url: '/api/account/info', headers: admin });
    assertError(res, 401, 'AUTH_UNAUTHORIZED');
  });

  it('creates and lists accounts; validation errors are 400 with clear messages', async () => {
    const created = dataOf<AccountRecord>(await call('POST', '/admin/accounts', { name: '  carol  ' }));
    assert.equal(created.name, 'carol');
    assert.ok(!Number.isNaN(Date.parse(created.createdAt)));

    const listed = dataOf<AccountRecord[]>(await call('GET', '/admin/accounts'));
    assert.deepEqual(
      listed.find((a) => a.id === created.id),
      created,
    );
    assert.ok(listed.some((a) => a.id === t.accountId));

    assertError(
      await call('POST', '/admin/accounts', { name: 'carol' }),
      400,
      'VALIDATION_CONFLICT',
      /already exists/,
    );
    assertError(
      await call('POST', '/admin/accounts', {}),
      400,
      'VALIDATION_MISSING_FIELD',
      /name is required/,
    );
    assertError(await call('POST', '/admin/accounts', { name: '   ' }), 400, 'VALIDATION_MISSING_FIELD');
    assertError(await call('POST', '/admin/accounts', { name: 7 }), 400, 'VALIDATION_INVALID_VALUE', /name/);
    assertError(
      await call('POST', '/admin/accounts', { name: 'x'.repeat(101) }),
      400,
      'VALIDATION_TOO_LONG',
      /at most 100/,
    );
    // NUL cannot be stored in PostgreSQL text: a 400 naming the field, never a 500.
    for (const name of ['bad\u0000name', 'bell\u0007']) {
      assertError(await call('POST', '/admin/accounts', { name }), 400, 'VALIDATION_INVALID_VALUE', /name/);
    }
    const badJson = await t.app.http.inject({
      method: 'POST',
      url: '/admin/accounts',
      headers: { ...admin, 'content-type': 'application/json' },
      payload: '{"name":',
    });
    assertError(badJson, 400, 'VALIDATION_INVALID_FORMAT');
  });

  it('issues keys that authenticate tenant routes, lists prefixes only, and revokes at once', async () => {
    const account = dataOf<AccountRecord>(await call('POST', '/admin/accounts', { name: 'dave' }));
    // `:account` is the name or the id.
    const issued = dataOf<KeyRecord & { key: string }>(await call('POST', '/admin/accounts/dave/keys'));
    assert.match(issued.key, /^sk-[a-z0-9]{32}$/);
    assert.equal(issued.accountId, account.id);
    assert.equal(issued.revokedAt, null);
    assert.equal(issued.key.slice(0, issued.prefix.length), issued.prefix);
    const second = dataOf<KeyRecord & { key: string }>(
      await call('POST', `/admin/accounts/${account.id}/keys`),
    );

    const info = await t.app.http.inject({
      method: 'GET',
      url: '/api/account/info',
      headers: bearer(issued.key),
    });
    assert.equal(dataOf<{ id: string; name: string }>(info).name, 'dave');

    const listRes = await call('GET', '/admin/accounts/dave/keys');
    const listed = dataOf<KeyRecord[]>(listRes);
    assert.deepEqual(
      listed.map((k) => k.id),
      [issued.id, second.id],
    );
    assert.ok(
      !listRes.body.includes(issued.key) && !listRes.body.includes(second.key),
      'never the whole key',
    );
    assert.ok(listed.every((k) => !('key' in k)));

    assert.deepEqual((await call('POST', `/admin/keys/${issued.id}/revoke`)).json(), {
      status: 200,
      message: 'OK',
    });
    const refused = await t.app.http.inject({
      method: 'GET',
      url: '/api/account/info',
      headers: bearer(issued.key),
    });
    assertError(refused, 401, 'AUTH_UNAUTHORIZED');
    const stillValid = await t.app.http.inject({
      method: 'GET',
      url: '/api/account/info',
      headers: bearer(second.key),
    });
    assert.equal(stillValid.statusCode, 200);

    const afterRevoke = dataOf<KeyRecord[]>(await call('GET', `/admin/accounts/${account.id}/keys`));
    assert.ok(afterRevoke.find((k) => k.id === issued.id)?.revokedAt);
    assert.equal(afterRevoke.find((k) => k.id === second.id)?.revokedAt, null);

    assertError(
      await call('POST', `/admin/keys/${issued.id}/revoke`),
      404,
      'RESOURCE_NOT_FOUND',
      /not found/,
    );
    assertError(await call('POST', '/admin/keys/no-such-key/revoke'), 404, 'RESOURCE_NOT_FOUND');
    assertError(await call('POST', '/admin/accounts/nobody/keys'), 404, 'RESOURCE_NOT_FOUND', /"nobody"/);
    assertError(await call('GET', '/admin/accounts/nobody/keys'), 404, 'RESOURCE_NOT_FOUND', /"nobody"/);
  });

  it('imports voices of any version that the account then sees', async () => {
    const voice = dataOf<{
      id: string;
      name: string;
      version: string;
      status: string;
      language: string;
      engine: { engine: string; voice: string };
      metadata: { description: string; withLora: boolean; prompts: unknown[] };
    }>(
      await call('POST', `/admin/accounts/${t.accountId}/voices/import`, {
        name: 'legacy',
        version: 'v1.0',
        lora: true,
        description: 'from the old install',
        espeakVoice: 'en-gb',
        status: 'creating',
      }),
    );
    assert.equal(voice.version, 'v1.0');
    assert.equal(voice.status, 'creating');
    assert.equal(voice.language, 'en');
    assert.deepEqual(voice.metadata, {
      description: 'from the old install',
      withLora: true,
      prompts: [{ id: 'default', name: 'default' }],
    });
    assert.deepEqual(voice.engine, { engine: 'espeak', voice: 'en-gb' });

    const seen = await t.app.http.inject({
      method: 'GET',
      url: `/api/voice/${voice.id}`,
      headers: bearer(t.key),
    });
    assert.equal(dataOf<{ id: string }>(seen).id, voice.id);

    const plain = dataOf<{ version: string; status: string; metadata: { withLora: boolean } }>(
      await call('POST', `/admin/accounts/${t.accountId}/voices/import`, { name: 'plain', version: 'v2.0' }),
    );
    assert.deepEqual([plain.version, plain.status, plain.metadata.withLora], ['v2.0', 'ready', false]);

    const url = `/admin/accounts/${t.accountId}/voices/import`;
    assertError(
      await call('POST', url, { name: 'x', version: 'v9' }),
      400,
      'VOICE_MODEL_VERSION_INVALID',
      /v1\.0, v2\.0, v3\.0, v4\.0/,
    );
    assertError(await call('POST', url, { version: 'v1.0' }), 400, 'VALIDATION_MISSING_FIELD', /name/);
    assertError(
      await call('POST', url, { name: ' ', version: 'v1.0' }),
      400,
      'VALIDATION_MISSING_FIELD',
      /name/,
    );
    assertError(await call('POST', url, { name: 'x' }), 400, 'VALIDATION_MISSING_FIELD', /version/);
    assertError(
      await call('POST', url, { name: 'x', version: 'v1.0', language: 'not a tag' }),
      400,
      'VALIDATION_INVALID_VALUE',
      /language/,
    );
    assertError(
      await call('POST', url, { name: 'x', version: 'v1.0', status: 'failed' }),
      400,
      'VALIDATION_INVALID_VALUE',
      /status/,
    );
    assertError(
      await call('POST', url, { name: 'x', version: 'v1.0', espeakVoice: 'klingon' }),
      400,
      'VALIDATION_INVALID_VALUE',
      /klingon/,
    );
    // A voice of the catalogue as `<engine>:<voice>[+<variant>]`, every espeak-ng variant included.
    const serious = dataOf<{ engine: Record<string, unknown> }>(
      await call('POST', url, { name: 'serious', version: 'v2.0', voice: 'espeak:gmw/en-US+Mr serious' }),
    );
    assert.deepEqual(serious.engine, { engine: 'espeak', voice: 'gmw/en-US', variant: 'Mr serious' });
    assertError(
      await call('POST', url, { name: 'x', version: 'v1.0', voice: 'nowhere:nova' }),
      400,
      'VALIDATION_INVALID_VALUE',
      /no engine "nowhere"/,
    );
    assertError(
      await call('POST', url, { name: 'x', version: 'v1.0', voice: 'espeak:en-us+Mr nobody' }),
      400,
      'VALIDATION_INVALID_VALUE',
      /Mr nobody/,
    );
    for (const field of ['name', 'description', 'espeakVoice', 'voice', 'language']) {
      assertError(
        await call('POST', url, { name: 'x', version: 'v1.0', [field]: 'nul\u0000here' }),
        400,
        'VALIDATION_INVALID_VALUE',
        new RegExp(field),
      );
    }
    assertError(
      await call('POST', '/admin/accounts/nobody/voices/import', { name: 'x', version: 'v1.0' }),
      404,
      'RESOURCE_NOT_FOUND',
    );
  });

  it("exports an account's voices as the import requests that recreate them", async () => {
    const imported = dataOf<{ id: string }>(
      await call('POST', `/admin/accounts/${t.accountId}/voices/import`, {
        name: 'exported',
        version: 'v2.0',
        voice: 'espeak:en-gb+f3',
        description: 'to another install',
      }),
    );
    const exported = dataOf<{ name: string; version: string; description?: string; engine?: unknown }[]>(
      await call('GET', `/admin/accounts/${t.accountId}/voices/export`),
    );
    const mine = exported.find((v) => v.name === 'exported');
    assert.ok(mine, `the imported voice ${imported.id} is in the export`);
    assert.equal(mine.version, 'v2.0');
    assert.equal(mine.description, 'to another install');
    assert.deepEqual(mine.engine, { engine: 'espeak', voice: 'en-gb', variant: 'f3' });

    // What it exports imports again, into another account.
    const other = dataOf<AccountRecord>(await call('POST', '/admin/accounts', { name: 'export-target' }));
    const again = dataOf<{ version: string; engine: unknown }>(
      await call('POST', `/admin/accounts/${other.id}/voices/import`, mine),
    );
    assert.deepEqual([again.version, again.engine], ['v2.0', mine.engine]);

    assertError(await call('GET', '/admin/accounts/nobody/voices/export'), 404, 'RESOURCE_NOT_FOUND');
    assertError(
      await call('GET', `/admin/accounts/${t.accountId}/voices/export`, undefined, bearer(t.key)),
      401,
      'AUTH_UNAUTHORIZED',
    );
  });
});

describe('admin API token configuration', () => {
  it('ADMIN_TOKEN is the token when set (no token is generated)', async () => {
    const token = 'a-configured-operator-token-0123456789';
    const t = await startTestApp({ env: { ADMIN_TOKEN: token } });
    try {
      assert.equal(t.app.adminToken, token);
      const res = await t.app.http.inject({ method: 'GET', url: '/admin/accounts', headers: bearer(token) });
      assert.equal(res.statusCode, 200);
    } finally {
      await t.close();
    }
  });

  it('PostgreSQL without ADMIN_TOKEN: /admin answers 404 RESOURCE_NOT_FOUND, as if absent', async () => {
    const database = await freshPostgresDatabase();
    try {
      const t = await startTestApp({ env: { DATABASE_URL: database.url } });
      try {
        assert.equal(t.app.adminToken, undefined);
        for (const headers of [{}, bearer(t.key), bearer('a-guessed-operator-token-0123456789')]) {
          const res = await t.app.http.inject({ method: 'GET', url: '/admin/accounts', headers });
          assertError(res, 404, 'RESOURCE_NOT_FOUND');
        }
        const res = await t.app.http.inject({
          method: 'POST',
          url: '/admin/accounts',
          payload: { name: 'x' },
        });
        assertError(res, 404, 'RESOURCE_NOT_FOUND');
      } finally {
        await t.close();
      }
    } finally {
      await database.drop();
    }
  });
});
