import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { concatPcm } from '../pcm.js';
import type { EngineAudio, SynthesisRequest } from './engine.js';
import { flitePieces, fliteProvider } from './flite.provider.js';
import { assertStartedAtNormalPriority, threadNiceness } from '../../../test/helpers/thread-niceness.js';

describe('flitePieces', () => {
  it("cuts the first sentence's first clause apart, keeps later sentences whole", () => {
    const text = 'This is one shot number 5, spoken at once. Then, a second one.';
    assert.deepEqual(flitePieces(text), [
      { text: 'This is one shot number 5,', at: 0, continues: false, sentenceEnd: 42 },
      { text: 'spoken at once.', at: 27, continues: true },
      { text: 'Then, a second one.', at: 43, continues: false, sentenceEnd: 19 },
    ]);
  });

  it('keeps a short first clause with what follows, and cuts a long sentence without commas near 80', () => {
    assert.deepEqual(
      flitePieces('Hi, you.').map((p) => p.text),
      ['Hi, you.'],
    );
    const long =
      'When the committee finally met on Thursday afternoon after weeks of delays and a great many ' +
      'letters it agreed that the old bridge would be repaired.';
    const pieces = flitePieces(long);
    assert.equal(pieces.length, 2);
    assert.ok((pieces[0]?.text.length ?? 0) <= 80 && (pieces[0]?.text.length ?? 0) >= 40);
    assert.equal(pieces[0]?.sentenceEnd, long.length);
    assert.equal(pieces[1]?.continues, true);
    // Every piece is the text at its offset.
    for (const p of pieces) assert.equal(long.slice(p.at, p.at + p.text.length), p.text);
  });

  it('yields nothing for empty text', () => {
    assert.deepEqual(flitePieces('   '), []);
  });
});

/** A Flite provider with one synthesis thread, closed after the suite that makes it. */
function oneThread(): ReturnType<typeof fliteProvider.create> {
  const instance = fliteProvider.create({
    remoteEndpoints: {},
    synthesisThreads: 1,
    timeouts: { connectMs: 5_000, firstByteMs: 5_000, callMs: 60_000 },
  });
  after(() => instance.close());
  return instance;
}

describe('Flite engine threads', () => {
  it('speaks what a client waits for at normal priority, also while no batch work runs', async () => {
    // The batch threads run at niceness 10, where a piece gets a fraction of a core that the
    // event loop keeps busy (a burst of short tasks): interactive pieces never run there.
    const instance = fliteProvider.create({
      remoteEndpoints: {},
      synthesisThreads: 2,
      timeouts: { connectMs: 5_000, firstByteMs: 5_000, callMs: 60_000 },
    });
    try {
      const voice = { engine: 'flite', voice: 'kal16' } as const;
      const engine = instance.engineFor(voice);
      // The build's voice list is read once per process, by a thread of its own: read before.
      await instance.voices();
      const before = threadNiceness();
      await Promise.all(
        ['First one.', 'Second one.', 'Third one, a little longer.'].map(async (text) => {
          const req: SynthesisRequest = { text, voice, speechRate: 1, interactive: true };
          for await (const _ of engine.synthesize(req, new AbortController().signal));
        }),
      );
      assertStartedAtNormalPriority(before);
    } finally {
      await instance.close();
    }
  });
});

describe('Flite engine words', () => {
  const voice = { engine: 'flite', voice: 'kal16' } as const;
  const engine = oneThread().engineFor(voice);
  const text = 'Yesterday Dr. Smith paid $42 for "two" books, then left at 5pm.';
  const req: SynthesisRequest = { text, voice, speechRate: 1 };

  async function marked(): Promise<{ chunks: EngineAudio[]; pcm: Int16Array }> {
    const chunks: EngineAudio[] = [];
    for await (const chunk of engine.synthesizeWithMarks?.(req, new AbortController().signal) ?? [])
      chunks.push(chunk);
    return { chunks, pcm: concatPcm(chunks.map((c) => c.pcm)) };
  }

  it('marks every written word as written, in order, and speaks the same audio without them', async () => {
    const { chunks, pcm } = await marked();
    let start = 0;
    const words: { text: string; sample: number }[] = [];
    for (const chunk of chunks) {
      for (const m of chunk.marks) {
        assert.ok(m.sample >= start && m.sample < start + chunk.pcm.length, 'inside its chunk');
        if (m.kind === 'word') words.push({ text: text.slice(m.textStart, m.textEnd), sample: m.sample });
      }
      start += chunk.pcm.length;
    }
    // The written words, not Flite's readings ("doctor", "forty two dollars", "five p m").
    assert.deepEqual(
      words.map((w) => w.text),
      ['Yesterday', 'Dr', 'Smith', 'paid', '$42', 'for', 'two', 'books', 'then', 'left', 'at', '5pm'],
    );
    for (const [i, w] of words.entries())
      if (i > 0) assert.ok(w.sample > (words[i - 1]?.sample ?? 0), w.text);
    const plain: Int16Array[] = [];
    for await (const p of engine.synthesize(req, new AbortController().signal)) plain.push(p);
    assert.deepEqual(concatPcm(plain), pcm, 'the words cost no change to the audio');
    // Read again (the lone readings now cached): the same marks.
    const again = await marked();
    assert.deepEqual(
      again.chunks.map((c) => c.marks),
      chunks.map((c) => c.marks),
    );
  });
});

describe('Flite instance', () => {
  const voice = { engine: 'flite', voice: 'kal16' } as const;
  const engine = oneThread().engineFor(voice);

  async function speak(text: string): Promise<Int16Array> {
    const out: Int16Array[] = [];
    for await (const p of engine.synthesize({ text, voice, speechRate: 1 }, new AbortController().signal))
      out.push(p);
    return concatPcm(out);
  }

  it("speaks a piece run after run in its thread's one instance as a new instance does", async () => {
    // The thread's first run is on a new instance; every later one on the same instance, its
    // memory put back in between.
    const first = await speak('The keeper climbed the stairs at dusk.');
    for (const text of [
      'Hi.',
      'A considerably longer sentence, with several clauses, so that the heap grows past its start.',
      'Numbers like 1,234,567 and dates like 12/05/2024 take other paths.',
      'Yes!',
    ])
      assert.ok((await speak(text)).length > 0, text);
    for (let i = 0; i < 3; i++)
      assert.deepEqual(await speak('The keeper climbed the stairs at dusk.'), first, `run ${i}`);
  });
});
