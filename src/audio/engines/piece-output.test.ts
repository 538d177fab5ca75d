// A call's GainStage run piece by piece in the synthesis threads (PieceOutput, the stage handed
// from piece to piece) gives the samples and marks of one stage over the whole call, as the
// main-thread stage did; the voiced index each chunk carries answers the timing collector as a
// scan of its samples would.
import assert from 'node:assert/strict';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { describe, it } from 'node:test';
import { TimingCollector } from '../../tasks/timings/timing-collector.js';
import { GainStage } from '../loudness.js';
import { CANONICAL_RATE } from '../pcm.js';
import { concatVoiced, indexVoiced, isVoiced, markPositions, type VoicedIndex } from '../voiced-index.js';
import {
  audioWithMarks,
  DEFAULT_ENGINE_TIMEOUTS,
  type EngineAudio,
  type SpeechEngine,
  type TimingMark,
} from './engine.js';
import { fliteProvider } from './flite.provider.js';
import { withLoudnessMatching } from './loudness-gain.js';
import { PieceOutput } from './piece-output.js';
import { SENTENCE_END, SENTENCE_STARTED, type PieceChain, type SentenceChunk } from './sentence-protocol.js';

/** Speech-like bursts with pauses, loud enough for the limiter to work (peaks near full scale). */
function bursts(samples: number, seed: number): Int16Array {
  const pcm = new Int16Array(samples);
  for (let i = 0; i < samples; i++) {
    const t = i / CANONICAL_RATE;
    const syllable = Math.floor(t / 0.2 + seed);
    const level = syllable % 4 === 3 ? 0 : 0.4 + 0.6 * Math.abs(Math.sin(syllable * 1.3));
    const s = Math.sin(2 * Math.PI * (140 + 60 * Math.sin(syllable)) * t);
    pcm[i] = Math.round(30_000 * level * s * Math.sin((Math.PI * (t % 0.2)) / 0.2));
  }
  return pcm;
}

/** One piece of a call: its raw chunks with their marks (piece timeline), and where its text starts. */
interface Piece {
  at: number;
  chunks: { pcm: Int16Array; marks: TimingMark[] }[];
}

function pieceOf(at: number, sizes: number[], seed: number): Piece {
  let offset = 0;
  const chunks = sizes.map((size, k) => {
    const marks: TimingMark[] = [];
    if (k === 0) marks.push({ kind: 'sentence', sample: 0, textStart: 0, textEnd: 10 });
    // Words a third and two thirds into the chunk, and one at the very end of the last chunk.
    marks.push({ kind: 'word', sample: offset + Math.floor(size / 3), textStart: 1, textEnd: 3 });
    marks.push({ kind: 'word', sample: offset + Math.floor((2 * size) / 3), textStart: 4, textEnd: 6 });
    if (k === sizes.length - 1) marks.push({ kind: 'word', sample: offset + size, textStart: 7, textEnd: 9 });
    const chunk = { pcm: bursts(size, seed + k), marks };
    offset += size;
    return chunk;
  });
  return { at, chunks };
}

/** Collects what a piece posts on its port until SENTENCE_END. */
function received(port: MessagePort): { chunks: SentenceChunk[]; started: boolean; done: Promise<void> } {
  const out = { chunks: [] as SentenceChunk[], started: false, done: Promise.resolve() };
  out.done = new Promise((resolve) => {
    port.on('message', (m: SentenceChunk | typeof SENTENCE_END | typeof SENTENCE_STARTED) => {
      if (m === SENTENCE_STARTED) out.started = true;
      else if (m === SENTENCE_END) {
        port.close();
        resolve();
      } else out.chunks.push(m);
    });
  });
  return out;
}

/**
 * The pieces through PieceOutputs chained as SentenceWorkers chains them; each piece's chunks are
 * all sent before the one before it ends, so every piece but the first waits for the stage.
 */
async function chained(pieces: Piece[], gainDb: number): Promise<EngineAudio[]> {
  const outputs: PieceOutput[] = [];
  const inbox: ReturnType<typeof received>[] = [];
  let from: MessagePort | undefined;
  for (const [i, piece] of pieces.entries()) {
    const { port1, port2 } = new MessageChannel();
    const channel = i + 1 < pieces.length ? new MessageChannel() : undefined;
    const chain: PieceChain = {
      gainDb,
      textAt: piece.at,
      ...(from !== undefined && { from }),
      ...(channel !== undefined && { to: channel.port1 }),
    };
    from = channel?.port2;
    inbox.push(received(port1));
    outputs.push(new PieceOutput({ text: '', port: port2, chain }));
  }
  for (const [i, piece] of [...pieces.entries()].reverse())
    for (const c of piece.chunks) outputs[i]!.send(c.pcm.slice(), c.marks);
  await Promise.all(outputs.map((o) => o.end()));
  await Promise.all(inbox.map((r) => r.done));
  assert.ok(inbox.every((r) => r.started));
  return inbox.flatMap((r) => r.chunks);
}

/** The same pieces as one engine call through the main-thread stage (SentenceWorkers' marks). */
async function onMainThread(pieces: Piece[], gainDb: number): Promise<EngineAudio[]> {
  const call: EngineAudio[] = [];
  let samples = 0;
  for (const piece of pieces) {
    const start = samples;
    for (const c of piece.chunks) {
      call.push({
        pcm: c.pcm.slice(),
        marks: c.marks.map((m) => ({
          ...m,
          sample: m.sample + start,
          textStart: m.textStart + piece.at,
          textEnd: m.textEnd + piece.at,
        })),
      });
      samples += c.pcm.length;
    }
  }
  const engine: SpeechEngine = {
    async *synthesize() {},
    async *synthesizeWithMarks() {
      yield* call;
    },
  };
  const out: EngineAudio[] = [];
  const request = { text: '', voice: { engine: 'espeak' as const, voice: 'en-us' }, speechRate: 1 };
  const matched = withLoudnessMatching(engine, async () => gainDb);
  for await (const a of audioWithMarks(matched, request, new AbortController().signal)) out.push(a);
  return out;
}

function samplesOf(chunks: readonly EngineAudio[]): Int16Array {
  return Int16Array.from(chunks.flatMap((c) => [...c.pcm]));
}

/** Checks every mark comes with the chunk that holds its sample (the last chunk: any at its end). */
function assertMarksInPlace(chunks: readonly EngineAudio[]): void {
  let at = 0;
  for (const [i, c] of chunks.entries()) {
    for (const m of c.marks) {
      assert.ok(m.sample >= at, 'a mark after its chunk');
      assert.ok(m.sample < at + c.pcm.length || i === chunks.length - 1, 'a mark before its chunk');
    }
    at += c.pcm.length;
  }
}

describe('the loudness gain in the synthesis threads', () => {
  const pieces = [
    pieceOf(0, [4096, 8192, 20_000], 0),
    pieceOf(40, [100], 7), // shorter than the limiter's look-ahead
    pieceOf(52, [30_000], 3),
    pieceOf(90, [5000, 5000], 11),
  ];

  it('a stage taken over from a snapshot goes on exactly as the stage it was taken of', () => {
    const pcm = bursts(50_000, 2);
    const whole = new GainStage(9);
    const expected = [...whole.process(pcm), ...whole.flush()];
    const first = new GainStage(9);
    const head = first.process(pcm.subarray(0, 17_003));
    const second = GainStage.restore(structuredClone(first.snapshot()));
    const tail = [...second.process(pcm.subarray(17_003)), ...second.flush()];
    assert.deepEqual([...head, ...tail], expected);
  });

  for (const gainDb of [12, -3, 0]) {
    it(`gives the samples and marks of one stage over the call (${gainDb} dB)`, async () => {
      const threads = await chained(pieces, gainDb);
      const main = await onMainThread(pieces, gainDb);
      assert.deepEqual(samplesOf(threads), samplesOf(main));
      assert.deepEqual(
        threads.flatMap((c) => c.marks),
        main.flatMap((c) => c.marks),
      );
      assertMarksInPlace(threads);
    });
  }

  it('indexes each chunk so that the timing collector finds what a scan finds', async () => {
    const chunks = await chained(pieces, 12);
    assert.ok(chunks.every((c) => c.voiced !== undefined));
    const timings = (feed: EngineAudio[]) => {
      const collector = new TimingCollector(100);
      return [...feed.flatMap((c) => collector.add(c)), ...collector.finish()];
    };
    const scanned = timings(chunks.map((c) => ({ pcm: c.pcm, marks: c.marks })));
    assert.ok(scanned.length >= 4);
    assert.deepEqual(timings(chunks), scanned);
    // Chunks that arrived together are joined with their indexes (SentenceWorkers).
    const joined: EngineAudio[] = [];
    for (let i = 0; i < chunks.length; i += 3) {
      const group = chunks.slice(i, i + 3);
      const voiced = concatVoiced(group.map((c) => ({ length: c.pcm.length, voiced: c.voiced })));
      joined.push({
        pcm: samplesOf(group),
        marks: group.flatMap((c) => c.marks),
        ...(voiced !== undefined && { voiced }),
      });
    }
    assert.deepEqual(timings(joined), scanned);
  });
});

describe('voiced index', () => {
  /** The answers by scanning: first voiced at or after, last voiced before each position. */
  function scan(pcm: Int16Array, at: Int32Array): { next: number[]; prev: number[] } {
    const next = [...at].map((p) => {
      for (let i = p; i < pcm.length; i++) if (isVoiced(pcm[i]!)) return i;
      return -1;
    });
    const prev = [...at].map((p) => {
      for (let i = p - 1; i >= 0; i--) if (isVoiced(pcm[i]!)) return i;
      return -1;
    });
    return { next, prev };
  }

  function check(pcm: Int16Array, index: VoicedIndex): void {
    assert.equal(index.at[0], 0);
    assert.equal(index.at[index.at.length - 1], pcm.length);
    assert.deepEqual({ next: [...index.next], prev: [...index.prev] }, scan(pcm, index.at));
  }

  it('answers as a scan does, at the marks, for joined chunks and for silence', () => {
    const pcm = bursts(30_000, 5);
    pcm.fill(0, 0, 2000);
    pcm.fill(0, 25_000);
    const marks: TimingMark[] = [500, 2500, 2500, 9000, 1000, 26_000, 40_000].map((sample) => ({
      kind: 'word',
      sample,
      textStart: 0,
      textEnd: 1,
    }));
    check(pcm, indexVoiced(pcm, markPositions(marks, 0, pcm.length)));
    const cuts = [0, 1999, 2000, 2001, 12_345, 25_000, 30_000];
    const parts = cuts.slice(1).map((end, k) => pcm.subarray(cuts[k], end));
    const joined = concatVoiced(
      parts.map((p) => ({ length: p.length, voiced: indexVoiced(p, [Math.floor(p.length / 2)]) })),
    );
    assert.ok(joined !== undefined);
    check(pcm, joined);
    check(new Int16Array(5000), indexVoiced(new Int16Array(5000), [10, 4999]));
    assert.equal(
      concatVoiced([{ length: 3, voiced: indexVoiced(pcm.subarray(0, 3), []) }, { length: 2 }]),
      undefined,
    );
  });
});

describe('the loudness gain in Flite’s synthesis threads', () => {
  it('gives the samples and marks the main-thread stage gives over the same call', async () => {
    const instance = fliteProvider.create({
      remoteEndpoints: {},
      timeouts: DEFAULT_ENGINE_TIMEOUTS,
      synthesisThreads: 2,
    });
    try {
      const binding = { engine: 'flite' as const, voice: 'slt' };
      const raw = instance.engineFor(binding);
      assert.equal(raw.appliesGain, true);
      // The same engine without the claim: its PCM is matched on this thread, as before.
      const plain: SpeechEngine = {
        synthesize: (req, signal) => raw.synthesize(req, signal),
        synthesizeWithMarks: (req, signal) => raw.synthesizeWithMarks!(req, signal),
      };
      const request = {
        text: 'The first sentence is here. A second one, with a clause, follows it. And a third ends the call!',
        voice: binding,
        speechRate: 1,
      };
      const speak = async (engine: SpeechEngine) => {
        const out: EngineAudio[] = [];
        const matched = withLoudnessMatching(engine, async () => 11);
        for await (const a of audioWithMarks(matched, request, new AbortController().signal)) out.push(a);
        return out;
      };
      const threads = await speak(raw);
      const main = await speak(plain);
      assert.ok(samplesOf(main).length > CANONICAL_RATE);
      assert.deepEqual(samplesOf(threads), samplesOf(main));
      assert.deepEqual(
        threads.flatMap((c) => c.marks),
        main.flatMap((c) => c.marks),
      );
      assert.ok(threads.flatMap((c) => c.marks).length >= 3);
      assertMarksInPlace(threads);
    } finally {
      await instance.close();
    }
  });
});
