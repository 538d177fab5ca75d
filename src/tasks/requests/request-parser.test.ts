import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { AppError } from '../../errors/app-error.js';
import type { SplitterConfig } from '../../splitter/splitter-config.js';
import type { GenerateLimits } from './generate-request.js';
import { inlineRequestParser, type RequestParser } from './request-parser.js';
import { workerPoolRequestParser } from './request-parser.worker-pool.js';

const limits: GenerateLimits = { textLength: 10_000, contents: 200, splitterMarkers: 1000 };
const dialogue: SplitterConfig = {
  '<A>': { voiceId: 'voice-a', speechRate: 1 },
  '<B>': { voiceId: 'voice-b', speechRate: 1.5, interval: 0.2 },
  splitterMarks: ['[]'],
  lookupTable: { slow: { tags: ['slow'], speechRate: 2 } },
  fallbackConfig: { voiceId: 'voice-a', speechRate: 0.5 },
};
const text = 'Once upon a time. <A>Hi there.<B>Hello! [slow] Take it easy.<A> Bye.';
const noSaved = (id: string): Promise<SplitterConfig> =>
  Promise.reject(new Error(`no lookup expected (${id})`));

/** What a parse answered, comparable across threads: the value, or the error's code, status and message. */
async function outcome(run: () => Promise<unknown>): Promise<unknown> {
  try {
    // Seeds drawn for `seed: -1` differ between runs; the requests here draw none.
    return { value: await run() };
  } catch (err) {
    assert.ok(err instanceof AppError, `not an AppError: ${String(err)}`);
    return { code: err.code, status: err.status, message: err.message, headers: err.headers };
  }
}

describe('request parser: on a worker thread as on the calling thread', () => {
  const inline = inlineRequestParser(limits);
  // Every body counts as large: all of these go to the thread.
  const pooled: RequestParser = workerPoolRequestParser(limits, {
    inlineBodyBytes: -1,
    inlineLanguageChars: -1,
  });
  after(() => pooled.close());

  const generateBodies: Record<string, unknown> = {
    contents: { contents: [{ text: 'Hello.', voiceId: 'voice-a', speechRate: 1.2, language: 'en' }] },
    'inline splitter': { text, splitter: dialogue },
    'bad item': { contents: [{ text: 'x', voiceId: 'voice-a', speechRate: 'fast' }] },
    'too many markers': { text: '<A>a'.repeat(1001), splitter: dialogue },
    'invalid config': { text, splitter: { splitterMarks: 'no' } },
    'not an object': [1, 2],
    'mixed shapes': { text, splitter: dialogue, contents: [] },
  };
  for (const [name, body] of Object.entries(generateBodies)) {
    test(`generate, ${name}: the same answer`, async () => {
      assert.deepEqual(
        await outcome(() => pooled.generate(body, noSaved, 1)),
        await outcome(() => inline.generate(body, noSaved, 1)),
      );
    });
  }

  test('preview: the same utterances, and the same error for a text with no utterance', async () => {
    for (const body of [
      { text, splitter: dialogue },
      { text: '<A>', splitter: dialogue },
    ]) {
      assert.deepEqual(
        await outcome(() => pooled.preview(body, noSaved, 1)),
        await outcome(() => inline.preview(body, noSaved, 1)),
      );
    }
  });

  test('a saved splitter is read on the calling thread, once, and its errors are its own', async () => {
    const asked: string[] = [];
    const lookup = async (id: string) => {
      asked.push(id);
      if (id === 'missing') throw new AppError('SPLITTER_NOT_FOUND', `splitter ${id} not found`);
      return dialogue;
    };
    const parsed = await pooled.generate({ text, splitterId: 'saved-1' }, lookup, 1);
    assert.deepEqual(parsed, await inline.generate({ text, splitterId: 'saved-1' }, lookup, 1));
    assert.deepEqual(asked, ['saved-1', 'saved-1']);
    await assert.rejects(pooled.preview({ text, splitterId: 'missing' }, lookup, 1), {
      code: 'SPLITTER_NOT_FOUND',
    });
  });

  test('language decisions: the same decisions and refusals', async () => {
    const english = { engine: 'flite', own: 'en-us', speaks: ['en-us', 'en'] };
    const polyglot = { engine: 'espeak', own: 'en-us', speaks: ['en-us', 'en', 'ar', 'fr-fr', 'fr'] };
    const jobs = {
      voices: [english, polyglot],
      pieces: [
        { text: 'Hello there.', language: 'auto', voice: 0 },
        { text: 'Hello there. مرحبا بكم في بيتنا الجديد.', language: 'auto', voice: 1 },
        { text: 'مرحبا بكم في بيتنا الجديد.', language: 'auto', voice: 0 },
        { text: 'Hello.', language: 'fr', voice: 0 },
        { text: 'Hello.', language: undefined, voice: 1 },
      ],
    };
    const decided = await pooled.languages(jobs);
    assert.deepEqual(decided, await inline.languages(jobs));
    assert.deepEqual(
      decided.map((d) =>
        d.ok ? (d.spoken.language ?? d.spoken.languages?.length ?? null) : d.refusal.field,
      ),
      [null, 2, 'text', 'language', null],
    );
  });
});
