/**
 * The provider contract: everything the service knows about one kind of speech engine comes from
 * its provider, one file per engine. The registry (engine-registry.ts) builds the voice binding
 * schema, the voice catalogue and the engines from its one list of providers, so the voice domain,
 * the HTTP API, the CLI and the console learn engines from that list only.
 */
import type { z } from 'zod';
import type { EngineTimeouts, MarkKind, SpeechEngine } from './engine.js';
import type { VoiceLanguages } from './language-decision.js';
import type { RemoteEndpoint } from './openai.engine.js';
import type { BatchSynthesisHost } from '../batch-process.js';

/** What every binding has: the provider it belongs to. */
export interface BaseBinding {
  engine: string;
}

/** A setting of a binding beside the voice (e.g. espeak's variant), as the console offers it. */
export interface EngineOption {
  /** The binding field it sets. */
  field: string;
  description: string;
  /** The values it takes, when it is a choice (every one of them is accepted). */
  values?: { id: string; name: string; gender?: Gender }[];
  /** Bounds, when it is a number. */
  min?: number;
  max?: number;
}

export type Gender = 'female' | 'male';

/** An engine as the catalogue lists it: a provider's engine (a remote endpoint is one, by its name). */
export interface EngineInfo {
  /** Unique among engines: the provider's id, or an operator's endpoint name. */
  id: string;
  /** The provider behind it (the `engine` of its bindings). */
  provider: string;
  available: boolean;
  /** Why it cannot be used, when unavailable. */
  reason?: string;
  description: string;
  /** Timing marks its audio carries. */
  marks: readonly MarkKind[];
  /** Voice names beyond the listed ones are accepted (the engine behind decides). */
  openVoices: boolean;
  /** Settings of a binding beside the voice. */
  options: EngineOption[];
  /** The binding fields that select this engine; a binding adds its `voice` and settings. */
  binding: BaseBinding & Record<string, unknown>;
}

/** A voice of an engine, as the catalogue lists it. */
export interface EngineVoice {
  /** The voice's id within its engine (what a binding's `voice` takes). */
  id: string;
  name: string;
  /** EngineInfo.id of its engine. */
  engine: string;
  /** Language tags it speaks, best first. */
  languages: string[];
  gender?: Gender;
  /** The rate the engine makes it at (the pipeline resamples to 44.1 kHz); absent when unknown. */
  sampleRate?: number;
  /** What to expect of it: quality and first-audio latency. */
  quality: string;
  /** The engine binding of a voice created with it. */
  binding: BaseBinding & Record<string, unknown>;
}

/** Operator settings every provider is built with (config.ts). */
export interface ProviderSettings {
  /** Remote OpenAI-compatible endpoints by name. */
  remoteEndpoints: Record<string, RemoteEndpoint>;
  /** Synthesis worker threads of an embedded engine (default min(2, cores)). */
  synthesisThreads?: number;
  /** Where espeak-ng's and Flite's batch pieces are spoken (the batch process); none: in this process. */
  batchHost?: BatchSynthesisHost;
  /** Time limits of each engine call. */
  timeouts: EngineTimeouts;
  /** The neural engine's models and limits (none: no models). */
  neural?: NeuralSettings;
  /** Where voices' reference clips are read from (the blob store); none: no reference voices. */
  referenceClips?: ReferenceClips;
}

/** Reads the reference clips voices were created with (stored by the voice domain, WAV). */
export interface ReferenceClips {
  read(key: string): Promise<Uint8Array>;
}

/** A model that speaks like a reference clip, for a voice created with one. */
export interface ReferenceModel<B extends BaseBinding = BaseBinding> {
  /** The voice's binding, without its clip. */
  binding: B;
  /** The rate the clip is stored at (the model's own). */
  sampleRate: number;
  /** Whether the model reads what is said in the clip (ZipVoice does; Pocket TTS hears the clip alone). */
  transcript: boolean;
}

/** What the neural provider is configured with (config.ts). */
export interface NeuralSettings {
  /** MODELS_DIR: one folder per model. */
  modelsDir: string;
  /** NEURAL_THREADS: onnxruntime threads of each loaded model instance. */
  threads: number;
  /** NEURAL_MODEL_MEMORY_BYTES: bytes of loaded models (estimated from their files), shared by the synthesis threads. */
  memoryBytes: number;
}

/**
 * One provider's engines in a running service. Methods may load what they need (a wasm module, a
 * voice list) on first use; `close()` stops its threads.
 */
export interface ProviderInstance<B extends BaseBinding> {
  /** Its engines with their availability. */
  engines(): Promise<EngineInfo[]>;
  /** Every voice of its available engines. */
  voices(): Promise<EngineVoice[]>;
  /** Resolves when `binding` can be spoken; VALIDATION_INVALID_VALUE naming the field otherwise. */
  validate(binding: B): Promise<void>;
  /** Its binding for a new voice of `language`, or undefined when it has none (or is never a default). */
  defaultBinding(language: string): Promise<B | undefined>;
  /** EngineInfo.id of the engine that speaks `binding`. */
  engineId(binding: B): string;
  /**
   * What `binding`'s engine can speak, for the language decision (language-decision.ts): the
   * voice's own language (the prior of `auto`) and every language of the engine's voices, or
   * `any` when the engine decides itself. May throw like `validate`.
   */
  languages(binding: B): Promise<VoiceLanguages>;
  /** The engine that speaks `binding` (the registry adds the call deadline); may throw like `validate`. */
  engineFor(binding: B): SpeechEngine;
  /**
   * The model a voice created with a reference clip speaks with: `model` when given (400 unless it
   * takes a clip), else the first that does; 400 when there is none. Only providers with such models.
   */
  referenceModel?(model?: string): Promise<ReferenceModel<B>>;
  /** Reads its engines' sources again (model folders), for engines that come and go while it runs. */
  rescan?(): Promise<unknown>;
  close(): Promise<void>;
}

/** An engine kind: its binding schema (discriminated by `engine`) and how to build its instance. */
export interface EngineProvider<S extends z.ZodObject<{ engine: z.ZodLiteral<string> }>> {
  /** The `engine` value of its bindings. */
  readonly id: z.infer<S>['engine'];
  readonly bindingSchema: S;
  /**
   * How its voices are loudness-matched: 'calibrated' — each binding speaks the calibration text
   * once and gets the gain that brings it to the target (loudness-gain.ts); 'as-delivered' — its
   * audio keeps the level it arrives at (an engine whose calls cost its operator money).
   */
  readonly loudness: 'calibrated' | 'as-delivered';
  create(settings: ProviderSettings): ProviderInstance<z.infer<S>>;
}

/** Primary subtag of a language tag, lowercase ('en-US' → 'en'; Mandarin counts as Chinese). */
export function primaryLanguage(tag: string): string {
  const primary = tag.toLowerCase().split(/[-_]/)[0] ?? '';
  return primary === 'cmn' ? 'zh' : primary;
}

/**
 * Whether a voice speaking `code` serves a request for `wanted`: the same tag, or one is the
 * other's broader form ('en' serves 'en-gb', 'en-us' serves 'en'), compared case-insensitively.
 */
export function languageMatches(code: string, wanted: string): boolean {
  const a = code.toLowerCase().replace('_', '-');
  const b = wanted.toLowerCase().replace('_', '-');
  return a === b || a.startsWith(`${b}-`) || b.startsWith(`${a}-`) || primaryLanguage(a) === b;
}
