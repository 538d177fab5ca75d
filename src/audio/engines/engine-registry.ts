/**
 * The engines of the service, built from ONE list of providers (PROVIDERS): the voice binding
 * schema, the voice catalogue, binding validation, default bindings and the engines themselves.
 * Adding an engine is one provider file and one line in that list. Every engine handed out bounds
 * each call by a total deadline: a call that outlives it is aborted and fails with a tenant-safe
 * EngineCallError('timeout').
 */
import type { BatchSynthesisHost } from '../batch-process.js';
import { z } from 'zod';
import { CallDeadline } from '../../common/call-deadline.js';
import { errors } from '../../errors/app-error.js';
import { parseInput } from '../../errors/validation.js';
import {
  DEFAULT_ENGINE_TIMEOUTS,
  EngineCallError,
  type EngineTimeouts,
  type SpeechEngine,
  type SynthesisRequest,
} from './engine.js';
import { espeakProvider } from './espeak.provider.js';
import type { VoiceLanguages } from './language-decision.js';
import { fliteProvider } from './flite.provider.js';
import { neuralProvider } from './neural.provider.js';
import {
  CALIBRATION_TEXT,
  collectPcm,
  GainMeter,
  LoudnessGains,
  withLoudnessMatching,
} from './loudness-gain.js';
import { LOUDNESS_TABLE } from './loudness-table.js';
import { withMarkup } from './markup-engine.js';
import type { RemoteEndpoint } from './openai.engine.js';
import {
  languageMatches,
  type BaseBinding,
  type EngineInfo,
  type EngineVoice,
  type NeuralSettings,
  type ReferenceClips,
  type ReferenceModel,
  type ProviderInstance,
} from './provider.js';
import { remoteProvider } from './remote.provider.js';
import { bindingFromSpec } from './voice-spec.js';

/** Every engine kind the service has; the order is the order of preference for a new voice's default. */
export const PROVIDERS = [fliteProvider, espeakProvider, neuralProvider, remoteProvider] as const;

/** The providers' binding schemas, as the tuple the union needs. */
type SchemasOf<T extends readonly unknown[]> = {
  -readonly [K in keyof T]: T[K] extends { bindingSchema: infer S } ? S : never;
};
type BindingSchemas = SchemasOf<typeof PROVIDERS>;

/** A voice's engine binding: which engine speaks it, with that engine's settings (stored on the voice). */
export const voiceBindingSchema = z.discriminatedUnion(
  'engine',
  PROVIDERS.map((p) => p.bindingSchema) as unknown as BindingSchemas,
);

export type VoiceBinding = z.infer<typeof voiceBindingSchema>;

/** Operator configuration of the engines. */
export interface EngineRegistryOptions {
  /** Remote OpenAI-compatible endpoints by name. */
  remoteEndpoints: Record<string, RemoteEndpoint>;
  /** Synthesis worker threads of the embedded engines (default min(2, cores)). */
  synthesisThreads?: number;
  /** Time limits of each engine call (default DEFAULT_ENGINE_TIMEOUTS). */
  timeouts?: EngineTimeouts;
  /** MODELS_DIR and the neural engine's limits (none: no neural models). */
  neural?: NeuralSettings;
  /** Where voices' reference clips are read from (none: no reference voices). */
  referenceClips?: ReferenceClips;
  /** Where espeak-ng's and Flite's batch pieces (long tasks') are spoken; none: this process's batch threads. */
  batchHost?: BatchSynthesisHost;
}

/** Which catalogue voices to list: of one engine (an engine id or a provider id), speaking a language. */
export interface VoiceFilter {
  engine?: string;
  language?: string;
}

/** The engines of one service instance; `close()` on shutdown. */
export interface EngineRegistry {
  /** The engine for a binding; VALIDATION_INVALID_VALUE for an unknown remote endpoint name. */
  engineFor(binding: VoiceBinding): SpeechEngine;
  /** Checks a binding when a voice is created or imported; VALIDATION_INVALID_VALUE if it cannot be spoken. */
  validateBinding(binding: VoiceBinding): Promise<void>;
  /** What the binding's engine can speak (the language decision's input). */
  languagesFor(binding: VoiceBinding): Promise<VoiceLanguages>;
  /** The binding of a new voice of `language`: the first provider's that has one. */
  defaultBinding(language: string): Promise<VoiceBinding>;
  /** The binding a voice spec (`espeak:en-us+f3`, see voice-spec.ts) stands for; not yet validated. */
  bindingForSpec(spec: string): Promise<VoiceBinding>;
  /** Every engine with its availability. */
  engines(): Promise<EngineInfo[]>;
  /** The voices of the available engines; VALIDATION_INVALID_VALUE for an unknown engine. */
  voices(filter?: VoiceFilter): Promise<EngineVoice[]>;
  /**
   * The model a voice created with a reference clip speaks with: of `engine` when the request names
   * one (a neural binding's `model`), else the first installed; VALIDATION_INVALID_VALUE otherwise.
   */
  referenceModel(engine?: { engine: string; model?: unknown }): Promise<ReferenceModel<VoiceBinding>>;
  /** Reads the engines' sources again (MODELS_DIR's folders); resolves with the engines they give now. */
  rescan(): Promise<EngineInfo[]>;
  /** Stops the engines' worker threads. */
  close(): Promise<void>;
}

/** One provider's instance, typed loosely: the registry hands it only bindings of its own provider. */
type AnyInstance = ProviderInstance<BaseBinding>;

/** Builds the registry from the operator configuration. */
export function createEngineRegistry(options: EngineRegistryOptions): EngineRegistry {
  const timeouts = options.timeouts ?? DEFAULT_ENGINE_TIMEOUTS;
  const settings = {
    ...(options.batchHost !== undefined && { batchHost: options.batchHost }),
    remoteEndpoints: options.remoteEndpoints,
    timeouts,
    ...(options.synthesisThreads !== undefined && { synthesisThreads: options.synthesisThreads }),
    ...(options.neural !== undefined && { neural: options.neural }),
    ...(options.referenceClips !== undefined && { referenceClips: options.referenceClips }),
  };
  const instances = new Map<string, AnyInstance>(
    PROVIDERS.map((p) => [p.id, p.create(settings) as unknown as AnyInstance]),
  );
  const instanceFor = (binding: BaseBinding): AnyInstance => {
    const instance = instances.get(binding.engine);
    if (instance === undefined)
      throw errors.invalidValue(`engine.engine: unknown engine "${binding.engine}"`);
    return instance;
  };
  const calibrated = new Set<string>(PROVIDERS.filter((p) => p.loudness === 'calibrated').map((p) => p.id));
  // The calibration speaks through the provider's own engine (no gain), within the call time
  // limit; its audio is measured in the meter's thread.
  const meter = new GainMeter();
  const gains = new LoudnessGains(
    (binding, signal) =>
      collectPcm(
        instanceFor(binding)
          .engineFor(binding)
          .synthesize({ text: CALIBRATION_TEXT, voice: binding, speechRate: 1 }, signal),
      ),
    timeouts.callMs,
    LOUDNESS_TABLE,
    (pcm) => meter.measure(pcm),
  );
  const bounded = new WeakMap<SpeechEngine, SpeechEngine>();
  const engines = () => catalogueEngines([...instances.values()]);

  return {
    engineFor(binding) {
      const instance = instanceFor(binding);
      const engine = instance.engineFor(binding);
      let wrapped = bounded.get(engine);
      if (wrapped === undefined) {
        // The gain is the voice's (read per call from the request's binding), so one wrapper serves
        // every voice of the engine; its measurement on first use counts against the call's deadline.
        const matched = calibrated.has(binding.engine)
          ? withLoudnessMatching(engine, (b, signal) => gains.gainFor(b, signal))
          : engine;
        // Pause tags and symbols are read above the gain (silence stays exact zeros) and within
        // the call's deadline (a piece cut at its pauses is still one call).
        const marked = withMarkup(matched, { spellSymbols: binding.engine !== remoteProvider.id });
        wrapped = withCallDeadline(marked, instance.engineId(binding), timeouts.callMs);
        bounded.set(engine, wrapped);
      }
      return wrapped;
    },
    validateBinding: (binding) => instanceFor(binding).validate(binding),
    languagesFor: (binding) => instanceFor(binding).languages(binding),
    async defaultBinding(language) {
      for (const instance of instances.values()) {
        const binding = await instance.defaultBinding(language);
        if (binding !== undefined) return binding as VoiceBinding;
      }
      throw errors.invalidValue(`language: no built-in engine has a voice for "${language}"`);
    },
    engines,
    async bindingForSpec(spec) {
      const binding = bindingFromSpec(spec, await engines(), (message) => errors.invalidValue(message));
      return parseInput(voiceBindingSchema, binding, 'VALIDATION_INVALID_VALUE', 'voice');
    },
    async voices(filter = {}) {
      const all = await engines();
      const wanted = filter.engine;
      if (wanted !== undefined && !all.some((e) => e.id === wanted || e.provider === wanted)) {
        throw errors.invalidValue(
          `engine: unknown engine "${wanted}" (known: ${all.map((e) => e.id).join(', ')})`,
        );
      }
      const usable = new Set(all.filter((e) => e.available).map((e) => e.id));
      const lists = await Promise.all(
        [...instances.values()].map((i) => i.voices().catch((): EngineVoice[] => [])),
      );
      const chosen = lists
        .flat()
        .filter((v) => usable.has(v.engine))
        .filter((v) => wanted === undefined || v.engine === wanted || v.binding.engine === wanted);
      return filter.language === undefined ? chosen : speaking(chosen, filter.language);
    },
    async referenceModel(engine) {
      const instance = engine === undefined ? instances.get(neuralProvider.id) : instanceFor(engine);
      if (instance?.referenceModel === undefined) {
        throw errors.invalidValue(
          `engine.engine: "${engine?.engine ?? ''}" takes no reference clip: a voice with a \`prompt\` speaks with a neural model that takes one (ZipVoice)`,
        );
      }
      const model = engine?.model;
      if (model !== undefined && typeof model !== 'string')
        throw errors.invalidValue('engine.model: must name a model folder of MODELS_DIR');
      return (await instance.referenceModel(model)) as ReferenceModel<VoiceBinding>;
    },
    async rescan() {
      const lists = await Promise.all(
        [...instances.values()].map(async (i) => {
          if (i.rescan === undefined) return [];
          await i.rescan();
          return i.engines();
        }),
      );
      return lists.flat();
    },
    async close() {
      await Promise.all([...[...instances.values()].map((i) => i.close()), meter.close()]);
    },
  };
}

/** The voices that speak `language`, those naming it exactly first (en-us: the US voice before English ones). */
function speaking(voices: readonly EngineVoice[], language: string): EngineVoice[] {
  const exact = (v: EngineVoice) => v.languages.some((l) => l.toLowerCase() === language.toLowerCase());
  const matching = voices.filter((v) => v.languages.some((l) => languageMatches(l, language)));
  return [...matching.filter(exact), ...matching.filter((v) => !exact(v))];
}

/**
 * The engines of every provider; an engine whose id another engine listed earlier already has (an
 * endpoint named like a built-in engine) is unavailable, so every id names one engine.
 */
async function catalogueEngines(instances: readonly AnyInstance[]): Promise<EngineInfo[]> {
  const seen = new Set<string>();
  const out: EngineInfo[] = [];
  for (const info of (await Promise.all(instances.map((i) => i.engines()))).flat()) {
    if (seen.has(info.id)) {
      out.push({ ...info, available: false, reason: `the name "${info.id}" is taken by another engine` });
    } else out.push(info);
    seen.add(info.id);
  }
  return out;
}

/**
 * `engine` whose every call is aborted after `callMs` (a stalled body included); the caller's
 * signal still stops it first with its own reason (lease lost, task cancelled). An engine that
 * delivers MP3 or marks keeps that capability, under the same deadline.
 */
export function withCallDeadline(engine: SpeechEngine, name: string, callMs: number): SpeechEngine {
  /** One call of `call` under its own total deadline. */
  async function* bounded<T>(
    call: (signal: AbortSignal) => AsyncIterable<T>,
    signal: AbortSignal,
  ): AsyncIterable<T> {
    const deadline = new CallDeadline(signal, callMs);
    try {
      yield* call(deadline.signal);
    } catch (err) {
      const exceeded = deadline.exceeded;
      if (
        exceeded === undefined ||
        signal.aborted ||
        (err instanceof EngineCallError && err.kind === 'timeout')
      )
        throw err;
      throw new EngineCallError('timeout', { engine: name, reason: exceeded.message }, err);
    } finally {
      deadline.clear();
    }
  }
  const mp3 = engine.synthesizeMp3;
  const marked = engine.synthesizeWithMarks;
  return {
    synthesize: (req, signal) => bounded((s) => engine.synthesize(req, s), signal),
    ...(mp3 !== undefined && {
      synthesizeMp3: (req: SynthesisRequest, signal: AbortSignal) =>
        bounded((s) => mp3.call(engine, req, s), signal),
    }),
    ...(marked !== undefined && {
      synthesizeWithMarks: (req: SynthesisRequest, signal: AbortSignal) =>
        bounded((s) => marked.call(engine, req, s), signal),
    }),
  };
}
