// Splitter mode of POST /api/tts/generate and POST /api/splitter/preview, through HTTP on the real app; one
// end-to-end dialogue whose finished MP3 is decoded and measured. The splitting rules themselves are
// unit-tested in src/splitter/split-text.test.ts; here: request shapes, errors, and what reaches the task.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { REQUEST_ID_HEADER } from '../src/http/server.js';
import { decodeToPcm, ffmpegErrors, probeAudio } from './helpers/audio-check.js';
import { bearer, startTestApp, type TestApp } from './helpers/test-app.js';

interface ErrorBody {
  status: number;
  code: string;
  message: string;
  requestId?: string;
}

interface ContentView {
  index: number;
  text: string;
  voiceId: string;
  speechRate: number;
  interval: number;
  audio?: string;
  [k: string]: unknown;
}

interface TaskBody {
  id: string;
  status: string;
  type: string;
  estimatedDuration: number;
  metadata: {
    contents: ContentView[];
    voices: { id: string }[];
    audio?: string;
    request?: Record<string, unknown>;
  };
}

interface PreviewUtterance {
  index: number;
  text: string;
  voiceId: string;
  speechRate: number;
  marker: string | null;
  params: Record<string, unknown>;
}

const RATE = 44100;
/** Encoder delay plus frame padding of one MP3 file is at most this many samples (two frames). */
const MAX_PADDING = 2 * 1152;

describe('generate in splitter mode', () => {
  let t: TestApp;
  let voiceA: string;
  let voiceB: string;

  const inject = (url: string, payload: unknown, key = t.key) =>
    t.app.http.inject({ method: 'POST', url, headers: bearer(key), payload: payload as object });
  const generate = (payload: unknown, key = t.key) => inject('/api/tts/generate', payload, key);
  const preview = (payload: unknown, key = t.key) => inject('/api/splitter/preview', payload, key);

  async function createVoice(name: string, engine: Record<string, unknown>, key = t.key): Promise<string> {
    const res = await inject('/api/voice', { name, engine }, key);
    assert.equal(res.statusCode, 200, res.body);
    return res.json<{ data: { id: string } }>().data.id;
  }

  async function saveSplitter(config: unknown, key = t.key): Promise<string> {
    const res = await inject('/api/splitter', { name: 'dialogue', config }, key);
    assert.equal(res.statusCode, 200, res.body);
    return res.json<{ data: { id: string } }>().data.id;
  }

  function assertError(
    res: Awaited<ReturnType<typeof generate>>,
    status: number,
    code: string,
    what: string,
  ): ErrorBody {
    assert.equal(res.statusCode, status, `${what}: ${res.body}`);
    const body = res.json<ErrorBody>();
    assert.equal(body.status, status, what);
    assert.equal(body.code, code, what);
    return body;
  }

  /** Both endpoints parse splitter mode the same way, so every error case is checked on both. */
  async function assertErrorOnBoth(payload: unknown, status: number, code: string): Promise<ErrorBody[]> {
    const out: ErrorBody[] = [];
    for (const [name, send] of [
      ['generate', generate],
      ['preview', preview],
    ] as const) {
      out.push(assertError(await send(payload), status, code, `${name} ${JSON.stringify(payload)}`));
    }
    return out;
  }

  const dialogue = () => ({
    '<CharacterA>': { voiceId: voiceA, speechRate: 1 },
    '<CharacterB>': { voiceId: voiceB, speechRate: 1.5, interval: 0.2 },
  });

  before(async () => {
    t = await startTestApp({ listen: true });
    voiceA = await createVoice('Alice', { engine: 'espeak', voice: 'en-us' });
    voiceB = await createVoice('Bob', { engine: 'espeak', voice: 'en-us', variant: 'm3' });
  });
  after(async () => t.close());

  it('rejects every mix of request shapes with 400 VALIDATION_CONFLICT', async () => {
    const splitter = dialogue();
    const splitterId = await saveSplitter(splitter);
    const contents = [{ text: 'Hi.', voiceId: voiceA }];
    const conflicts: unknown[] = [
      { text: 'Hi.', splitter, splitterId },
      { text: 'Hi.', splitter, contents },
      { text: 'Hi.', splitterId, contents },
      { splitter, contents },
      { splitterId, contents },
      { text: '<CharacterA>Hi.' },
      { text: '<CharacterA>Hi.', contents },
    ];
    for (const payload of conflicts) await assertErrorOnBoth(payload, 400, 'VALIDATION_CONFLICT');
  });

  it('requires text in splitter mode and rejects blank text', async () => {
    const splitterId = await saveSplitter(dialogue());
    for (const payload of [{ splitter: dialogue() }, { splitterId }, { splitter: dialogue(), text: null }]) {
      await assertErrorOnBoth(payload, 400, 'VALIDATION_MISSING_FIELD');
    }
    for (const text of ['', '   ', '\n\t ']) {
      await assertErrorOnBoth({ text, splitter: dialogue() }, 400, 'TTS_TEXT_EMPTY');
      await assertErrorOnBoth({ text, splitterId }, 400, 'TTS_TEXT_EMPTY');
    }
  });

  it('validates an inline splitter like POST /api/splitter: 400 TTS_SPLITTER_INVALID', async () => {
    const invalid: unknown[] = [
      [],
      'config',
      { lookupTable: {} },
      { '': { voiceId: voiceA } },
      { A: [] },
      { splitterMarks: ['[]]'] },
      { fallbackConfig: {} },
      { lookupTable: { a: { tags: [] } }, fallbackConfig: { voiceId: voiceA } },
    ];
    for (const splitter of invalid)
      await assertErrorOnBoth({ text: 'Hello.', splitter }, 400, 'TTS_SPLITTER_INVALID');
    // Valid config, but an utterance ends up with no voiceId (a rate-only marker with nothing in force).
    const [body] = await assertErrorOnBoth(
      {
        text: '[fast] Hello.',
        splitter: { splitterMarks: ['[]'], lookupTable: { f: { tags: ['fast'], speechRate: 0.8 } } },
      },
      400,
      'TTS_SPLITTER_INVALID',
    );
    assert.match(body?.message ?? '', /voiceId/);
  });

  it('validates the parameters an utterance gets as content items', async () => {
    // Utterances are content items: a bad value is TTS_CONTENTS_INVALID, as inside contents[].
    const bad = { '<A>': { voiceId: voiceA, interval: 99 } };
    await assertErrorOnBoth({ text: '<A>Hi.', splitter: bad }, 400, 'TTS_CONTENTS_INVALID');
    await assertErrorOnBoth(
      { text: '<A>Hi.', splitter: { '<A>': { voiceId: voiceA, preset: 'loud' } } },
      400,
      'TTS_CONTENTS_INVALID',
    );
    await assertErrorOnBoth(
      { text: '<A>Hi.', splitter: { '<A>': { voiceId: voiceA, speechRate: 5 } } },
      400,
      'TTS_CONTENTS_INVALID',
    );
    // More utterances than a task may have contents (default 200).
    await assertErrorOnBoth(
      { text: '<A>x'.repeat(201), splitter: { '<A>': { voiceId: voiceA } } },
      400,
      'TTS_CONTENTS_INVALID',
    );
  });

  it("answers 404 SPLITTER_NOT_FOUND for an unknown or another account's splitterId", async () => {
    const other = await t.newAccount();
    const foreign = await saveSplitter({ fallbackConfig: { voiceId: voiceA } }, other.key);
    for (const splitterId of [randomUUID(), 'not-a-uuid', foreign]) {
      await assertErrorOnBoth({ text: 'Hello.', splitterId }, 404, 'SPLITTER_NOT_FOUND');
    }
    // Its owner can use it.
    const own = await preview({ text: 'Hello.', splitterId: foreign }, other.key);
    assert.equal(own.statusCode, 200, own.body);
  });

  it('answers 500 TTS_SPLITTER_METADATA_INVALID (with requestId) when the stored config is corrupt', async () => {
    const splitterId = await saveSplitter(dialogue());
    await t.app.services.database.db
      .updateTable('splitters')
      .set({ config: '{broken' })
      .where('id', '=', splitterId)
      .execute();
    for (const send of [generate, preview]) {
      const res = await send({ text: '<CharacterA>Hi.', splitterId });
      const body = assertError(res, 500, 'TTS_SPLITTER_METADATA_INVALID', 'corrupt config');
      const header = res.headers[REQUEST_ID_HEADER.toLowerCase()];
      assert.equal(typeof header, 'string');
      assert.equal(body.requestId, header);
      assert.deepEqual(Object.keys(body).sort(), ['code', 'message', 'requestId', 'status']);
    }
    // The 4xx errors of splitter mode are not reportable: no requestId.
    const notFound = assertError(
      await generate({ text: 'Hi.', splitterId: randomUUID() }),
      404,
      'SPLITTER_NOT_FOUND',
      'unknown',
    );
    assert.equal(notFound.requestId, undefined);
  });

  it('answers 400 TTS_TEXT_EMPTY saying why when the split yields no utterance', async () => {
    // No fallbackConfig: text outside markers is dropped, and the only marker is followed by nothing.
    const noFallback = { '<A>': { voiceId: voiceA } };
    for (const text of ['Narration nobody speaks.', 'Narration nobody speaks. <A>   ']) {
      for (const body of await assertErrorOnBoth({ text, splitter: noFallback }, 400, 'TTS_TEXT_EMPTY')) {
        assert.match(body.message, /no utterance/);
        assert.match(body.message, /fallbackConfig/);
      }
    }
    // With a fallback, only a text of nothing but markers splits into nothing.
    for (const body of await assertErrorOnBoth(
      { text: '<A> <A>\n<A>', splitter: { ...noFallback, fallbackConfig: { voiceId: voiceA } } },
      400,
      'TTS_TEXT_EMPTY',
    )) {
      assert.match(body.message, /no utterance/);
      assert.match(body.message, /only markers/);
    }
  });

  it('answers 404 VOICE_NOT_FOUND for an unknown voiceId inside the config, and creates no task', async () => {
    const acct = await t.newAccount();
    const ownVoice = await createVoice('Own', { engine: 'espeak', voice: 'en-us' }, acct.key);
    const splitter = { '<A>': { voiceId: ownVoice }, '<B>': { voiceId: 'no-such-voice' } };
    assertError(
      await generate({ text: '<A>Hi.<B>Hello.', splitter }, acct.key),
      404,
      'VOICE_NOT_FOUND',
      'unknown voice',
    );
    // Another account's voice is unknown too.
    assertError(
      await generate(
        { text: '<A>Hi.<B>Hello.', splitter: { ...splitter, '<B>': { voiceId: voiceA } } },
        acct.key,
      ),
      404,
      'VOICE_NOT_FOUND',
      'foreign voice',
    );
    const list = await t.app.http.inject({
      method: 'GET',
      url: '/api/tts/generate',
      headers: bearer(acct.key),
    });
    assert.equal(list.json<{ total: number }>().total, 0);
  });

  it('turns each utterance into one content piece, in order, with its voice and parameters (both shapes)', async () => {
    const splitter = {
      ...dialogue(),
      splitterMarks: ['[]'],
      lookupTable: { slow: { tags: ['slow'], speechRate: 2 } },
      fallbackConfig: { voiceId: voiceA, speechRate: 0.5 },
    };
    const text =
      'Once upon a time. <CharacterA>Hi there.<CharacterB>Hello! [slow] Take it easy.<CharacterA> Bye.';
    const want = [
      { text: 'Once upon a time.', voiceId: voiceA, speechRate: 0.5, interval: 0.5 },
      { text: 'Hi there.', voiceId: voiceA, speechRate: 1, interval: 0.5 },
      { text: 'Hello!', voiceId: voiceB, speechRate: 1.5, interval: 0.2 },
      // The bracket inherits the voice (and interval) in force and overrides only the rate.
      { text: 'Take it easy.', voiceId: voiceB, speechRate: 2, interval: 0.2 },
      { text: 'Bye.', voiceId: voiceA, speechRate: 1, interval: 0.2 },
    ];
    const splitterId = await saveSplitter(splitter);
    for (const payload of [
      { text, splitter },
      { text, splitterId },
    ]) {
      const res = await generate(payload);
      assert.equal(res.statusCode, 200, res.body);
      const task = res.json<{ data: TaskBody }>().data;
      assert.equal(task.type, 'splitter');
      assert.deepEqual(
        task.metadata.contents.map((c) => ({
          text: c.text,
          voiceId: c.voiceId,
          speechRate: c.speechRate,
          interval: c.interval,
        })),
        want,
      );
      assert.deepEqual(
        task.metadata.contents.map((c) => c.index),
        [0, 1, 2, 3, 4],
      );
      assert.deepEqual(task.metadata.voices.map((v) => v.id).sort(), [voiceA, voiceB].sort());
      assert.deepEqual(
        task.metadata.request,
        'splitterId' in payload ? { text, splitterId } : { text, splitter },
      );
      // The detail endpoint shows the same pieces.
      const got = await t.app.http.inject({
        method: 'GET',
        url: `/api/tts/generate/${task.id}`,
        headers: bearer(t.key),
      });
      assert.deepEqual(
        got.json<{ data: TaskBody }>().data.metadata.contents.map((c) => c.text),
        want.map((w) => w.text),
      );
    }
  });

  describe('POST /api/splitter/preview', () => {
    it('returns the utterances for both shapes without creating a task', async () => {
      const acct = await t.newAccount();
      const splitter = {
        '<CharacterA>': { voiceId: 'va', speechRate: 1 },
        '<CharacterB>': { voiceId: 'vb', speechRate: 2, preset: 'stable', extra: 'dropped' },
        splitterMarks: ['【】'],
        lookupTable: { whisper: { tags: [['soft', 'low']], speechRate: 0.8 } },
      };
      const text = 'Dropped narration. <CharacterA>Hi.<CharacterB>Hello.【soft low】Psst.<CharacterA>   ';
      const want: PreviewUtterance[] = [
        {
          index: 0,
          text: 'Hi.',
          voiceId: 'va',
          speechRate: 1,
          marker: '<CharacterA>',
          params: { speechRate: 1, interval: 0.5 },
        },
        {
          index: 1,
          text: 'Hello.',
          voiceId: 'vb',
          speechRate: 2,
          marker: '<CharacterB>',
          params: { preset: 'stable', speechRate: 2, interval: 0.5 },
        },
        {
          index: 2,
          text: 'Psst.',
          voiceId: 'vb',
          speechRate: 0.8,
          marker: '【soft low】',
          params: { preset: 'stable', speechRate: 0.8, interval: 0.5 },
        },
      ];
      const splitterId = await saveSplitter(splitter, acct.key);
      for (const payload of [
        { text, splitter },
        { text, splitterId },
      ]) {
        const res = await preview(payload, acct.key);
        assert.equal(res.statusCode, 200, res.body);
        const body = res.json<{ status: number; data: { utterances: PreviewUtterance[] } }>();
        assert.deepEqual(Object.keys(body), ['status', 'data']);
        assert.equal(body.status, 200);
        assert.deepEqual(body.data.utterances, want);
      }
      const list = await t.app.http.inject({
        method: 'GET',
        url: '/api/tts/generate',
        headers: bearer(acct.key),
      });
      assert.equal(list.json<{ total: number }>().total, 0);
    });

    it('shows a fallback utterance with marker null and inherits the voice into rate-only markers', async () => {
      const res = await preview({
        text: 'Intro. [faster_speech:1.2] Quicker.',
        splitter: { fallbackConfig: { voiceId: 'narrator' }, '[faster_speech:1.2]': { speechRate: 1.2 } },
      });
      assert.equal(res.statusCode, 200, res.body);
      const { utterances } = res.json<{ data: { utterances: PreviewUtterance[] } }>().data;
      assert.deepEqual(
        utterances.map((u) => [u.text, u.voiceId, u.speechRate, u.marker]),
        [
          ['Intro.', 'narrator', 1, null],
          ['Quicker.', 'narrator', 1.2, '[faster_speech:1.2]'],
        ],
      );
    });

    it('needs a splitter, a bearer key, and is not taken for a splitter id', async () => {
      assertError(await preview({}), 400, 'VALIDATION_MISSING_FIELD', 'empty body');
      assertError(
        await preview({ contents: [{ text: 'Hi.', voiceId: voiceA }] }),
        400,
        'VALIDATION_MISSING_FIELD',
        'contents only',
      );
      const anon = await t.app.http.inject({
        method: 'POST',
        url: '/api/splitter/preview',
        payload: { text: 'Hi.', splitter: dialogue() },
      });
      assert.equal(anon.statusCode, 401);
      // GET has no preview route: "preview" is looked up as an id.
      const get = await t.app.http.inject({
        method: 'GET',
        url: '/api/splitter/preview',
        headers: bearer(t.key),
      });
      assert.equal(get.statusCode, 404);
      assert.equal(get.json<ErrorBody>().code, 'SPLITTER_NOT_FOUND');
    });
  });

  it(
    "end to end: a two-voice dialogue becomes one clean MP3 with both voices' pieces in order",
    { timeout: 180_000 },
    async () => {
      const SENTENCE_1 = 'The quick brown fox jumps over the lazy dog.';
      const SENTENCE_2 = 'Pack my box with five dozen liquor jugs.';
      const splitter = {
        '<Alice>': { voiceId: voiceA, speechRate: 1.0, interval: 0.3 },
        '<Bob>': { voiceId: voiceB, speechRate: 2.0, interval: 0.6 },
      };
      const text = `<Alice>${SENTENCE_1}\n<Bob>${SENTENCE_1}\n<Alice>${SENTENCE_2}\n<Bob>${SENTENCE_2}`;
      const created = await generate({ text, splitterId: await saveSplitter(splitter) });
      assert.equal(created.statusCode, 200, created.body);
      const taskId = created.json<{ data: TaskBody }>().data.id;

      // Wait (bounded) until the task is generated and its merged audio stored.
      let task: TaskBody | undefined;
      for (let i = 0; i < 1200; i++) {
        const res = await t.app.http.inject({
          method: 'GET',
          url: `/api/tts/generate/${taskId}`,
          headers: bearer(t.key),
        });
        task = res.json<{ data: TaskBody }>().data;
        assert.notEqual(task.status, 'failed', JSON.stringify(task));
        if (task.status === 'generated' && task.metadata.audio !== undefined) break;
        await sleep(100);
      }
      assert.ok(task?.metadata.audio !== undefined, `task never finished: ${JSON.stringify(task)}`);

      const contents = task.metadata.contents;
      assert.deepEqual(
        contents.map((c) => [c.index, c.text, c.voiceId, c.speechRate, c.interval]),
        [
          [0, SENTENCE_1, voiceA, 1, 0.3],
          [1, SENTENCE_1, voiceB, 2, 0.6],
          [2, SENTENCE_2, voiceA, 1, 0.3],
          [3, SENTENCE_2, voiceB, 2, 0.6],
        ],
      );

      const fetchMp3 = async (url: string | undefined): Promise<Buffer> => {
        assert.ok(url !== undefined && url.startsWith(t.baseUrl), `audio URL ${String(url)}`);
        const res = await fetch(url);
        assert.equal(res.status, 200, url);
        assert.equal(res.headers.get('content-type'), 'audio/mpeg');
        return Buffer.from(await res.arrayBuffer());
      };
      const merged = await fetchMp3(task.metadata.audio);
      const pieces: Buffer[] = [];
      for (const c of contents) pieces.push(await fetchMp3(c.audio));

      // Every file decodes cleanly and is 44.1 kHz stereo 320 kb/s MP3.
      for (const [name, mp3] of [
        ['merged', merged],
        ...pieces.map((p, i) => [`piece ${i}`, p] as const),
      ] as const) {
        assert.equal(await ffmpegErrors(mp3), '', `${name} decodes cleanly`);
        const info = await probeAudio(mp3);
        assert.deepEqual(
          [info.codec, info.sampleRate, info.channels, info.bitRate],
          ['mp3', 44100, 2, 320000],
          name,
        );
      }

      // Durations. Each MP3 file holds its PCM plus encoder delay and frame padding (0 to 52 ms,
      // MAX_PADDING samples), so piece files cannot add up exactly to the merged file: compare both
      // with the exact sample count the service measured (estimatedDuration of a generated task is
      // Σ piece samples + the intervals between pieces, rounded to 1 ms).
      const intervals = contents.slice(0, -1).reduce((s, c) => s + c.interval, 0);
      const exact = task.estimatedDuration;
      const mergedSeconds = (await probeAudio(merged)).durationSeconds;
      const pieceSeconds = await Promise.all(pieces.map(async (p) => (await probeAudio(p)).durationSeconds));
      const pieceSum = pieceSeconds.reduce((a, b) => a + b, 0);
      const pad = MAX_PADDING / RATE;
      const ms = 0.0005; // estimatedDuration's rounding
      assert.ok(
        mergedSeconds >= exact - ms && mergedSeconds <= exact + pad + ms,
        `merged ${mergedSeconds} s vs exact ${exact} s`,
      );
      assert.ok(
        pieceSum + intervals >= exact - ms && pieceSum + intervals <= exact + pieces.length * pad + ms,
        `pieces ${pieceSum} s + intervals ${intervals} s vs exact ${exact} s`,
      );
      // Hence the merged file is the pieces plus the intervals, up to one padding per file.
      assert.ok(Math.abs(mergedSeconds - (pieceSum + intervals)) <= pieces.length * pad + ms);

      // Rate 2.0 is a duration multiplier: the same sentence lasts clearly longer (≥ 1.6×), even when
      // the slower piece's padding is discounted and the faster one's is counted.
      for (const [fast, slow] of [
        [0, 1],
        [2, 3],
      ] as const) {
        const ratio = ((pieceSeconds[slow] ?? 0) - pad) / (pieceSeconds[fast] ?? Infinity);
        assert.ok(ratio >= 1.6, `piece ${slow} (rate 2) / piece ${fast} (rate 1) = ${ratio}`);
      }

      // Pieces in order: each piece's audio is found in the merged audio where the pieces before it
      // and their intervals end. Both files carry the same encoder/decoder delay, so piece i's decoded
      // sample k sits at merged sample start_i + k, start_i = Σ_{j<i} (samples_j + interval_j), and
      // samples_j lies within MAX_PADDING below the piece file's length (searched with one frame of slack).
      const mergedPcm = await decodeToPcm(merged);
      const piecePcm = await Promise.all(pieces.map((p) => decodeToPcm(p)));
      let low = -1152;
      let high = 1152;
      let previous = -1;
      for (const [i, pcm] of piecePcm.entries()) {
        const window = Math.round(0.25 * RATE);
        const from = Math.floor(pcm.length / 2 - window / 2);
        const excerpt = pcm.subarray(from, from + window);
        const best = bestAlignment(mergedPcm, excerpt, from + low, from + high);
        assert.ok(
          best.correlation > 0.9,
          `piece ${i} found in the merged audio (correlation ${best.correlation})`,
        );
        assert.ok(best.at > previous, `piece ${i} comes after piece ${i - 1}`);
        previous = best.at;
        // And it is not the other voice saying the same sentence at that place.
        const other = piecePcm[i ^ 1];
        if (other !== undefined) {
          const otherFrom = Math.floor(other.length / 2 - window / 2);
          const wrong = bestAlignment(
            mergedPcm,
            other.subarray(otherFrom, otherFrom + window),
            from + low,
            from + high,
          );
          assert.ok(
            wrong.correlation < best.correlation - 0.3,
            `piece ${i ^ 1} is not at piece ${i}'s place (${wrong.correlation})`,
          );
        }
        const gap = Math.round((contents[i]?.interval ?? 0) * RATE);
        const length = Math.round((pieceSeconds[i] ?? 0) * RATE);
        low += length - MAX_PADDING + gap;
        high += length + gap;
      }
    },
  );
});

/** The offset in [lo, hi] where `excerpt` best matches `signal`, by normalised cross-correlation. */
function bestAlignment(
  signal: Int16Array,
  excerpt: Int16Array,
  lo: number,
  hi: number,
): { at: number; correlation: number } {
  let energy = 0;
  for (const x of excerpt) energy += x * x;
  let best = { at: -1, correlation: -Infinity };
  for (let at = Math.max(0, lo); at <= hi && at + excerpt.length <= signal.length; at++) {
    let dot = 0;
    let e = 0;
    for (let k = 0; k < excerpt.length; k++) {
      const y = signal[at + k] ?? 0;
      dot += (excerpt[k] ?? 0) * y;
      e += y * y;
    }
    const correlation = energy > 0 && e > 0 ? dot / Math.sqrt(energy * e) : 0;
    if (correlation > best.correlation) best = { at, correlation };
  }
  return best;
}
