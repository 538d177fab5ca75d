import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { rmsDbfs } from '../../../test/helpers/audio-check.js';
import { assertStartedAtNormalPriority, threadNiceness } from '../../../test/helpers/thread-niceness.js';
import { isAppError } from '../../errors/app-error.js';
import { concatPcm } from '../pcm.js';
import type { SynthesisRequest } from './engine.js';
import loadEspeak from '@echogarden/espeak-ng-emscripten';
import {
  createEspeakEngine,
  espeakPieces,
  listEspeakVoices,
  speakingVoice,
  validateEspeakBinding,
} from './espeak.engine.js';

const engine = createEspeakEngine({ threads: 2 });
after(() => engine.close());

const PARAGRAPH =
  'Speech synthesis turns written text into sound. This engine speaks one sentence at a time. ' +
  'Each sentence is ready long before the listener needs it. The stream therefore never waits.';
const WORDS = PARAGRAPH.split(/\s+/).length;

async function speak(
  req: Partial<SynthesisRequest> & { text: string },
  signal = new AbortController().signal,
): Promise<Int16Array[]> {
  const chunks: Int16Array[] = [];
  const full: SynthesisRequest = { voice: { engine: 'espeak', voice: 'en-us' }, speechRate: 1, ...req };
  for await (const pcm of engine.synthesize(full, signal)) chunks.push(pcm);
  return chunks;
}

const isInvalid = (err: unknown): boolean => isAppError(err) && err.code === 'VALIDATION_INVALID_VALUE';

describe('espeak engine', () => {
  it('speaks non-silent audio of plausible length', async () => {
    const chunks = await speak({ text: PARAGRAPH });
    const pcm = concatPcm(chunks);
    const seconds = pcm.length / 44100;
    // 175 wpm ≈ 2.9 words/s; allow espeak's pauses and pace a wide margin.
    const nominal = (WORDS / 175) * 60;
    assert.ok(
      seconds > nominal * 0.6 && seconds < nominal * 1.8,
      `${seconds.toFixed(2)} s for ${WORDS} words`,
    );
    assert.ok(rmsDbfs(pcm) > -30, `level ${rmsDbfs(pcm).toFixed(1)} dBFS`);
  });

  it("yields a sentence's audio while the sentence is spoken, not once it is complete", async () => {
    // One sentence (under the 400-character cut) of ~25 s: ≥ 0.1 s of synthesis, while its first
    // ~0.1 s of audio leaves the worker after ~1 ms; later chunks double in size.
    const sentence = 'This one long sentence goes on and on, with a comma here and there, '.repeat(5);
    const chunks = await speak({ text: `${sentence}until it ends.` });
    const total = concatPcm(chunks).length;
    assert.ok(total / 44100 > 15, `${(total / 44100).toFixed(1)} s`);
    assert.ok(chunks.length >= 3, `${chunks.length} chunks`);
    const first = chunks[0]?.length ?? 0;
    assert.ok(first < total / 4, `first chunk ${first} of ${total} samples`);
  });

  it('speaks a long sentence clause by clause, as long as espeak-ng speaks it whole, one sentence mark', async () => {
    const sentence =
      'The lighthouse keeper climbed the stairs at dusk, as every evening for forty years; ' +
      'he trimmed the wick, and watched the first beam sweep the water.';
    assert.deepEqual(
      espeakPieces(sentence, 'en').map((p) => [p.text, p.pauseAfter, p.sentenceEnd]),
      [
        ['The lighthouse keeper climbed the stairs at dusk,', 'comma', sentence.length],
        ['as every evening for forty years;', 'semicolon', undefined],
        ['he trimmed the wick,', 'comma', undefined],
        ['and watched the first beam sweep the water.', undefined, undefined],
      ],
    );
    const m = await loadEspeak();
    const whole = new m.eSpeakNGWorker();
    for (const rate of [1, 0.6]) {
      whole.set_voice('en-us');
      whole.set_rate(Math.round(175 / rate));
      let samples = 0; // 22.05 kHz
      whole.synthesize(sentence, (pcm) => {
        samples += pcm.length;
        return false;
      });
      const req: SynthesisRequest = {
        text: sentence,
        voice: { engine: 'espeak', voice: 'en-us' },
        speechRate: rate,
      };
      const chunks = [];
      for await (const c of engine.synthesizeWithMarks(req, new AbortController().signal)) chunks.push(c);
      const length = chunks.reduce((n, c) => n + c.pcm.length, 0);
      // The clauses' pauses put back: within 15 ms of the whole sentence (442 ms of pauses at 0.6).
      const diffMs = (length / 44100 - samples / 22050) * 1000;
      assert.ok(Math.abs(diffMs) < 15, `rate ${rate}: ${diffMs.toFixed(1)} ms longer than whole`);
      const marks = chunks.flatMap((c) => c.marks);
      const sentences = marks.filter((k) => k.kind === 'sentence');
      assert.deepEqual(
        sentences.map((k) => [k.sample, k.textStart, k.textEnd]),
        [[0, 0, sentence.length]],
      );
      const words = marks.filter((k) => k.kind === 'word');
      assert.deepEqual(
        words.map((w) => sentence.slice(w.textStart, w.textEnd).replace(/[,;.]$/, '')),
        sentence.split(' ').map((w) => w.replace(/[,;.]$/, '')),
      );
    }
  });

  it('speechRate 2 takes about twice as long as 1', async () => {
    const normal = concatPcm(await speak({ text: PARAGRAPH, speechRate: 1 })).length;
    const slow = concatPcm(await speak({ text: PARAGRAPH, speechRate: 2 })).length;
    const fast = concatPcm(await speak({ text: PARAGRAPH, speechRate: 0.5 })).length;
    assert.ok(slow / normal > 1.7 && slow / normal < 2.3, `ratio ${(slow / normal).toFixed(2)}`);
    assert.ok(fast / normal > 0.4 && fast / normal < 0.65, `ratio ${(fast / normal).toFixed(2)}`);
  });

  it('applies variant and pitch (different audio, same text)', async () => {
    const plain = concatPcm(await speak({ text: 'Hello there.' }));
    const f3 = concatPcm(
      await speak({
        text: 'Hello there.',
        voice: { engine: 'espeak', voice: 'en-us', variant: 'f3', pitch: 80 },
      }),
    );
    assert.ok(rmsDbfs(f3) > -35);
    assert.notDeepEqual(f3, plain);
  });

  it("a piece language other than the voice's speaks with the engine voice for it (hosted `language`)", async () => {
    const text = 'こんにちは。今日はいい天気ですね。';
    const length = async (req: Partial<SynthesisRequest>) => concatPcm(await speak({ text, ...req })).length;
    const english = await length({});
    const asJapanese = await length({ language: 'ja' });
    const japaneseVoice = await length({ voice: { engine: 'espeak', voice: 'ja' } });
    // The same speech as the Japanese voice's (espeak is not bit-exact run to run: lengths, ±5 %),
    // not the English voice spelling out characters.
    assert.ok(Math.abs(asJapanese / japaneseVoice - 1) < 0.05, `${asJapanese} vs ${japaneseVoice}`);
    assert.ok(Math.abs(asJapanese / english - 1) > 0.2, `${asJapanese} vs ${english}`);
    // A voice that speaks the language already keeps its own voice (en-gb stays en-gb for en-us);
    // another language takes the catalogue's voice for it with the variant and pitch kept.
    const catalogue = await listEspeakVoices();
    const british = { engine: 'espeak', voice: 'en-gb', variant: 'f3', pitch: 70 } as const;
    assert.deepEqual(speakingVoice(british, 'en-us', catalogue), british);
    assert.deepEqual(speakingVoice(british, undefined, catalogue), british);
    assert.deepEqual(speakingVoice(british, 'zh', catalogue), { ...british, voice: 'sit/cmn' });
    assert.deepEqual(speakingVoice(british, 'yue', catalogue), { ...british, voice: 'sit/yue' });
    assert.deepEqual(speakingVoice(british, 'fr-fr', catalogue), { ...british, voice: 'roa/fr' });
  });

  it('speaks each sentence in the language decided for it (language runs)', async () => {
    const english = 'Welcome home, my friend.';
    const arabic = 'مرحبا بكم في بيتنا الجديد.';
    const text = `${english} ${arabic}`;
    const length = async (req: Partial<SynthesisRequest> & { text: string }) =>
      concatPcm(await speak(req)).length;
    const alone = {
      english: await length({ text: english }),
      arabic: await length({ text: arabic, voice: { engine: 'espeak', voice: 'ar' } }),
      spelled: await length({ text: arabic }),
    };
    const mixed = await length({
      text,
      languages: [
        { at: 0, language: 'en-us' },
        { at: english.length + 1, language: 'ar' },
      ],
    });
    // The Arabic sentence is spoken by espeak-ng's Arabic voice, not spelled out by the English
    // one (lengths ±5 %: espeak is not bit-exact run to run).
    const expected = alone.english + alone.arabic;
    assert.ok(Math.abs(mixed / expected - 1) < 0.05, `${mixed} vs ${expected}`);
    assert.ok(alone.spelled > alone.arabic * 1.5, `${alone.spelled} vs ${alone.arabic}`);
  });

  it('speaks other languages by code, including aliases espeak itself refuses', async () => {
    for (const voice of ['de', 'en-gb', 'zh', 'gmw/en-US']) {
      const pcm = concatPcm(
        await speak({
          text: voice === 'zh' ? '你好，世界。' : 'Eins zwei drei.',
          voice: { engine: 'espeak', voice },
        }),
      );
      assert.ok(rmsDbfs(pcm) > -35, `${voice} audible`);
    }
  });

  it('rejects unknown voices, variants, pitches and rates as VALIDATION_INVALID_VALUE', async () => {
    await assert.rejects(speak({ text: 'x', voice: { engine: 'espeak', voice: 'xx-nowhere' } }), isInvalid);
    await assert.rejects(
      speak({ text: 'x', voice: { engine: 'espeak', voice: 'en-us', variant: 'nosuch' } }),
      isInvalid,
    );
    await assert.rejects(
      speak({ text: 'x', voice: { engine: 'espeak', voice: 'en-us', pitch: 100 } }),
      isInvalid,
    );
    await assert.rejects(speak({ text: 'x', speechRate: 3 }), isInvalid);
    await assert.rejects(validateEspeakBinding({ engine: 'espeak', voice: 'en-us+f3' }), isInvalid);
    assert.equal(
      await validateEspeakBinding({ engine: 'espeak', voice: 'EN-US', variant: 'f3', pitch: 0 }),
      'gmw/en-US+f3',
    );
  });

  it('lists voices and variants', async () => {
    const { voices, variants } = await listEspeakVoices();
    assert.ok(voices.length > 100);
    assert.ok(voices.some((v) => v.languages.some((l) => l.code === 'en-us')));
    assert.ok(['f3', 'm1', 'klatt', 'whisper'].every((v) => variants.includes(v)));
  });

  it('stops when the signal is aborted', async () => {
    const ac = new AbortController();
    const reason = new Error('stop');
    let got = 0;
    await assert.rejects(
      (async () => {
        for await (const _ of engine.synthesize(
          { text: PARAGRAPH, voice: { engine: 'espeak', voice: 'en-us' }, speechRate: 1 },
          ac.signal,
        )) {
          got++;
          ac.abort(reason);
        }
      })(),
      (err) => err === reason,
    );
    assert.equal(got, 1);
    // The engine is still usable afterwards.
    assert.ok(concatPcm(await speak({ text: 'Still here.' })).length > 0);
  });

  it('a sentence a client waits for does not wait for the batch threads', async () => {
    // Threads warm (both batch threads and the interactive lane's), then both batch threads busy
    // with a long sentence each (~0.2-0.5 s, at niceness 10): an interactive sentence sent meanwhile
    // is spoken before either of those sentences ends, instead of waiting for a batch thread.
    await Promise.all([
      speak({ text: 'Warm one.', owner: 'a' }),
      speak({ text: 'Warm two.', owner: 'b' }),
      speak({ text: 'Warm three.', interactive: true }),
    ]);
    // One sentence under the 400-character cut: its synthesis is one task on one thread.
    const long = 'This sentence keeps a synthesis thread busy for a good while, '.repeat(6) + 'the end.';
    const events: string[] = [];
    const wholeSentence = async (owner: string) => {
      const request: SynthesisRequest = {
        voice: { engine: 'espeak', voice: 'en-us' },
        speechRate: 2,
        text: long,
        owner,
      };
      for await (const _ of engine.synthesize(request, new AbortController().signal));
      events.push(`sentence of ${owner}`);
    };
    const batch = [wholeSentence('batch-1'), wholeSentence('batch-2')];
    await new Promise((resolve) => setTimeout(resolve, 30));
    const quick = speak({ text: 'Hello there.', interactive: true }).then(() => events.push('interactive'));
    await Promise.all([...batch, quick]);
    assert.equal(events[0], 'interactive', events.join(', '));
  });

  it('speaks what a client waits for at normal priority, also while no batch work runs', async () => {
    // The batch threads run at niceness 10, where a piece gets a fraction of a core that the
    // event loop keeps busy (a burst of short tasks): interactive pieces never run there.
    const fresh = createEspeakEngine({ threads: 2 });
    try {
      const before = threadNiceness();
      await Promise.all(
        ['First one.', 'Second one.', 'Third one, a little longer.'].map(async (text) => {
          const full: SynthesisRequest = {
            voice: { engine: 'espeak', voice: 'en-us' },
            speechRate: 1,
            text,
            interactive: true,
          };
          for await (const _ of fresh.synthesize(full, new AbortController().signal));
        }),
      );
      assertStartedAtNormalPriority(before);
    } finally {
      await fresh.close();
    }
  });

  /**
   * An engine of one lane thread and `say`, which speaks a text as interactive work and records
   * its label once spoken; `busy` keeps the thread in one long piece (one clause, ~20 s of speech)
   * and calls `meanwhile` at its first chunk, to queue work behind it.
   */
  async function oneLaneThread(fresh: ReturnType<typeof createEspeakEngine>) {
    const spoken: string[] = [];
    const say = async (
      text: string,
      label: string,
      at: Partial<SynthesisRequest> = {},
      onChunk = () => {},
    ) => {
      const full: SynthesisRequest = {
        voice: { engine: 'espeak', voice: 'en-us' },
        speechRate: 1,
        text,
        interactive: true,
        startsAt: 0,
        ...at,
      };
      for await (const _ of fresh.synthesize(full, new AbortController().signal)) onChunk();
      spoken.push(label);
    };
    await say('Warm.', 'warm-up');
    const busy = async (meanwhile: () => Promise<void>[]) => {
      const long = 'This sentence keeps the synthesis thread busy for a good while and '.repeat(5) + 'ends.';
      let queued: Promise<void>[] | undefined;
      await say(long, 'busy', {}, () => {
        queued ??= meanwhile();
      });
      await Promise.all(queued ?? []);
    };
    return { spoken, say, busy };
  }

  it('speaks the interactive piece due first first', async () => {
    // One lane thread, inside a long piece: then a piece due in 2 s (12 s into a task whose audio
    // began 10 s ago), a task's first piece (due now) and a piece due 1 s ago (9 s into that task)
    // queue behind it; they are spoken by when they are due, not by when they came.
    const fresh = createEspeakEngine({ threads: 1 });
    try {
      const { spoken, say, busy } = await oneLaneThread(fresh);
      await busy(() => {
        const tenSecondsAgo = performance.now() / 1000 - 10;
        return [
          say('A piece due later.', 'due later', { startsAt: 12, since: tenSecondsAgo }),
          say('A first piece.', 'first piece'),
          say('A piece already due.', 'overdue', { startsAt: 9, since: tenSecondsAgo }),
        ];
      });
      assert.deepEqual(spoken.slice(1), ['busy', 'overdue', 'first piece', 'due later']);
    } finally {
      await fresh.close();
    }
  });

  it('ranks a queued piece by where the piece before it really ended, once it has', async () => {
    // "Story number 77." and "Story number 10." are estimated alike from their length, but the
    // second is shorter spoken: its listener runs out first, so its next piece goes first.
    const fresh = createEspeakEngine({ threads: 1 });
    try {
      const { spoken, say, busy } = await oneLaneThread(fresh);
      const second = ' The keeper climbed the stairs at dusk as every evening.';
      await busy(() => [
        say(`Story number 77.${second}`, 'seventy-seven'),
        say(`Story number 10.${second}`, 'ten'),
        // A third first piece: the pick after "ten"'s first piece comes after its end was heard.
        say(`Story number 99.${second}`, 'ninety-nine'),
      ]);
      assert.ok(
        spoken.indexOf('ten') < spoken.indexOf('seventy-seven'),
        `finished in order ${spoken.join(', ')}`,
      );
    } finally {
      await fresh.close();
    }
  });

  it('yields nothing for text without sentences', async () => {
    assert.deepEqual(await speak({ text: '  \n ' }), []);
  });
});
