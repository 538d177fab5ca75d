// What one tenant may store is bounded: a splitter config's bytes (a 1.9 MB config of free-form
// junk once made 14 list requests answer 95 MB each and stalled the service), each account's
// splitters, voices and uploaded bytes (refused with 403 BILLING_QUOTA_EXCEEDED before anything is
// written), list pages by bytes as well as by count, and concurrent updates of one splitter never
// lose a rename. Account info reports the limits and the usage.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SplitterStore } from '../src/splitter/splitter-store.js';
import { bearer, startTestApp, type TestApp } from './helpers/test-app.js';

interface ErrorBody {
  status: number;
  code: string;
  message: string;
}

const JUNK = 'x'.repeat(1_900_000);

describe('per-tenant storage is bounded', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({
      listen: true,
      env: {
        ACCOUNT_MAX_SPLITTERS: '3',
        ACCOUNT_MAX_SPLITTER_BYTES: '300',
        ACCOUNT_MAX_VOICES: '2',
        ACCOUNT_MAX_UPLOAD_BYTES: '1000',
      },
    });
  });
  after(async () => t.close());

  const call = (method: 'GET' | 'POST' | 'PUT', url: string, key: string, payload?: unknown) =>
    t.app.http.inject({
      method,
      url,
      headers: bearer(key),
      ...(payload !== undefined && { payload: payload as object }),
    });

  const assertError = (
    res: { statusCode: number; json: <T>() => T },
    status: number,
    code: string,
  ): ErrorBody => {
    assert.equal(res.statusCode, status);
    const body = res.json<ErrorBody>();
    assert.equal(body.status, status);
    assert.equal(body.code, code);
    return body;
  };

  const info = async (key: string) =>
    (await call('GET', '/api/account/info', key)).json<{
      data: { limits: Record<string, number | null>; usage: Record<string, number> };
    }>().data;

  it('refuses a splitter of 1.9 MB of free-form junk on save, preview and generate, echoing nothing', async () => {
    const { key } = await t.newAccount();
    const config = { '<A>': { voiceId: 'v', junk: JUNK } };
    for (const [url, body] of [
      ['/api/splitter', { name: 'junk', config }],
      ['/api/splitter/preview', { text: '<A>Hello there', splitter: config }],
      ['/api/tts/generate', { text: '<A>Hello there', splitter: config }],
    ] as const) {
      const res = await call('POST', url, key, body);
      const error = assertError(res, 400, 'TTS_SPLITTER_INVALID');
      assert.match(error.message, /bytes of JSON; at most \d+ are allowed$/);
      assert.ok(res.body.length < 1000, `${url} answered ${res.body.length} bytes`);
    }
    // Many junk keys beside a valid placeholder: the whole config's bytes are bounded too.
    const many: Record<string, unknown> = { '<A>': { voiceId: 'v' } };
    for (let i = 0; i < 400; i++) many[`<k${i}>`] = { voiceId: 'v', note: 'n'.repeat(1000) };
    assertError(
      await call('POST', '/api/splitter', key, { name: 'many', config: many }),
      400,
      'TTS_SPLITTER_INVALID',
    );
    const tasks = await call('GET', '/api/tts/generate', key);
    assert.equal(tasks.json<{ total: number }>().total, 0);
    assert.equal((await info(key)).usage.splitters, 0);
  });

  it("caps an account's splitters in count and bytes with 403 BILLING_QUOTA_EXCEEDED, writing nothing", async () => {
    const { key } = await t.newAccount();
    const config = { '<A>': { voiceId: 'v' } }; // 23 bytes of JSON
    const saved = await Promise.all(
      Array.from({ length: 6 }, (_, i) => call('POST', '/api/splitter', key, { name: `s${i}`, config })),
    );
    assert.deepEqual(saved.map((r) => r.statusCode).sort(), [200, 200, 200, 403, 403, 403]);
    const refused = assertError(
      saved.find((r) => r.statusCode === 403) ?? saved[0]!,
      403,
      'BILLING_QUOTA_EXCEEDED',
    );
    assert.match(refused.message, /3 of at most 3 splitter configurations/);
    const report = await info(key);
    assert.equal(report.limits.splitters, 3);
    assert.equal(report.limits.splitterBytes, 300);
    assert.equal(report.usage.splitters, 3);
    assert.equal(report.usage.splitterBytes, 69);
    // Growing a saved config past the account's bytes is refused and leaves it as it was.
    const list = (await call('GET', '/api/splitter', key)).json<{ data: Array<{ id: string }> }>().data;
    const id = list[0]!.id;
    const grown = { '<A>': { voiceId: 'v', note: 'n'.repeat(250) } };
    const update = await call('POST', `/api/splitter/${id}`, key, { config: grown });
    assert.match(
      assertError(update, 403, 'BILLING_QUOTA_EXCEEDED').message,
      /bytes of splitter configurations/,
    );
    const kept = (await call('GET', `/api/splitter/${id}`, key)).json<{ data: { config: unknown } }>().data;
    assert.deepEqual(kept.config, config);
    assert.equal((await info(key)).usage.splitterBytes, 69);
    // Deleting frees room.
    await t.app.http.inject({ method: 'DELETE', url: `/api/splitter/${id}`, headers: bearer(key) });
    assert.equal((await call('POST', '/api/splitter', key, { name: 'again', config })).statusCode, 200);
  });

  it("caps an account's voices with 403 BILLING_QUOTA_EXCEEDED", async () => {
    const { key } = await t.newAccount();
    const made = await Promise.all(
      Array.from({ length: 5 }, (_, i) => call('POST', '/api/voice', key, { name: `v${i}` })),
    );
    assert.deepEqual(made.map((r) => r.statusCode).sort(), [200, 200, 403, 403, 403]);
    assertError(made.find((r) => r.statusCode === 403) ?? made[0]!, 403, 'BILLING_QUOTA_EXCEEDED');
    const report = await info(key);
    assert.equal(report.usage.voices, 2);
    assert.equal(report.limits.voices, 2);
  });

  it('caps uploaded bytes: refused before reading, or as soon as crossed, keeping the previous archive', async () => {
    const { key } = await t.newAccount();
    const created = await call('POST', '/api/voice', key, { name: 'cloned' });
    const voiceId = created.json<{ data: { id: string } }>().data.id;
    const upload = (bytes: number) =>
      t.app.http.inject({
        method: 'PUT',
        url: `/api/voice/${voiceId}/lora`,
        headers: { ...bearer(key), 'content-type': 'application/zip' },
        payload: Buffer.alloc(bytes, 7),
      });
    assert.equal((await upload(600)).statusCode, 200);
    assert.equal((await info(key)).usage.uploadBytes, 600);
    // Replacing the voice's own archive: its previous 600 bytes do not count against the new one.
    assert.equal((await upload(900)).statusCode, 200);
    assert.equal((await info(key)).usage.uploadBytes, 900);
    // Declared too large: refused before a byte is stored.
    assertError(await upload(1001), 403, 'BILLING_QUOTA_EXCEEDED');
    // Chunked (no Content-Length): refused when the limit is crossed; the previous archive stays.
    const chunked = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(
        `${t.baseUrl}/api/voice/${voiceId}/lora`,
        { method: 'PUT', headers: { ...bearer(key), 'content-type': 'application/zip' } },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on('error', reject);
      req.write(Buffer.alloc(700, 1));
      req.end(Buffer.alloc(700, 2));
    });
    assert.equal(chunked.status, 403, chunked.body);
    assert.equal((JSON.parse(chunked.body) as ErrorBody).code, 'BILLING_QUOTA_EXCEEDED');
    const report = await info(key);
    assert.equal(report.usage.uploadBytes, 900);
    const voice = (await call('GET', `/api/voice/${voiceId}`, key)).json<{
      data: { metadata: { withLora: boolean } };
    }>();
    assert.equal(voice.data.metadata.withLora, true);
    const files = await readdir(join(t.app.config.dataDir, 'blobs', 'voices', voiceId));
    assert.equal(files.length, 1, `one archive is kept: ${files.join(', ')}`);
  });

  it('pages splitter lists by bytes: large configs saved before the bounds list one page at a time', async () => {
    const { key, accountId } = await t.newAccount();
    const store = new SplitterStore(t.app.services.database.db);
    const big = JSON.stringify({ '<A>': { voiceId: 'v', junk: 'y'.repeat(600_000) } });
    for (let i = 0; i < 4; i++) {
      const at = new Date(Date.now() - (4 - i) * 1000);
      await store.insert({
        id: randomUUID(),
        account_id: accountId,
        name: `old${i}`,
        config: big,
        created_at: at,
        updated_at: at,
      });
    }
    const seen: string[] = [];
    let offset = 0;
    const bodies = await Promise.all(
      Array.from({ length: 8 }, () => fetch(`${t.baseUrl}/api/splitter?limit=50`, { headers: bearer(key) })),
    );
    const health = await fetch(`${t.baseUrl}/healthz`, { signal: AbortSignal.timeout(10_000) });
    assert.equal(health.status, 200);
    for (const res of bodies) {
      const text = await res.text();
      assert.ok(text.length < 1.1 * 1024 * 1024, `a page of ${text.length} bytes`);
    }
    for (let page = 0; page < 10 && offset < 4; page++) {
      const res = await call('GET', `/api/splitter?limit=50&offset=${offset}`, key);
      const body = res.json<{ data: Array<{ name: string }>; total: number }>();
      assert.equal(body.total, 4);
      assert.equal(body.data.length, 1, "two configs of 600 KB pass the page's bytes");
      seen.push(...body.data.map((s) => s.name));
      offset += body.data.length;
    }
    assert.deepEqual(seen, ['old3', 'old2', 'old1', 'old0']);
  });

  it('never loses a rename to a concurrent config update of the same splitter', async () => {
    const { key } = await t.newAccount();
    for (let round = 0; round < 40; round++) {
      const created = await call('POST', '/api/splitter', key, {
        name: 'before',
        config: { '<A>': { voiceId: 'a' } },
      });
      const id = created.json<{ data: { id: string } }>().data.id;
      const [rename, change] = await Promise.all([
        call('POST', `/api/splitter/${id}`, key, { name: `after${round}` }),
        call('POST', `/api/splitter/${id}`, key, { config: { '<A>': { voiceId: 'b' } } }),
      ]);
      for (const res of [rename, change]) {
        if (res.statusCode !== 200) assertError(res, 400, 'VALIDATION_CONFLICT');
      }
      const final = (await call('GET', `/api/splitter/${id}`, key)).json<{
        data: { name: string; config: { '<A>': { voiceId: string } } };
      }>().data;
      if (rename.statusCode === 200) assert.equal(final.name, `after${round}`, `round ${round}: rename lost`);
      if (change.statusCode === 200)
        assert.equal(final.config['<A>'].voiceId, 'b', `round ${round}: change lost`);
      await t.app.http.inject({ method: 'DELETE', url: `/api/splitter/${id}`, headers: bearer(key) });
    }
  });
});
