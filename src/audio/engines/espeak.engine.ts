/**
 * The embedded engine: espeak-ng (WebAssembly, native/espeak-ng) in a piscina pool of worker
 * threads (SentenceWorkers).
 * Text is split into sentences and a sentence into its clauses, each synthesised as one task; a
 * piece's audio is yielded while the worker speaks it, pieces in order, with the next one already
 * being synthesised.
 */
import type { BatchSynthesisHost } from '../batch-process.js';
import { availableParallelism } from 'node:os';
import type { Piscina } from 'piscina';
import { errors } from '../../errors/app-error.js';
import { siblingModuleUrl } from '../../common/worker-url.js';
import {
  pcmOf,
  checkSpeechRate,
  type EngineAudio,
  type SpeechEngine,
  type SynthesisRequest,
} from './engine.js';
import type { EspeakBinding } from './espeak.provider.js';
import { languageAt } from './language-decision.js';
import type { EspeakCatalogue, SynthesizeTask } from './espeak-protocol.js';
import { createSynthesisPool, piecesIn, SentenceWorkers, type TextPiece } from './sentence-workers.js';
import { clausesOf, splitSentences, type ClausePause } from './sentences.js';

export type { EspeakCatalogue } from './espeak-protocol.js';

/** espeak-ng words per minute at speechRate 1. */
export const ESPEAK_BASE_WPM = 175;
/** espeak-ng's default pitch. */
export const ESPEAK_DEFAULT_PITCH = 50;

/** The espeak engine (sentence and word marks); `close()` stops its worker threads. */
export interface EspeakEngine extends SpeechEngine {
  synthesizeWithMarks(req: SynthesisRequest, signal: AbortSignal): AsyncIterable<EngineAudio>;
  close(): Promise<void>;
}

const WORKER_URL = siblingModuleUrl(import.meta.url, 'espeak.worker');

/**
 * Shortest clause spoken as a piece of its own. espeak-ng speaks a clause alone as it does inside
 * its sentence (it shapes intonation clause by clause), all but the pause after the clause's
 * punctuation, which the thread puts back as silence. So a long sentence costs its thread one
 * clause at a time, and other tasks' pieces (a burst of live tasks' first sentences) go between.
 */
export const ESPEAK_CLAUSE_MIN_CHARS = 20;

/** A piece of text for one task: a sentence, or a clause of one. */
export interface EspeakPiece extends TextPiece {
  /** Where the piece's sentence ends, from the piece's start; absent on a sentence's later clauses. */
  sentenceEnd?: number;
  /** The pause the piece's punctuation makes inside its sentence (a clause but the sentence's last). */
  pauseAfter?: ClausePause;
}

/** The pieces of `text`: its sentences (in `language`'s rules), each cut into its clauses. */
export function espeakPieces(text: string, language?: string): EspeakPiece[] {
  const out: EspeakPiece[] = [];
  for (const sentence of piecesIn(text, splitSentences(text, language))) {
    const clauses = clausesOf(sentence.text, ESPEAK_CLAUSE_MIN_CHARS);
    piecesIn(
      sentence.text,
      clauses.map((c) => c.text),
    ).forEach((part, j) => {
      const pauseAfter = clauses[j]?.pauseAfter;
      out.push({
        text: part.text,
        at: sentence.at + part.at,
        ...(j === 0 && { sentenceEnd: sentence.text.length - part.at }),
        ...(pauseAfter !== undefined && { pauseAfter }),
      });
    });
  }
  return out;
}

let catalogueCache: Promise<EspeakCatalogue> | undefined;

function loadCatalogue(pool?: Piscina): Promise<EspeakCatalogue> {
  catalogueCache ??= (async () => {
    // Without an engine at hand, a one-off single-thread pool answers and is torn down.
    const p = pool ?? createSynthesisPool(WORKER_URL, 1);
    try {
      return (await p.run(null, { name: 'catalogue' })) as EspeakCatalogue;
    } finally {
      if (pool === undefined) await p.destroy();
    }
  })();
  // A failed load must not be cached forever.
  catalogueCache.catch(() => (catalogueCache = undefined));
  return catalogueCache;
}

/** The voices (with their language codes) and variants the embedded espeak-ng supports; cached per process. */
export function listEspeakVoices(): Promise<EspeakCatalogue> {
  return loadCatalogue();
}

/**
 * Checks an espeak binding (used when a voice is created and before synthesis) and returns the
 * espeak voice spec, e.g. 'gmw/en-US+f3'. `voice` must be a voice identifier or a language code of
 * the catalogue (case-insensitive), `variant` a variant name, `pitch` an integer 0–99.
 * Throws VALIDATION_INVALID_VALUE otherwise.
 */
export async function validateEspeakBinding(binding: EspeakBinding): Promise<string> {
  return specFor(binding, await loadCatalogue());
}

function specFor(binding: EspeakBinding, catalogue: EspeakCatalogue): string {
  const voice = resolveVoice(binding.voice, catalogue);
  if (voice === undefined) throw errors.invalidValue(`unknown espeak voice "${binding.voice}"`);
  if (binding.variant !== undefined && !catalogue.variants.includes(binding.variant)) {
    throw errors.invalidValue(`unknown espeak variant "${binding.variant}"`);
  }
  if (
    binding.pitch !== undefined &&
    !(Number.isInteger(binding.pitch) && binding.pitch >= 0 && binding.pitch <= 99)
  ) {
    throw errors.invalidValue('espeak pitch must be an integer from 0 to 99');
  }
  return binding.variant === undefined ? voice : `${voice}+${binding.variant}`;
}

/**
 * The identifier of the voice meant by `wanted`: an identifier, or a language code resolved to the
 * voice that ranks it best. espeak itself accepts only some codes ('en-us' but not 'en-gb' or 'zh').
 */
function resolveVoice(wanted: string, catalogue: EspeakCatalogue): string | undefined {
  const w = wanted.toLowerCase();
  const byId = catalogue.voices.find((v) => v.id.toLowerCase() === w);
  if (byId !== undefined) return byId.id;
  let best: { id: string; priority: number } | undefined;
  for (const v of catalogue.voices) {
    for (const l of v.languages) {
      if (l.code.toLowerCase() === w && (best === undefined || l.priority < best.priority))
        best = { id: v.id, priority: l.priority };
    }
  }
  return best?.id;
}

/**
 * The language an espeak binding speaks by itself: its voice's best-ranked language code (the
 * prior of `auto`). VALIDATION_INVALID_VALUE for a voice the catalogue does not have.
 */
export function espeakVoiceLanguage(binding: EspeakBinding, catalogue: EspeakCatalogue): string {
  const id = resolveVoice(binding.voice, catalogue);
  const voice = catalogue.voices.find((v) => v.id === id);
  if (voice === undefined) throw errors.invalidValue(`unknown espeak voice "${binding.voice}"`);
  // A language code the binding names itself (`en-us`) is what it speaks; else the voice's best.
  const named = voice.languages.find((l) => l.code.toLowerCase() === binding.voice.toLowerCase());
  const best = [...voice.languages].sort((a, b) => a.priority - b.priority)[0];
  return (named ?? best)?.code ?? binding.voice.toLowerCase();
}

/** espeak's language code for each canonical language of the hosted API (src/tasks/requests/generation-params.ts). */
const ESPEAK_LANGUAGE: Readonly<Record<string, string>> = { zh: 'cmn', 'fr-fr': 'fr-fr', 'en-us': 'en-us' };

/** The primary subtag of a language code ('en-us' → 'en'; Mandarin and Chinese are one). */
function primaryLanguage(code: string): string {
  const primary = code.toLowerCase().split(/[-_]/)[0] ?? '';
  return primary === 'cmn' ? 'zh' : primary;
}

/**
 * The binding to speak `language` with: the voice's own when it speaks that language already (an
 * en-gb voice stays en-gb for `en-us`), else the catalogue's best voice for the language with the
 * voice's variant and pitch — the nearest the embedded engine has to "this voice in that language".
 */
export function speakingVoice(
  binding: EspeakBinding,
  language: string | undefined,
  catalogue: EspeakCatalogue,
): EspeakBinding {
  if (language === undefined) return binding;
  const own = resolveVoice(binding.voice, catalogue);
  const ownLanguages = catalogue.voices.find((v) => v.id === own)?.languages ?? [];
  const wanted = primaryLanguage(language);
  if (ownLanguages.some((l) => primaryLanguage(l.code) === wanted)) return binding;
  const target = resolveVoice(ESPEAK_LANGUAGE[language] ?? language, catalogue);
  return target === undefined ? binding : { ...binding, voice: target };
}

/** Creates the espeak engine with `threads` synthesis workers (default min(2, cores)). */
export function createEspeakEngine(
  options: { threads?: number; batchHost?: BatchSynthesisHost } = {},
): EspeakEngine {
  return new PooledEspeakEngine(options.threads ?? Math.min(2, availableParallelism()), options.batchHost);
}

/** The espeak engine over its synthesis threads (see SentenceWorkers: lanes, one-ahead pipelining). */
class PooledEspeakEngine implements EspeakEngine {
  private readonly workers: SentenceWorkers;
  /** The loudness gain runs in the synthesis threads (SentenceWorkers, PieceOutput). */
  readonly appliesGain = true;

  constructor(threads: number, batchHost?: BatchSynthesisHost) {
    this.workers = new SentenceWorkers(WORKER_URL, threads, { id: 'espeak', label: 'espeak-ng' }, batchHost);
  }

  synthesize(req: SynthesisRequest, signal: AbortSignal): AsyncIterable<Int16Array> {
    return pcmOf(this.synthesizeWithMarks(req, signal));
  }

  async *synthesizeWithMarks(req: SynthesisRequest, signal: AbortSignal): AsyncIterable<EngineAudio> {
    if (req.voice.engine !== 'espeak')
      throw new Error(`espeak engine cannot speak a ${req.voice.engine} voice`);
    checkSpeechRate(req.speechRate);
    const binding = req.voice;
    const catalogue = await loadCatalogue(this.workers.pool);
    // The voice of each language the text is in, looked up once per call.
    const specs = new Map<string | undefined, string>();
    const voiceFor = (language: string | undefined): string => {
      let spec = specs.get(language);
      if (spec === undefined) {
        spec = specFor(speakingVoice(binding, language, catalogue), catalogue);
        specs.set(language, spec);
      }
      return spec;
    };
    voiceFor(req.language);
    const base = {
      rate: Math.round(ESPEAK_BASE_WPM / req.speechRate),
      pitch: binding.pitch ?? ESPEAK_DEFAULT_PITCH,
    };
    // One task per clause: espeak's own sentence and word events are the marks. A sentence
    // decided to be in another language is spoken by espeak's voice for that language.
    const pieces = espeakPieces(req.text, req.language ?? req.voice.voice);
    yield* this.workers.speak<SynthesizeTask, EspeakPiece>(
      req,
      pieces,
      (p) => ({
        ...base,
        voice: voiceFor(languageAt(req.languages, p.at, req.language)),
        text: p.text,
        sentenceEnd: p.sentenceEnd,
        ...(p.pauseAfter !== undefined && { pauseAfter: p.pauseAfter }),
      }),
      signal,
    );
  }

  async close(): Promise<void> {
    await this.workers.close();
  }
}
