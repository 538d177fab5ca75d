// Splitter work is bounded: one preview request with a large pathological splitter input could
// freeze every other request for a minute. Each pathological shape (many marks
// sharing an open character, many placeholder keys sharing a first character, a large lookupTable
// against a text full of brackets, params multiplied by markers, too many markers, too long a text)
// is refused with a clear 400 naming the field and the bound, on preview, on generate and on
// save; the worst input the bounds allow is answered correctly while /healthz keeps answering.
// Timings are measured by bench/splitter-event-loop.bench.ts, never asserted here.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { worstAllowedPreview } from '../bench/splitter-event-loop.bench.js';
import { SPLITTER_CONFIG_BOUNDS as BOUNDS } from '../src/splitter/splitter-config.js';
import { SplitterStore } from '../src/splitter/splitter-store.js';
import { bearer, startTestApp, type TestApp } from './helpers/test-app.js';

interface ErrorBody {
  status: number;
  code: string;
  message: string;
}

const MAX_TEXT = 10_000; // MAX_TEXT_LENGTH's default, which these apps keep
const MAX_MARKERS = 1000; // SPLITTER_MAX_MARKERS's default
/** Deadline of every request of this file: far above a bounded split, far below the review's freeze. */
const DEADLINE_MS = 30_000;

/** The review's pathological configs, each with the text that made it slow and the 400 it now gets. */
function pathologicalCases(): Array<{
  name: string;
  config: Record<string, unknown>;
  text: string;
  error: RegExp;
}> {
  // ASCII closes absent from the text (a body of 0.5 MB): each open used to check every mark.
  const closes = 'abcdefghijklmnopqrstuvwxyz';
  const marks = Array.from({ length: 100_000 }, (_, i) => `[${closes[i % closes.length] ?? 'z'}`);
  const keys: Record<string, unknown> = { fallbackConfig: { voiceId: 'v' } };
  for (let i = 0; i < 60_000; i++) keys[`a${i.toString(36)}z`] = {};
  const table: Record<string, unknown> = {};
  for (let i = 0; i < 40_000; i++) table[`e${i}`] = { tags: [['x', `t${i}`]] };
  const params: Record<string, unknown> = { voiceId: 'v' };
  for (let i = 0; i < 100_000; i++) params[`p${i}`] = 0;
  const longKey = 'k'.repeat(5000);
  return [
    {
      name: '100,000 marks sharing the open character, text of 10,000 opens',
      config: { splitterMarks: marks, fallbackConfig: { voiceId: 'v' } },
      text: '['.repeat(MAX_TEXT),
      error: /^splitterMarks has 100000 entries; at most 64 are allowed$/,
    },
    {
      name: '60,000 placeholder keys sharing the first character',
      config: keys,
      text: 'a'.repeat(MAX_TEXT),
      error: /^config has 60000 placeholder keys; at most 500 are allowed$/,
    },
    {
      name: '40,000 lookupTable entries against 3,333 brackets',
      config: { splitterMarks: ['[]'], lookupTable: table, fallbackConfig: { voiceId: 'v' } },
      text: '[x]'.repeat(Math.floor(MAX_TEXT / 3)),
      error: /^lookupTable has 40000 entries; at most 500 are allowed$/,
    },
    {
      name: 'a placeholder of 100,000 params, copied at each of 2,500 markers',
      config: { a: params },
      text: 'a b '.repeat(MAX_TEXT / 4),
      error: /^config has more than 64 distinct parameter names; at most 64 are allowed$/,
    },
    {
      name: 'a 5,000-character placeholder key',
      config: { [longKey]: { voiceId: 'v' } },
      text: `${longKey.slice(0, MAX_TEXT - 10)}`,
      error: /^placeholder key "k{20}…" has 5000 characters; at most 100 are allowed$/,
    },
  ];
}

describe('splitter work is bounded', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ listen: true });
  });
  after(async () => t.close());

  const post = (url: string, payload: unknown) =>
    t.app.http.inject({ method: 'POST', url, headers: bearer(t.key), payload: payload as object });

  const assertRefused = (
    res: { statusCode: number; json: <T>() => T },
    code: string,
    message: RegExp,
  ): void => {
    assert.equal(res.statusCode, 400);
    const body = res.json<ErrorBody>();
    assert.equal(body.code, code);
    assert.match(body.message, message);
  };

  for (const { name, config, text, error } of pathologicalCases()) {
    it(`refuses ${name} with 400 TTS_SPLITTER_INVALID on preview, generate and save`, async () => {
      assertRefused(
        await post('/api/splitter/preview', { text, splitter: config }),
        'TTS_SPLITTER_INVALID',
        error,
      );
      assertRefused(
        await post('/api/tts/generate', { text, splitter: config }),
        'TTS_SPLITTER_INVALID',
        error,
      );
      assertRefused(await post('/api/splitter', { name: 'huge', config }), 'TTS_SPLITTER_INVALID', error);
    });
  }

  it('refuses a text holding more markers than SPLITTER_MAX_MARKERS with 400 VALIDATION_TOO_LONG', async () => {
    const splitter = { '<A>': { voiceId: 'v' }, splitterMarks: ['[]'] };
    const over = `${'[]'.repeat(MAX_MARKERS)}<A> hello`;
    const message = new RegExp(
      `^text holds more than ${MAX_MARKERS} markers .*; at most ${MAX_MARKERS} are allowed$`,
    );
    assertRefused(
      await post('/api/splitter/preview', { text: over, splitter }),
      'VALIDATION_TOO_LONG',
      message,
    );
    assertRefused(await post('/api/tts/generate', { text: over, splitter }), 'VALIDATION_TOO_LONG', message);
    // Exactly at the bound the markers are counted, not refused.
    const at = `${'[]'.repeat(MAX_MARKERS - 1)}<A> hello`;
    const res = await post('/api/splitter/preview', { text: at, splitter });
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(
      res
        .json<{ data: { utterances: Array<{ text: string; voiceId: string }> } }>()
        .data.utterances.map((u) => [u.text, u.voiceId]),
      [['hello', 'v']],
    );
  });

  it('refuses a text longer than MAX_TEXT_LENGTH with 400 VALIDATION_TOO_LONG before splitting', async () => {
    const res = await post('/api/splitter/preview', {
      text: 'a'.repeat(MAX_TEXT + 1),
      splitter: { fallbackConfig: { voiceId: 'v' } },
    });
    assertRefused(res, 'VALIDATION_TOO_LONG', new RegExp(`^text must be at most ${MAX_TEXT} characters$`));
  });

  it('a splitter saved before the bounds still reads, and is refused with the clear 400 when used', async () => {
    const config = {
      splitterMarks: Array.from({ length: BOUNDS.splitterMarks + 1 }, () => '[]'),
      fallbackConfig: { voiceId: 'v' },
    };
    const id = randomUUID();
    const now = new Date();
    await new SplitterStore(t.app.services.database.db).insert({
      id,
      account_id: t.accountId,
      name: 'old',
      config: JSON.stringify(config),
      created_at: now,
      updated_at: now,
    });
    const got = await t.app.http.inject({
      method: 'GET',
      url: `/api/splitter/${id}`,
      headers: bearer(t.key),
    });
    assert.equal(got.statusCode, 200);
    const error = /^splitterMarks has 65 entries; at most 64 are allowed$/;
    assertRefused(
      await post('/api/splitter/preview', { text: 'hi', splitterId: id }),
      'TTS_SPLITTER_INVALID',
      error,
    );
    assertRefused(
      await post('/api/tts/generate', { text: 'hi', splitterId: id }),
      'TTS_SPLITTER_INVALID',
      error,
    );
    // A rename leaves the config as it was (and usable only once fixed); a config update is re-checked.
    const renamed = await post(`/api/splitter/${id}`, { name: 'renamed' });
    assert.equal(renamed.statusCode, 200, renamed.body);
    assertRefused(
      await post(`/api/splitter/${id}`, { config: { '<A>': { voiceId: 'v' } } }),
      'TTS_SPLITTER_INVALID',
      error,
    );
    const fixed = await post(`/api/splitter/${id}`, { config: { splitterMarks: ['[]'] } });
    assert.equal(fixed.statusCode, 200, fixed.body);
    const used = await post('/api/splitter/preview', { text: 'hi', splitterId: id });
    assert.equal(used.statusCode, 200, used.body);
  });

  it('answers the worst allowed input correctly while a concurrent /healthz is answered', async () => {
    const { body, expected } = worstAllowedPreview();
    const signal = AbortSignal.timeout(DEADLINE_MS);
    const preview = fetch(`${t.baseUrl}/api/splitter/preview`, {
      method: 'POST',
      headers: { ...bearer(t.key), 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal,
    });
    const health = fetch(`${t.baseUrl}/healthz`, { signal });
    const [previewRes, healthRes] = await Promise.all([preview, health]);
    assert.equal(healthRes.status, 200);
    await healthRes.arrayBuffer();
    assert.equal(previewRes.status, 200);
    const { data } = (await previewRes.json()) as {
      data: { utterances: Array<{ text: string; voiceId: string; marker: string | null }> };
    };
    assert.deepEqual(
      data.utterances.map((u) => ({ text: u.text, voiceId: u.voiceId, marker: u.marker })),
      expected,
    );
  });
});
