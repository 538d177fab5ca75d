// Voices and migration to v3.0 through HTTP on the real app.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { VoiceImport } from '../src/voices/voice-service.js';
import { bearer, startTestApp, type TestApp } from './helpers/test-app.js';

describe('voices', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(async () => t.close());

  const importVoice = (
    overrides: Partial<VoiceImport> & Pick<VoiceImport, 'version'>,
    accountId = t.accountId,
  ) => t.app.services.voices.importVoice(accountId, { name: 'imported', ...overrides });

  const migrate = (id: string, path = '/api/voice', key = t.key, op = 'migrateV3') =>
    t.app.http.inject({ method: 'POST', url: `${path}/${id}/${op}`, headers: bearer(key) });

  it('creates a voice from just a name, with the embedded engine default for English', async () => {
    const res = await t.app.http.inject({
      method: 'POST',
      url: '/api/voice',
      headers: bearer(t.key),
      payload: { name: '  Narrator ' },
    });
    assert.equal(res.statusCode, 200);
    const body = res.json<{ status: number; message: string; data: Record<string, unknown> }>();
    assert.equal(body.status, 200);
    assert.equal(body.message, 'OK');
    const v = body.data;
    assert.equal(v.name, 'Narrator');
    assert.equal(v.status, 'ready');
    assert.equal(v.version, 'v3.0');
    // The default English voice: Flite's kal16 (docs/decisions.md, the default voice).
    assert.deepEqual(v.engine, { engine: 'flite', voice: 'kal16' });
    assert.deepEqual(v.metadata, {
      description: '',
      withLora: false,
      prompts: [{ id: 'default', name: 'default' }],
    });
    // The hosted API's clients put idForGenerate in voiceId.
    assert.equal(v.idForGenerate, v.id);
    assert.match(String(v.createdAt), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it('validates create requests', async () => {
    const cases: [unknown, number, string][] = [
      [{}, 400, 'VALIDATION_MISSING_FIELD'],
      [{ name: '  ' }, 400, 'VALIDATION_MISSING_FIELD'],
      [{ name: 5 }, 400, 'VALIDATION_INVALID_VALUE'],
      [{ name: 'x'.repeat(101) }, 400, 'VALIDATION_TOO_LONG'],
      [{ name: 'x', modelVersion: 'v2.0' }, 400, 'VOICE_MODEL_VERSION_INVALID'],
      [{ name: 'x', modelVersion: 'v9' }, 400, 'VOICE_MODEL_VERSION_INVALID'],
      [{ name: 'x', engine: { engine: 'espeak', voice: 'no-such-voice' } }, 400, 'VALIDATION_INVALID_VALUE'],
      [
        { name: 'x', engine: { engine: 'remote', endpoint: 'unconfigured', voice: 'alloy' } },
        400,
        'VALIDATION_INVALID_VALUE',
      ],
      [
        { name: 'x', engine: { engine: 'remote', endpoint: 'http://evil.example/', voice: 'alloy' } },
        400,
        'VALIDATION_INVALID_VALUE',
      ],
      [
        { name: 'x', engine: { engine: 'espeak', voice: 'en-us', pitch: 200 } },
        400,
        'VALIDATION_INVALID_VALUE',
      ],
      [{ name: 'x', language: 42 }, 400, 'VALIDATION_INVALID_VALUE'],
    ];
    for (const [payload, status, code] of cases) {
      const res = await t.app.http.inject({
        method: 'POST',
        url: '/api/voice',
        headers: bearer(t.key),
        payload: payload as object,
      });
      assert.equal(res.statusCode, status, JSON.stringify(payload));
      assert.equal(res.json<{ code: string }>().code, code, JSON.stringify(payload));
    }
    const ok = await t.app.http.inject({
      method: 'POST',
      url: '/api/voice',
      headers: bearer(t.key),
      payload: {
        name: 'German',
        language: 'de',
        modelVersion: 'v4.0',
        engine: { engine: 'espeak', voice: 'de', variant: 'f3', pitch: 60 },
      },
    });
    assert.equal(ok.statusCode, 200);
    assert.equal(ok.json<{ data: { version: string } }>().data.version, 'v4.0');
  });

  it('keeps known languages and makes auto of auto and unknown ones, as the hosted API does', async () => {
    const create = async (payload: object) => {
      const res = await t.app.http.inject({
        method: 'POST',
        url: '/api/voice',
        headers: bearer(t.key),
        payload,
      });
      assert.equal(res.statusCode, 200, res.body);
      return res.json<{ data: { language: string; engine: { engine: string; voice: string } } }>().data;
    };
    // An MCP server's cloned voice: auto, v3.0 and a prompt data URL (fields we do not use are ignored).
    const cloned = await create({
      name: 'Cloned',
      language: 'auto',
      modelVersion: 'v3.0',
      prompt: 'data:audio/wav;base64,UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=',
    });
    assert.deepEqual(
      [cloned.language, cloned.engine.engine, cloned.engine.voice],
      ['auto', 'flite', 'kal16'],
    );
    for (const unknown of ['xx-nope', 'klingon', 'AUTO', '']) {
      assert.equal((await create({ name: 'x', language: unknown })).language, 'auto', unknown);
    }
    const german = await create({ name: 'German', language: 'de' });
    assert.deepEqual([german.language, german.engine.voice], ['de', 'de']);
  });

  it('lists newest first with total, gets, deletes; every path also under /api/tts/voice', async () => {
    const acct = await t.newAccount();
    const ids: string[] = [];
    for (const name of ['a', 'b', 'c']) {
      const res = await t.app.http.inject({
        method: 'POST',
        url: '/api/tts/voice',
        headers: bearer(acct.key),
        payload: { name },
      });
      ids.push(res.json<{ data: { id: string } }>().data.id);
    }
    const list = await t.app.http.inject({
      method: 'GET',
      url: '/api/voice?limit=2',
      headers: bearer(acct.key),
    });
    const body = list.json<{ data: { name: string }[]; total: number }>();
    assert.equal(body.total, 3);
    assert.deepEqual(
      body.data.map((v) => v.name),
      ['c', 'b'],
    );
    const got = await t.app.http.inject({
      method: 'GET',
      url: `/api/tts/voice/${ids[0]}`,
      headers: bearer(acct.key),
    });
    assert.equal(got.json<{ data: { name: string } }>().data.name, 'a');
    const del = await t.app.http.inject({
      method: 'DELETE',
      url: `/api/voice/${ids[0]}`,
      headers: bearer(acct.key),
    });
    assert.deepEqual(del.json(), { status: 200, message: 'OK' });
    const gone = await t.app.http.inject({
      method: 'GET',
      url: `/api/voice/${ids[0]}`,
      headers: bearer(acct.key),
    });
    assert.equal(gone.statusCode, 404);
    assert.equal(gone.json<{ code: string }>().code, 'VOICE_NOT_FOUND');
    const badLimit = await t.app.http.inject({
      method: 'GET',
      url: '/api/voice?limit=0',
      headers: bearer(acct.key),
    });
    assert.equal(badLimit.statusCode, 400);
  });

  it("another account's voice is 404 VOICE_NOT_FOUND on every path", async () => {
    const other = await t.newAccount();
    const voice = await importVoice({ version: 'v2.0' }, other.accountId);
    for (const [method, url] of [
      ['GET', `/api/voice/${voice.id}`],
      ['DELETE', `/api/voice/${voice.id}`],
      ['POST', `/api/voice/${voice.id}/migrateV3`],
      ['POST', `/api/tts/voice/${voice.id}/migrateV3`],
    ] as const) {
      const res = await t.app.http.inject({ method, url, headers: bearer(t.key) });
      assert.equal(res.statusCode, 404, url);
      assert.equal(res.json<{ code: string }>().code, 'VOICE_NOT_FOUND');
    }
    assert.equal((await t.app.services.voices.get(other.accountId, voice.id)).version, 'v2.0');
  });

  describe('migrateV3', () => {
    for (const from of ['v1.0', 'v2.0'] as const) {
      for (const path of ['/api/voice', '/api/tts/voice']) {
        it(`${from} without LoRA → v3.0, {"status":200} and no data (${path})`, async () => {
          const voice = await importVoice({ version: from });
          const res = await migrate(voice.id, path);
          assert.equal(res.statusCode, 200);
          assert.deepEqual(res.json(), { status: 200 });
          assert.match(String(res.headers['x-service-app-request-id']), /^[0-9a-f-]{36}$/);
          assert.equal((await t.app.services.voices.get(t.accountId, voice.id)).version, 'v3.0');
        });
      }
    }

    it('v3.0 → 400 VOICE_MIGRATE_NOT_NEEDED, unchanged', async () => {
      const voice = await importVoice({ version: 'v3.0' });
      const res = await migrate(voice.id);
      assert.equal(res.statusCode, 400);
      assert.deepEqual(Object.keys(res.json<object>()).sort(), ['code', 'message', 'status']);
      assert.equal(res.json<{ code: string }>().code, 'VOICE_MIGRATE_NOT_NEEDED');
      assert.equal((await t.app.services.voices.get(t.accountId, voice.id)).version, 'v3.0');
    });

    it('v4.0 → 400 VOICE_MIGRATE_NOT_ALLOWED naming the cross-family reason', async () => {
      const voice = await importVoice({ version: 'v4.0' });
      const res = await migrate(voice.id, '/api/tts/voice');
      assert.equal(res.statusCode, 400);
      const body = res.json<{ code: string; message: string }>();
      assert.equal(body.code, 'VOICE_MIGRATE_NOT_ALLOWED');
      assert.match(body.message, /cross model family/);
      assert.equal((await t.app.services.voices.get(t.accountId, voice.id)).version, 'v4.0');
    });

    for (const from of ['v1.0', 'v2.0', 'v3.0'] as const) {
      it(`${from} with professional-cloning artifacts → 400 VOICE_MIGRATE_NOT_ALLOWED naming LoRA`, async () => {
        const voice = await importVoice({ version: from, withLora: true });
        const res = await migrate(voice.id);
        assert.equal(res.statusCode, 400);
        const body = res.json<{ code: string; message: string }>();
        assert.equal(body.code, 'VOICE_MIGRATE_NOT_ALLOWED');
        assert.match(body.message, /LoRA/);
        assert.equal((await t.app.services.voices.get(t.accountId, voice.id)).version, from);
      });
    }

    it('a LoRA upload gives the voice artifacts, after which migration is not allowed', async () => {
      const voice = await importVoice({ version: 'v2.0' });
      const up = await t.app.http.inject({
        method: 'PUT',
        url: `/api/voice/${voice.id}/lora`,
        headers: { ...bearer(t.key), 'content-type': 'application/zip' },
        payload: Buffer.from('PK\u0003\u0004 sample archive'),
      });
      assert.equal(up.statusCode, 200);
      assert.equal(up.json<{ data: { metadata: { withLora: boolean } } }>().data.metadata.withLora, true);
      const res = await migrate(voice.id);
      assert.equal(res.json<{ code: string }>().code, 'VOICE_MIGRATE_NOT_ALLOWED');
    });

    it('a LoRA upload with a JSON body (null, object) is 400, not a 500 (fuzzing finding)', async () => {
      const voice = await importVoice({ version: 'v2.0' });
      for (const payload of ['null', '{}', '[]', '"x"']) {
        const up = await t.app.http.inject({
          method: 'PUT',
          url: `/api/voice/${voice.id}/lora`,
          headers: { ...bearer(t.key), 'content-type': 'application/json' },
          payload,
        });
        assert.equal(up.statusCode, 400, `${payload}: ${up.body}`);
        assert.equal(up.json<{ code: string }>().code, 'VALIDATION_INVALID_FORMAT');
      }
    });

    it('unknown id → 404 VOICE_NOT_FOUND; voice still creating → 409 VOICE_CREATING', async () => {
      const missing = await migrate('00000000-0000-0000-0000-000000000000');
      assert.equal(missing.statusCode, 404);
      assert.equal(missing.json<{ code: string }>().code, 'VOICE_NOT_FOUND');
      const creating = await importVoice({ version: 'v2.0', status: 'creating' });
      const res = await migrate(creating.id);
      assert.equal(res.statusCode, 409);
      assert.equal(res.json<{ code: string }>().code, 'VOICE_CREATING');
    });

    it('without a bearer key → 401', async () => {
      const voice = await importVoice({ version: 'v2.0' });
      const res = await t.app.http.inject({ method: 'POST', url: `/api/voice/${voice.id}/migrateV3` });
      assert.equal(res.statusCode, 401);
    });

    it('20 concurrent calls: exactly one migrates, the others get NOT_NEEDED', async () => {
      const voice = await importVoice({ version: 'v1.0' });
      const results = await Promise.all(Array.from({ length: 20 }, () => migrate(voice.id)));
      const ok = results.filter((r) => r.statusCode === 200);
      const notNeeded = results.filter(
        (r) => r.json<{ code?: string }>().code === 'VOICE_MIGRATE_NOT_NEEDED',
      );
      assert.equal(ok.length, 1);
      assert.equal(notNeeded.length, 19);
      assert.equal((await t.app.services.voices.get(t.accountId, voice.id)).version, 'v3.0');
    });
  });

  describe('migrateV2', () => {
    it('v1.0 → v2.0; v2.0 and v3.0 → NOT_NEEDED; v4.0 → NOT_ALLOWED', async () => {
      const v1 = await importVoice({ version: 'v1.0' });
      assert.deepEqual((await migrate(v1.id, '/api/voice', t.key, 'migrateV2')).json(), { status: 200 });
      assert.equal((await t.app.services.voices.get(t.accountId, v1.id)).version, 'v2.0');
      assert.equal(
        (await migrate(v1.id, '/api/tts/voice', t.key, 'migrateV2')).json<{ code: string }>().code,
        'VOICE_MIGRATE_NOT_NEEDED',
      );
      const v3 = await importVoice({ version: 'v3.0' });
      assert.equal(
        (await migrate(v3.id, '/api/voice', t.key, 'migrateV2')).json<{ code: string }>().code,
        'VOICE_MIGRATE_NOT_NEEDED',
      );
      const v4 = await importVoice({ version: 'v4.0' });
      assert.equal(
        (await migrate(v4.id, '/api/voice', t.key, 'migrateV2')).json<{ code: string }>().code,
        'VOICE_MIGRATE_NOT_ALLOWED',
      );
    });
  });
});
