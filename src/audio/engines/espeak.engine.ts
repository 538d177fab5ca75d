/**
 * The embedded engine: espeak-ng (wasm) in a piscina pool of worker threads (SentenceWorkers).
 * Text is split into sentences, each synthesised as one task; a sentence's audio is yielded while
 * the worker speaks it, sentences in order, with the next one already being synthesised.
 */
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
import { createSynthesisPool, piecesIn, SentenceWorkers } from './sentence-workers.js';
import { splitSentences } from './sentences.js';

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
export function createEspeakEngine(options: { threads?: number } = {}): EspeakEngine {
  return new PooledEspeakEngine(options.threads ?? Math.min(2, availableParallelism()));
}

/** The espeak engine over its synthesis threads (see SentenceWorkers: lanes, one-ahead pipelining). */
class PooledEspeakEngine implements EspeakEngine {
  private readonly workers: SentenceWorkers;
  /** The loudness gain runs in the synthesis threads (SentenceWorkers, PieceOutput). */
  readonly appliesGain = true;

  constructor(threads: number) {
    this.workers = new SentenceWorkers(WORKER_URL, threads, { id: 'espeak', label: 'espeak-ng' });
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
    // One task per sentence: espeak's own sentence and word events are the marks. A sentence
    // decided to be in another language is spoken by espeak's voice for that language.
    const sentences = piecesIn(req.text, splitSentences(req.text, req.language ?? req.voice.voice));
    yield* this.workers.speak<SynthesizeTask>(
      req,
      sentences,
      (s) => ({ ...base, voice: voiceFor(languageAt(req.languages, s.at, req.language)), text: s.text }),
      signal,
    );
  }

  async close(): Promise<void> {
    await this.workers.close();
  }
}
