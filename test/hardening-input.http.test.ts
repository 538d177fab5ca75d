// Bad input is a clear 4xx, never a 500, on a real app:
// - NUL and other control characters in ids and stored strings would reach PostgreSQL ("invalid byte sequence");
// - non-finite numbers (1e309) would be stored as null and break the splitter for good;
// - deeply nested JSON would overflow the stack.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { REQUEST_ID_HEADER } from '../src/http/server.js';
import { bearer, startTestApp, type TestApp } from './helpers/test-app.js';

interface ErrorBody {
  status: number;
  code: string;
  message: string;
}

describe('bad input is a clear 4xx, never a 500', () => {
  let t: TestApp;
  let splitterId = '';
  let voiceId = '';
  before(async () => {
    t = await startTestApp();
    const voice = await send('POST', '/api/voice', JSON.stringify({ name: 'Narrator' }));
    assert.equal(voice.statusCode, 200, voice.body);
    voiceId = voice.json<{ data: { id: string } }>().data.id;
    const splitter = await send(
      'POST',
      '/api/splitter',
      JSON.stringify({ name: 'Dialogue', config: { '<A>': { voiceId, speechRate: 1 } } }),
    );
    assert.equal(splitter.statusCode, 200, splitter.body);
    splitterId = splitter.json<{ data: { id: string } }>().data.id;
  });
  after(async () => t.close());

  /** Sends raw JSON text, so numbers like 1e309 and escapes like \u0000 reach the server as written. */
  function send(method: 'GET' | 'POST' | 'DELETE', url: string, json?: string) {
    return t.app.http.inject({
      method,
      url,
      headers: { ...bearer(t.key), ...(json === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(json === undefined ? {} : { payload: json }),
    });
  }

  function assertClientError(
    res: { statusCode: number; body: string; headers: Record<string, unknown> },
    status: number,
    code: string,
    mentions?: RegExp,
  ): void {
    assert.equal(res.statusCode, status, res.body);
    const body = JSON.parse(res.body) as ErrorBody;
    assert.equal(body.code, code, res.body);
    if (mentions) assert.match(body.message, mentions);
    assert.equal(typeof res.headers[REQUEST_ID_HEADER.toLowerCase()], 'string');
  }

  async function assertStillServing(): Promise<void> {
    for (const url of ['/api/splitter', `/api/splitter/${splitterId}`, '/api/voice', '/api/tts/generate']) {
      const res = await send('GET', url);
      assert.equal(res.statusCode, 200, `${url}: ${res.body}`);
    }
  }

  describe('control characters', () => {
    it('a NUL or control character in a path id is 404 like an unknown id', async () => {
      const cases: Array<[method: 'GET' | 'POST' | 'DELETE', url: string, code: string]> = [
        ['GET', '/api/splitter/a%00b', 'SPLITTER_NOT_FOUND'],
        ['DELETE', '/api/splitter/%00', 'SPLITTER_NOT_FOUND'],
        ['POST', '/api/splitter/x%01y', 'SPLITTER_NOT_FOUND'],
        ['GET', '/api/voice/a%00b', 'VOICE_NOT_FOUND'],
        ['GET', '/api/tts/voice/a%00b', 'VOICE_NOT_FOUND'],
        ['DELETE', '/api/voice/%00', 'VOICE_NOT_FOUND'],
        ['POST', '/api/voice/%00/migrateV3', 'VOICE_NOT_FOUND'],
        ['GET', '/api/tts/generate/a%00b', 'GENERATE_NOT_FOUND'],
        ['DELETE', '/api/tts/generate/%00', 'GENERATE_NOT_FOUND'],
      ];
      for (const [method, url, code] of cases) {
        const res = await send(method, url, method === 'POST' ? '{"name":"x"}' : undefined);
        assertClientError(res, 404, code);
      }
    });

    it('a NUL in a query parameter is 400 naming the parameter', async () => {
      const res = await send('GET', '/api/tts/generate?status=%00');
      assertClientError(res, 400, 'VALIDATION_INVALID_VALUE', /status/);
    });

    it('a NUL in a splitter name, config key or config value is 400 naming the field', async () => {
      const config = (inner: string) => `{"name":"n","config":${inner}}`;
      const cases: Array<[json: string, code: string, mentions: RegExp]> = [
        ['{"name":"a\\u0000b","config":{"<A>":{"voiceId":"v"}}}', 'VALIDATION_INVALID_VALUE', /name/],
        ['{"name":"a\\u0007b","config":{"<A>":{"voiceId":"v"}}}', 'VALIDATION_INVALID_VALUE', /name/],
        [config('{"<A\\u0000>":{"voiceId":"v"}}'), 'TTS_SPLITTER_INVALID', /<A/],
        [config('{"<A>":{"voiceId":"v\\u0000"}}'), 'TTS_SPLITTER_INVALID', /voiceId/],
        [config('{"<A>":{"voiceId":"v","note":"x\\u0000"}}'), 'TTS_SPLITTER_INVALID', /note/],
        [config('{"splitterMarks":["[\\u0000"]}'), 'TTS_SPLITTER_INVALID', /splitterMarks/],
        [
          config('{"lookupTable":{"a":{"tags":[["x","\\u0000"]]}},"fallbackConfig":{"voiceId":"v"}}'),
          'TTS_SPLITTER_INVALID',
          /tags/,
        ],
      ];
      for (const [json, code, mentions] of cases) {
        assertClientError(await send('POST', '/api/splitter', json), 400, code, mentions);
        assertClientError(await send('POST', `/api/splitter/${splitterId}`, json), 400, code, mentions);
      }
      await assertStillServing();
    });

    it('a NUL in a voice name or description is 400 naming the field', async () => {
      for (const [json, field] of [
        ['{"name":"a\\u0000"}', /name/],
        ['{"name":"a\\u001b[31m"}', /name/],
        ['{"name":"a","description":"d\\u0000"}', /description/],
      ] as const) {
        assertClientError(await send('POST', '/api/voice', json), 400, 'VALIDATION_INVALID_VALUE', field);
      }
      await assertStillServing();
    });

    it('a NUL in generate texts and ids is 400 naming the field; texts keep tabs and newlines', async () => {
      const item = (fields: string) => `{"contents":[{"type":"text",${fields}}]}`;
      const cases: Array<[json: string, mentions: RegExp]> = [
        [item(`"text":"Hi\\u0000there","voiceId":"${voiceId}"`), /contents\[0\]\.text/],
        [item(`"text":"Hi\\u0002there","voiceId":"${voiceId}"`), /contents\[0\]\.text/],
        [item(`"text":"Hi","voiceId":"${voiceId}\\u0000"`), /contents\[0\]\.voiceId/],
        [item(`"text":"Hi","voiceId":"${voiceId}","promptId":"\\u0000"`), /contents\[0\]\.promptId/],
        [`{"text":"<A>Hi\\u0000","splitterId":"${splitterId}"}`, /text/],
        ['{"text":"<A>Hi","splitterId":"a\\u0000b"}', /splitterId/],
      ];
      for (const [json, mentions] of cases) {
        // Inside contents[] every bad value is TTS_CONTENTS_INVALID.
        assertClientError(
          await send('POST', '/api/tts/generate', json),
          400,
          mentions.source.startsWith('contents') ? 'TTS_CONTENTS_INVALID' : 'VALIDATION_INVALID_VALUE',
          mentions,
        );
      }
      const preview = await send(
        'POST',
        '/api/splitter/preview',
        JSON.stringify({ text: '<A>Hi\tthere,\r\nfriend.', splitterId }),
      );
      assert.equal(preview.statusCode, 200, preview.body);
      await assertStillServing();
    });
  });

  describe('non-finite numbers', () => {
    it('speechRate 1e309 / -1e309 in a splitter config is 400 on create and on diff update; nothing is stored', async () => {
      for (const n of ['1e309', '-1e309']) {
        const create = await send(
          'POST',
          '/api/splitter',
          `{"name":"n","config":{"<A>":{"voiceId":"v","speechRate":${n}}}}`,
        );
        assertClientError(create, 400, 'TTS_SPLITTER_INVALID', /speechRate/);
        const update = await send(
          'POST',
          `/api/splitter/${splitterId}`,
          `{"config":{"<A>":{"speechRate":${n}}}}`,
        );
        assertClientError(update, 400, 'TTS_SPLITTER_INVALID', /speechRate/);
        const free = await send(
          'POST',
          '/api/splitter',
          `{"name":"n","config":{"<A>":{"voiceId":"v","pitch":[1,${n}]}}}`,
        );
        assertClientError(free, 400, 'TTS_SPLITTER_INVALID', /pitch/);
        const inline = await send(
          'POST',
          '/api/splitter/preview',
          `{"text":"<A>Hi","splitter":{"<A>":{"voiceId":"v","speechRate":${n}}}}`,
        );
        assertClientError(inline, 400, 'TTS_SPLITTER_INVALID', /speechRate/);
      }
      await assertStillServing();
      const got = await send('GET', `/api/splitter/${splitterId}`);
      assert.deepEqual(got.json<{ data: { config: unknown } }>().data.config, {
        '<A>': { voiceId, speechRate: 1 },
      });
      const preview = await send(
        'POST',
        '/api/splitter/preview',
        JSON.stringify({ text: '<A>Hi', splitterId }),
      );
      assert.equal(preview.statusCode, 200, preview.body);
    });

    it('1e309 / -1e309 in contents[].speechRate, seed or interval is 400 naming the field', async () => {
      for (const n of ['1e309', '-1e309']) {
        for (const field of ['speechRate', 'seed', 'interval']) {
          const json = `{"contents":[{"type":"text","text":"Hi","voiceId":"${voiceId}","${field}":${n}}]}`;
          const res = await send('POST', '/api/tts/generate', json);
          assertClientError(res, 400, 'TTS_CONTENTS_INVALID', new RegExp(`contents\\[0\\]\\.${field}`));
        }
      }
      await assertStillServing();
    });
  });

  describe('nesting depth', () => {
    it('JSON nested 2,000 and 100,000 deep is 400 VALIDATION_INVALID_FORMAT and the server keeps answering', async () => {
      for (const depth of [2_000, 100_000]) {
        const bodies = [
          '['.repeat(depth) + ']'.repeat(depth),
          '{"a":'.repeat(depth) + '1' + '}'.repeat(depth),
          `{"name":"n","config":{"<A>":${'{"x":'.repeat(depth)}1${'}'.repeat(depth)}}}`,
        ];
        for (const json of bodies) {
          for (const url of [
            '/api/splitter',
            `/api/splitter/${splitterId}`,
            '/api/tts/generate',
            '/api/voice',
          ]) {
            assertClientError(await send('POST', url, json), 400, 'VALIDATION_INVALID_FORMAT', /nest/);
          }
        }
      }
      await assertStillServing();
    });

    it('brackets inside strings do not count as nesting', async () => {
      const res = await send(
        'POST',
        '/api/splitter',
        JSON.stringify({
          name: `${'['.repeat(80)}\\"{`,
          config: { '<A>': { voiceId: 'v', note: '{'.repeat(500) } },
        }),
      );
      assert.equal(res.statusCode, 200, res.body);
    });
  });

  describe('unpaired UTF-16 surrogates (fuzzing finding)', () => {
    it('a lone surrogate escape anywhere in a JSON body is 400 VALIDATION_INVALID_FORMAT, never a 500', async () => {
      const cases: [string, string, string][] = [
        ['POST', '/api/voice', '{"name":"\\udc50"}'],
        ['POST', '/api/voice', '{"name":"ok","description":"x\\ud800"}'],
        ['POST', '/api/tts/simple-generate', `{"text":"Hi.","voiceId":"\\udc50"}`],
        ['POST', '/api/splitter/preview', '{"text":"Hi.","splitterId":"\\udbff"}'],
        ['POST', '/api/splitter', '{"name":"s","config":{"<A>":{"voiceId":"v"},"\\udc00":1}}'],
      ];
      for (const [method, url, json] of cases) {
        const res = await send(method as 'POST', url, json);
        assertClientError(res, 400, 'VALIDATION_INVALID_FORMAT', /surrogate/);
      }
      const admin = await t.app.http.inject({
        method: 'POST',
        url: '/admin/accounts',
        headers: { ...bearer(t.app.adminToken ?? ''), 'content-type': 'application/json' },
        payload: '{"name":"\\udc50"}',
      });
      assertClientError(admin, 400, 'VALIDATION_INVALID_FORMAT', /surrogate/);
      // The check walks any body without recursion or spreading: 300,000 array items are fine.
      const wide = await send(
        'POST',
        '/api/splitter/preview',
        JSON.stringify({ text: 'Hi.', splitter: { config: new Array(300_000).fill(0) } }),
      );
      assert.notEqual(wide.statusCode, 500, wide.body);
      assert.doesNotMatch(wide.body, /not valid JSON/);
      // A well-formed pair (an emoji) is text like any other.
      const emoji = await send('POST', '/api/voice', '{"name":"Narrator \\ud83d\\ude00"}');
      assert.equal(emoji.statusCode, 200, emoji.body);
      await assertStillServing();
    });
  });
});
