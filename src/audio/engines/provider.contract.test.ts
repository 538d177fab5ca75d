// The provider contract, run against every engine: the embedded espeak-ng and Flite, the neural engine
// with the tests' own tiny VITS, Kokoro, Kitten and Matcha models (real sherpa-onnx), and the remote
// engine against a local fake OpenAI-compatible server. A new provider adds its case to CASES.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { isAppError } from '../../errors/app-error.js';
import { encodePiece } from '../continuous-encoder.js';
import { createEncoderPool } from '../encoder-pool.js';
import { CANONICAL_RATE } from '../pcm.js';
import { EngineCallError, type EngineAudio, type SynthesisRequest, type TimingMark } from './engine.js';
import { primaryLanguage } from './provider.js';
import {
  createEngineRegistry,
  PROVIDERS,
  voiceBindingSchema,
  type EngineRegistry,
  type EngineRegistryOptions,
  type VoiceBinding,
} from './engine-registry.js';
import { makeTinyVits } from '../../../test/helpers/tiny-vits.js';
import { makeTinyModel, TINY_FAMILIES } from '../../../test/helpers/tiny-models.js';

const TEXT = 'Hello there, my friend. How are you today?';
const WORDS = ['Hello', 'there', 'my', 'friend', 'How', 'are', 'you', 'today'];

/** The fake remote: `stall` sends the headers and one MP3 chunk, then nothing. */
let remoteMode: 'ok' | 'stall' = 'ok';
let mp3 = Buffer.alloc(0);
const server = createServer((req, res: ServerResponse) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'audio/mpeg' });
    const half = Math.floor(mp3.length / 2);
    res.write(mp3.subarray(0, half));
    if (remoteMode === 'ok') setTimeout(() => res.end(mp3.subarray(half)), 20);
  });
});

interface ProviderCase {
  provider: string;
  /** Tells apart cases of one provider (the neural model families). */
  label?: string;
  options: () => Omit<EngineRegistryOptions, 'timeouts'>;
  good: VoiceBinding[];
  bad: unknown[];
  speak: VoiceBinding;
}

const REMOTE: VoiceBinding = { engine: 'remote', endpoint: 'fake', voice: 'alloy' };

/** MODELS_DIR of the neural cases: the tiny VITS model as `tiny` and one of each other family by its name. */
let modelsDir: string | undefined;
function neuralModels(): string {
  if (modelsDir === undefined) {
    modelsDir = mkdtempSync(join(tmpdir(), 'voicegen-models-'));
    makeTinyVits(modelsDir, 'tiny', 2);
    for (const family of TINY_FAMILIES) makeTinyModel(modelsDir, family);
  }
  return modelsDir;
}

const neuralOptions = (): Omit<EngineRegistryOptions, 'timeouts'> => ({
  remoteEndpoints: {},
  synthesisThreads: 1,
  neural: { modelsDir: neuralModels(), threads: 1, memoryBytes: 64 * 1024 ** 2 },
});

/** The contract of a tiny Kokoro, Kitten or Matcha model (speakers tone_0 and tone_1). */
const familyCase = (family: (typeof TINY_FAMILIES)[number]): ProviderCase => ({
  provider: 'neural',
  label: family,
  options: neuralOptions,
  good: [
    { engine: 'neural', model: family, voice: 'tone_0' },
    { engine: 'neural', model: family, voice: 'tone_1' },
  ],
  bad: [
    { engine: 'neural', model: family, voice: 'tone_2' },
    { engine: 'neural', model: family, voice: '0' },
  ],
  speak: { engine: 'neural', model: family, voice: 'tone_1' },
});

const CASES: ProviderCase[] = [
  {
    provider: 'flite',
    options: () => ({ remoteEndpoints: {}, synthesisThreads: 1 }),
    good: [
      { engine: 'flite', voice: 'rms' },
      { engine: 'flite', voice: 'slt' },
      { engine: 'flite', voice: 'kal16' },
    ],
    bad: [
      { engine: 'flite', voice: 'nosuch' },
      // In the build, but it speaks only clock times: not offered.
      { engine: 'flite', voice: 'awb_time' },
      { engine: 'flite', voice: '../slt' },
    ],
    speak: { engine: 'flite', voice: 'slt' },
  },
  {
    provider: 'espeak',
    options: () => ({ remoteEndpoints: {}, synthesisThreads: 1 }),
    good: [
      { engine: 'espeak', voice: 'en-us' },
      { engine: 'espeak', voice: 'gmw/en-US', variant: 'Mr serious', pitch: 30 },
      { engine: 'espeak', voice: 'de', variant: 'klatt4' },
    ],
    bad: [
      { engine: 'espeak', voice: 'klingon' },
      { engine: 'espeak', voice: 'en-us', variant: 'nosuch' },
      { engine: 'espeak', voice: 'en-us+f3' },
    ],
    speak: { engine: 'espeak', voice: 'en-us' },
  },
  {
    provider: 'neural',
    label: 'vits',
    options: neuralOptions,
    good: [
      { engine: 'neural', model: 'tiny', voice: '0' },
      { engine: 'neural', model: 'tiny', voice: '1' },
    ],
    bad: [
      { engine: 'neural', model: 'nosuch', voice: '0' },
      { engine: 'neural', model: 'tiny', voice: '2' },
      { engine: 'neural', model: '../tiny', voice: '0' },
    ],
    speak: { engine: 'neural', model: 'tiny', voice: '1' },
  },
  ...TINY_FAMILIES.map(familyCase),
  {
    provider: 'remote',
    options: () => ({
      remoteEndpoints: {
        fake: {
          baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
          voices: [{ id: 'alloy', name: 'Alloy', languages: ['en'], gender: 'female' }],
        },
      },
    }),
    good: [REMOTE, { ...REMOTE, voice: 'not-listed', model: 'tts-1-hd' }],
    bad: [
      { ...REMOTE, endpoint: 'nowhere' },
      { ...REMOTE, endpoint: 'constructor' },
      { ...REMOTE, voice: '   ' },
    ],
    speak: REMOTE,
  },
];

const isInvalid = (err: unknown): boolean => isAppError(err) && err.code === 'VALIDATION_INVALID_VALUE';

before(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  // The fake's MP3: two seconds of a tone, encoded by our own encoder.
  const tone = new Int16Array(2 * CANONICAL_RATE).map((_, i) =>
    Math.round(8000 * Math.sin((2 * Math.PI * 220 * i) / CANONICAL_RATE)),
  );
  const pool = createEncoderPool({ size: 1 });
  const parts: Uint8Array[] = [];
  for await (const b of encodePiece([tone], pool.open())) parts.push(b);
  mp3 = Buffer.concat(parts);
  await pool.close();
});
after(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (modelsDir !== undefined) rmSync(modelsDir, { recursive: true, force: true });
});

it('every provider has a case in this suite', () => {
  assert.deepEqual(
    PROVIDERS.map((p) => p.id),
    [...new Set(CASES.map((c) => c.provider))],
  );
});

/** Every chunk and mark of one call, with where each chunk starts. */
async function collect(registry: EngineRegistry, req: SynthesisRequest, signal: AbortSignal) {
  const chunks: (EngineAudio & { start: number })[] = [];
  let total = 0;
  const engine = registry.engineFor(req.voice);
  assert.ok(engine.synthesizeWithMarks, 'the engine yields marked audio');
  for await (const chunk of engine.synthesizeWithMarks(req, signal)) {
    chunks.push({ ...chunk, start: total });
    total += chunk.pcm.length;
  }
  return { chunks, total, marks: chunks.flatMap((c) => c.marks) };
}

for (const c of CASES) {
  describe(`provider contract: ${c.provider}${c.label === undefined ? '' : ` (${c.label})`}`, () => {
    let registry: EngineRegistry;
    before(() => {
      registry = createEngineRegistry(c.options());
    });
    after(() => registry.close());

    it('lists its engines and voices in the catalogue shape', async () => {
      const engines = (await registry.engines()).filter((e) => e.provider === c.provider);
      assert.ok(engines.length > 0, 'at least one engine');
      for (const e of engines) {
        assert.equal(e.available, true, e.reason);
        assert.equal(e.binding.engine, c.provider);
        assert.ok(e.description.length > 0);
      }
      const voices = await registry.voices({ engine: c.provider });
      assert.ok(voices.length > 0, 'at least one voice');
      for (const v of voices) {
        assert.ok(v.id.length > 0 && v.name.length > 0 && v.quality.length > 0, JSON.stringify(v));
        assert.ok(engines.some((e) => e.id === v.engine));
        assert.ok(Array.isArray(v.languages));
        assert.ok(v.sampleRate === undefined || Number.isInteger(v.sampleRate));
        assert.ok(v.gender === undefined || v.gender === 'female' || v.gender === 'male');
        // A catalogue voice's binding is one a voice can be created with.
        const binding = voiceBindingSchema.parse(v.binding);
        await registry.validateBinding(binding);
      }
      for (const option of engines.flatMap((e) => e.options)) {
        for (const value of option.values ?? []) {
          // Every listed value of a setting is accepted (every espeak-ng variant).
          const binding = voiceBindingSchema.parse({ ...voices[0]?.binding, [option.field]: value.id });
          await registry.validateBinding(binding);
        }
      }
    });

    it("tells what a binding's engine speaks: its own language among them, or any", async () => {
      const engines = (await registry.engines()).filter((e) => e.provider === c.provider);
      for (const voice of await registry.voices({ engine: c.provider })) {
        const binding = voiceBindingSchema.parse(voice.binding);
        const languages = await registry.languagesFor(binding);
        assert.ok(
          engines.some((e) => e.id === languages.engine),
          JSON.stringify(languages),
        );
        if (languages.speaks === 'any') {
          // Engines that decide themselves are never refused; only remote endpoints do.
          assert.equal(c.provider, 'remote');
          continue;
        }
        const own = languages.own;
        assert.ok(own !== undefined, `${voice.id} has its own language`);
        assert.ok(
          languages.speaks.some((l) => primaryLanguage(l) === primaryLanguage(own)),
          `${voice.id}: ${own} among ${languages.speaks.join(', ')}`,
        );
        for (const l of voice.languages) assert.ok(languages.speaks.includes(l), `${voice.id} speaks ${l}`);
      }
    });

    it('validates bindings: good ones pass, bad ones are VALIDATION_INVALID_VALUE', async () => {
      for (const binding of c.good) {
        await registry.validateBinding(voiceBindingSchema.parse(binding));
      }
      for (const bad of c.bad) {
        const parsed = voiceBindingSchema.safeParse(bad);
        if (parsed.success) await assert.rejects(registry.validateBinding(parsed.data), isInvalid);
      }
    });

    it('yields chunked PCM with the marks it declares, in order, inside their chunks', async () => {
      remoteMode = 'ok';
      const { chunks, total, marks } = await collect(
        registry,
        { text: TEXT, voice: c.speak, speechRate: 1 },
        new AbortController().signal,
      );
      assert.ok(total > CANONICAL_RATE / 2, 'half a second of audio or more');
      assert.ok(chunks.filter((ch) => ch.pcm.length > 0).length > 1, 'more than one chunk');
      const declared = (await registry.engines()).find((e) => e.provider === c.provider)?.marks ?? [];
      for (const chunk of chunks) {
        for (const m of chunk.marks) {
          assert.ok(declared.includes(m.kind), `${m.kind} declared`);
          const last = chunk === chunks.at(-1);
          assert.ok(m.sample >= chunk.start, 'not before its chunk');
          assert.ok(m.sample < chunk.start + chunk.pcm.length || (last && m.sample <= total), 'inside');
          assert.ok(0 <= m.textStart && m.textStart <= m.textEnd && m.textEnd <= TEXT.length);
        }
      }
      assert.deepEqual(
        marks.map((m) => m.sample),
        marks.map((m) => m.sample).sort((a, b) => a - b),
        'in sample order',
      );
      if (declared.includes('sentence')) assertSentences(marks);
      if (declared.includes('word')) {
        const words = marks.filter((m) => m.kind === 'word').map((m) => TEXT.slice(m.textStart, m.textEnd));
        assert.deepEqual(
          words.map((w) => w.replace(/[^A-Za-z]/g, '')),
          WORDS,
        );
      }
    });

    it('makes a pause tag exact silence between the audio of the text around it', async () => {
      remoteMode = 'ok';
      const speak = (text: string) =>
        collect(registry, { text, voice: c.speak, speechRate: 1 }, new AbortController().signal);
      const [first, second] = ['Hello there, my friend.', 'How are you today?'];
      const written = `${first} [pause:1s] ${second}`;
      const a = await speak(first);
      const b = await speak(second);
      const both = await speak(written);
      // The engines repeat themselves to a few samples from call to call.
      assert.ok(Math.abs(both.total - a.total - b.total - CANONICAL_RATE) <= 50, `${both.total} samples`);
      const pcm = new Int16Array(both.total);
      for (const ch of both.chunks) pcm.set(ch.pcm, ch.start);
      const silence = pcm.subarray(a.total + 25, a.total + CANONICAL_RATE - 25);
      assert.ok(
        silence.every((s) => s === 0),
        'digital silence where the tag was',
      );
      const tag = written.indexOf('[pause');
      for (const m of both.marks) {
        assert.ok(m.textEnd <= tag || m.textStart >= tag + '[pause:1s]'.length, 'no mark inside the tag');
        if (m.textStart >= tag) assert.ok(m.sample >= a.total + CANONICAL_RATE - 50, 'after the pause');
      }
    });

    it('stops with the abort reason when aborted mid-stream', async () => {
      remoteMode = 'stall';
      const ac = new AbortController();
      const reason = new Error('stop');
      const engine = registry.engineFor(c.speak);
      await assert.rejects(
        (async () => {
          for await (const _ of engine.synthesizeWithMarks?.(
            { text: `${TEXT} ${TEXT} ${TEXT}`, voice: c.speak, speechRate: 1 },
            ac.signal,
          ) ?? [])
            ac.abort(reason);
        })(),
        (err) => err === reason,
      );
    });

    it('fails with a timeout EngineCallError when the call outlives its deadline', async () => {
      remoteMode = 'stall';
      const limited = createEngineRegistry({
        ...c.options(),
        timeouts: { connectMs: 5_000, firstByteMs: 5_000, callMs: 50 },
      });
      const long = Array.from({ length: 40 }, () => TEXT).join(' ');
      try {
        await assert.rejects(
          collect(limited, { text: long, voice: c.speak, speechRate: 2 }, new AbortController().signal),
          (err) => err instanceof EngineCallError && err.kind === 'timeout',
        );
      } finally {
        await limited.close();
      }
    });
  });
}

/** Two sentences: a sentence mark at sample 0 for the first, one later for the second, on their text. */
function assertSentences(marks: readonly TimingMark[]): void {
  const sentences = marks.filter((m) => m.kind === 'sentence');
  assert.equal(sentences.length, 2);
  assert.equal(sentences[0]?.sample, 0);
  assert.equal(sentences[0]?.textStart, 0);
  assert.equal(sentences[1]?.textStart, TEXT.indexOf('How'));
  assert.ok((sentences[1]?.sample ?? 0) > 0);
}
