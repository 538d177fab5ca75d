// Inline markup on the engine path: what each engine is handed (no tags; symbols spelled for the
// built-in engines, kept for remote ones), pauses as exact silence in order, marks on the piece's
// timeline and written text; then the real espeak-ng and Flite through the engine registry.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { CANONICAL_RATE } from '../pcm.js';
import {
  audioWithMarks,
  type EngineAudio,
  type EngineMp3Chunk,
  type SpeechEngine,
  type SynthesisRequest,
} from './engine.js';
import { createEngineRegistry, type VoiceBinding } from './engine-registry.js';
import { withMarkup } from './markup-engine.js';

/** An engine that says each text as 100 samples of 1000 a character, one word mark per call, and records what it was handed. */
function recordingEngine(): SpeechEngine & { heard: SynthesisRequest[] } {
  const heard: SynthesisRequest[] = [];
  const audio = (req: SynthesisRequest): EngineAudio => ({
    pcm: new Int16Array(req.text.length * 100).fill(1000),
    marks: [{ kind: 'word', sample: 0, textStart: 0, textEnd: Math.min(req.text.length, 4) }],
  });
  return {
    heard,
    async *synthesize(req) {
      heard.push(req);
      yield audio(req).pcm;
    },
    async *synthesizeWithMarks(req) {
      heard.push(req);
      yield audio(req);
    },
    async *synthesizeMp3(req): AsyncIterable<EngineMp3Chunk> {
      heard.push(req);
      yield { mp3: new Uint8Array([1, 2, 3]), pcm: audio(req).pcm };
    },
  };
}

const voice: VoiceBinding = { engine: 'espeak', voice: 'en-us' };
const signal = new AbortController().signal;

async function collect(
  audio: AsyncIterable<EngineAudio>,
): Promise<{ pcm: Int16Array; marks: EngineAudio['marks'] }> {
  const chunks: EngineAudio[] = [];
  for await (const c of audio) chunks.push(c);
  const pcm = new Int16Array(chunks.reduce((n, c) => n + c.pcm.length, 0));
  let at = 0;
  for (const c of chunks) {
    pcm.set(c.pcm, at);
    at += c.pcm.length;
  }
  return { pcm, marks: chunks.flatMap((c) => c.marks) };
}

void describe('withMarkup', () => {
  void it('hands a text without markup to the engine unchanged', async () => {
    const engine = recordingEngine();
    const req = { text: 'Plain words.', voice, speechRate: 1 };
    await collect(audioWithMarks(withMarkup(engine, { spellSymbols: true }), req, signal));
    assert.equal(engine.heard.length, 1);
    assert.equal(engine.heard[0], req);
  });

  void it('speaks the text between pauses and makes each pause exact silence, in order', async () => {
    const engine = recordingEngine();
    const text = 'One [pause:1.5s] two <break time="250ms"/> three';
    const { pcm, marks } = await collect(
      audioWithMarks(withMarkup(engine, { spellSymbols: true }), { text, voice, speechRate: 1 }, signal),
    );
    assert.deepEqual(
      engine.heard.map((r) => r.text),
      ['One ', ' two ', ' three'],
    );
    const pause1 = Math.round(1.5 * CANONICAL_RATE);
    const pause2 = Math.round(0.25 * CANONICAL_RATE);
    assert.equal(pcm.length, 400 + pause1 + 500 + pause2 + 600);
    // The silence lies exactly where the tags were.
    assert.ok(pcm.subarray(400, 400 + pause1).every((s) => s === 0));
    assert.ok(pcm.subarray(400 + pause1 + 500, 400 + pause1 + 500 + pause2).every((s) => s === 0));
    assert.ok(pcm.subarray(0, 400).every((s) => s === 1000));
    // Marks on the piece's timeline, pointing into the written text; each part starts a sentence
    // (this engine marks words only), its text without the tags.
    assert.deepEqual(
      marks.map((m) => [m.kind, m.sample, text.slice(m.textStart, m.textEnd)]),
      [
        ['sentence', 0, 'One '],
        ['word', 0, 'One '],
        ['sentence', 400 + pause1, ' two '],
        ['word', 400 + pause1, ' two'],
        ['sentence', 400 + pause1 + 500 + pause2, ' three'],
        ['word', 400 + pause1 + 500 + pause2, ' thr'],
      ],
    );
  });

  void it('places the marks of a call in several chunks at their part’s start, not their chunk’s', async () => {
    // Two chunks of 100 samples a call; the second word's mark counts from the call's start.
    const engine: SpeechEngine = {
      async *synthesize() {
        yield new Int16Array(200).fill(1000);
      },
      async *synthesizeWithMarks(req) {
        yield {
          pcm: new Int16Array(100).fill(1000),
          marks: [{ kind: 'word', sample: 0, textStart: 0, textEnd: 1 }],
        };
        yield {
          pcm: new Int16Array(100).fill(1000),
          marks: [{ kind: 'word', sample: 150, textStart: 2, textEnd: req.text.length }],
        };
      },
    };
    const text = 'a bc [pause:1s] d ef';
    const { marks } = await collect(
      audioWithMarks(withMarkup(engine, { spellSymbols: false }), { text, voice, speechRate: 1 }, signal),
    );
    const second = 200 + CANONICAL_RATE;
    assert.deepEqual(
      marks.filter((m) => m.kind === 'word').map((m) => m.sample),
      [0, 150, second, second + 150],
    );
  });

  void it('spells symbols for built-in engines and keeps them for remote ones, tags left out', async () => {
    const text = 'Is 5 < 6 > 2? [pause:1s] I <3 you & him.';
    const built = recordingEngine();
    await collect(
      audioWithMarks(withMarkup(built, { spellSymbols: true }), { text, voice, speechRate: 1 }, signal),
    );
    assert.deepEqual(
      built.heard.map((r) => r.text.replace(/\s+/g, ' ').trim()),
      ['Is 5 less than 6 greater than 2?', 'I heart you and him.'],
    );
    const remote = recordingEngine();
    await collect(
      audioWithMarks(withMarkup(remote, { spellSymbols: false }), { text, voice, speechRate: 1 }, signal),
    );
    assert.deepEqual(
      remote.heard.map((r) => r.text.trim()),
      ['Is 5 < 6 > 2?', 'I <3 you & him.'],
    );
  });

  void it('gives each part the language runs of its own text, symbols in the language at them', async () => {
    const engine = recordingEngine();
    const text = 'Cats & dogs. Katzen & Hunde. [pause:1s] Mehr & mehr. More & more.';
    const languages = [
      { at: 0, language: 'en' },
      { at: text.indexOf('Katzen'), language: 'de' },
      { at: text.indexOf('More'), language: 'en' },
    ];
    await collect(
      audioWithMarks(
        withMarkup(engine, { spellSymbols: true }),
        { text, voice, speechRate: 1, languages },
        signal,
      ),
    );
    const [one, two] = engine.heard;
    assert.match(one?.text ?? '', /^Cats\s+and\s+dogs\. Katzen\s+und\s+Hunde\. $/);
    assert.match(two?.text ?? '', /^ Mehr\s+und\s+mehr\. More\s+and\s+more\.$/);
    const at = (r: SynthesisRequest | undefined, word: string) => r?.text.indexOf(word);
    assert.deepEqual(one?.languages, [
      { at: 0, language: 'en' },
      { at: at(one, 'Katzen'), language: 'de' },
    ]);
    assert.deepEqual(two?.languages, [
      { at: 0, language: 'de' },
      { at: at(two, 'More'), language: 'en' },
    ]);
  });

  void it('points a spelled symbol’s marks at the symbol', async () => {
    const engine = recordingEngine();
    const text = '& so on';
    const { marks } = await collect(
      audioWithMarks(withMarkup(engine, { spellSymbols: true }), { text, voice, speechRate: 1 }, signal),
    );
    assert.equal(engine.heard[0]?.text, ' and  so on');
    // The word mark covers " and" — all of it the written "&".
    assert.deepEqual(
      marks.filter((m) => m.kind === 'word').map((m) => text.slice(m.textStart, m.textEnd)),
      ['&'],
    );
  });

  void it('gives an engine that forwards its own MP3 the text without tags, in one call', async () => {
    const engine = recordingEngine();
    const forwarded = withMarkup(engine, { spellSymbols: false }).synthesizeMp3;
    assert.ok(forwarded !== undefined);
    for await (const _ of forwarded({ text: 'Hello [pause:2s] there', voice, speechRate: 1 }, signal));
    assert.deepEqual(
      engine.heard.map((r) => r.text),
      ['Hello there'],
    );
  });
});

void describe('markup through the engine registry', () => {
  const registry = createEngineRegistry({ remoteEndpoints: {}, synthesisThreads: 1 });
  after(() => registry.close());
  const seconds = async (binding: VoiceBinding, text: string) => {
    const { pcm, marks } = await collect(
      audioWithMarks(registry.engineFor(binding), { text, voice: binding, speechRate: 1 }, signal),
    );
    return { seconds: pcm.length / CANONICAL_RATE, marks };
  };

  for (const binding of [
    { engine: 'espeak', voice: 'en-us' },
    { engine: 'flite', voice: 'kal16' },
  ] as VoiceBinding[]) {
    void it(`${binding.engine}: a 2 s pause tag lengthens the audio by 2 s`, async () => {
      const plain = await seconds(binding, 'The first part. The second part.');
      const bracket = await seconds(binding, 'The first part. [pause:2s] The second part.');
      const ssml = await seconds(binding, 'The first part. <break time="2s"/> The second part.');
      // Between sentences the engine's own sentence edges are there either way: the tag adds its
      // silence and nothing else.
      assert.ok(
        Math.abs(bracket.seconds - plain.seconds - 2) <= 0.05,
        `${bracket.seconds} vs ${plain.seconds}`,
      );
      assert.ok(Math.abs(ssml.seconds - plain.seconds - 2) <= 0.05, `${ssml.seconds} vs ${plain.seconds}`);
    });

    void it(`${binding.engine}: symbols are spoken, not lost`, async () => {
      const symbols = await seconds(binding, 'Is 5 < 6 > 2? I <3 you & him.');
      const words = await seconds(binding, 'Is 5 less than 6 greater than 2? I heart you and him.');
      assert.ok(symbols.seconds >= words.seconds - 0.1, `${symbols.seconds} vs ${words.seconds}`);
    });
  }

  void it('espeak-ng: word marks name the written symbols', async () => {
    const text = 'Is 5 < 6? I <3 you & him.';
    const { marks } = await seconds({ engine: 'espeak', voice: 'en-us' }, text);
    const words = marks.filter((m) => m.kind === 'word').map((m) => text.slice(m.textStart, m.textEnd));
    for (const symbol of ['<', '<3', '&']) assert.ok(words.includes(symbol), JSON.stringify(words));
  });
});
