/**
 * Maps a voice's binding to the engine that speaks it. The embedded espeak engine (and its worker
 * threads) starts on first use; remote engines exist only for operator-configured endpoint names.
 * Every engine handed out bounds each call by a total deadline (issue 11 finding 4): a call that
 * outlives it is aborted and fails with a tenant-safe EngineCallError('timeout').
 */
import { CallDeadline } from '../../common/call-deadline.js';
import { errors } from '../../errors/app-error.js';
import {
  DEFAULT_ENGINE_TIMEOUTS,
  EngineCallError,
  type EngineTimeouts,
  type SpeechEngine,
  type SynthesisRequest,
  type VoiceBinding,
} from './engine.js';
import { createEspeakEngine, validateEspeakBinding, type EspeakEngine } from './espeak.engine.js';
import { createOpenAiEngine, type RemoteEndpoint } from './openai.engine.js';

/** Operator configuration of the engines. */
export interface EngineRegistryOptions {
  /** Remote OpenAI-compatible endpoints by name. */
  remoteEndpoints: Record<string, RemoteEndpoint>;
  /** espeak worker threads (default min(2, cores)). */
  synthesisThreads?: number;
  /** Time limits of each engine call (default DEFAULT_ENGINE_TIMEOUTS). */
  timeouts?: EngineTimeouts;
}

/** The engines of one service instance; `close()` on shutdown. */
export interface EngineRegistry {
  /** The engine for a binding; VALIDATION_INVALID_VALUE for an unknown remote endpoint name. */
  engineFor(binding: VoiceBinding): SpeechEngine;
  /** Checks a binding when a voice is created or changed; VALIDATION_INVALID_VALUE if it cannot be spoken. */
  validateBinding(binding: VoiceBinding): Promise<void>;
  /** Stops the engines' worker threads. */
  close(): Promise<void>;
}

/** Builds the registry from the operator configuration. */
export function createEngineRegistry(options: EngineRegistryOptions): EngineRegistry {
  const timeouts = options.timeouts ?? DEFAULT_ENGINE_TIMEOUTS;
  let espeak: EspeakEngine | undefined;
  let espeakBounded: SpeechEngine | undefined;
  const remotes = new Map<string, SpeechEngine>();

  const remoteFor = (name: string): SpeechEngine => {
    let engine = remotes.get(name);
    if (engine === undefined) {
      // Own-property lookup only: a name like "constructor" must not reach Object.prototype.
      const endpoint = Object.hasOwn(options.remoteEndpoints, name)
        ? options.remoteEndpoints[name]
        : undefined;
      if (endpoint === undefined) throw errors.invalidValue(`unknown remote TTS endpoint "${name}"`);
      engine = withCallDeadline(createOpenAiEngine(name, endpoint, timeouts), name, timeouts.callMs);
      remotes.set(name, engine);
    }
    return engine;
  };

  return {
    engineFor(binding) {
      switch (binding.engine) {
        case 'espeak':
          espeak ??= createEspeakEngine(
            options.synthesisThreads === undefined ? {} : { threads: options.synthesisThreads },
          );
          espeakBounded ??= withCallDeadline(espeak, 'espeak', timeouts.callMs);
          return espeakBounded;
        case 'remote':
          return remoteFor(binding.endpoint);
      }
    },
    async validateBinding(binding) {
      switch (binding.engine) {
        case 'espeak':
          await validateEspeakBinding(binding);
          return;
        case 'remote':
          remoteFor(binding.endpoint);
          if (binding.voice.trim() === '') throw errors.invalidValue('remote voice name must not be empty');
          return;
      }
    },
    async close() {
      await espeak?.close();
      espeak = undefined;
      espeakBounded = undefined;
    },
  };
}

/**
 * `engine` whose every call is aborted after `callMs` (a stalled body included); the caller's
 * signal still stops it first with its own reason (lease lost, task cancelled). An engine that
 * delivers MP3 keeps that capability, under the same deadline.
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
  return {
    synthesize: (req, signal) => bounded((s) => engine.synthesize(req, s), signal),
    ...(mp3 !== undefined && {
      synthesizeMp3: (req: SynthesisRequest, signal: AbortSignal) => bounded((s) => mp3(req, s), signal),
    }),
  };
}
