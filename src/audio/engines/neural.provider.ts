/**
 * Neural voices in-process through sherpa-onnx: every model folder of MODELS_DIR (neural-models.ts)
 * is an engine named by its folder, its speakers are that engine's voices. Synthesis runs in worker
 * threads (SentenceWorkers: the priority lanes, one-ahead pipelining, abort and deadline) sentence
 * by sentence, long sentences cut at clauses below NEURAL_PIECE_CHARS. A thread loads a model on
 * first use and keeps it for every voice of the folder, within its share of the memory budget.
 *
 * sherpa-onnx ends its process on a model file it cannot read, so before the threads first load a
 * model it is loaded once in a child process (neural-probe.ts); a model that fails there is
 * unavailable with the reason until its files change.
 */
import { availableParallelism } from 'node:os';
import { z } from 'zod';
import { untilAborted } from '../../common/call-deadline.js';
import { forkModule, siblingModuleUrl } from '../../common/worker-url.js';
import { errors } from '../../errors/app-error.js';
import {
  checkSpeechRate,
  EngineCallError,
  pcmOf,
  type EngineAudio,
  type SpeechEngine,
  type SynthesisRequest,
} from './engine.js';
import { MODEL_NAME, scanModels, type NeuralModel, type ScannedModel } from './neural-models.js';
import type { NeuralTask } from './neural-protocol.js';
import type {
  EngineInfo,
  EngineProvider,
  EngineVoice,
  NeuralSettings,
  ProviderInstance,
} from './provider.js';
import { piecesIn, SentenceWorkers, type TextPiece } from './sentence-workers.js';
import { splitClauses, splitSentences } from './sentences.js';

export const neuralBindingSchema = z.object({
  engine: z.literal('neural'),
  /** The model's folder in MODELS_DIR. */
  model: z.string().regex(MODEL_NAME, 'must name a model folder of MODELS_DIR'),
  /** A speaker of the model: its name, or its id when the model names none. */
  voice: z.string().min(1).max(200),
});

export type NeuralBinding = z.infer<typeof neuralBindingSchema>;

/** Longest piece a model is given: VITS and Kokoro degrade (Kokoro truncates) on long inputs. */
export const NEURAL_PIECE_CHARS = 200;

/** Default of NEURAL_MODEL_MEMORY_BYTES. */
export const DEFAULT_NEURAL_MEMORY_BYTES = 1024 ** 3;

/** How long a model's probe may take (loading a large model on a busy machine included). */
const PROBE_TIMEOUT_MS = 120_000;

const WORKER_URL = siblingModuleUrl(import.meta.url, 'neural.worker');
const PROBE_URL = siblingModuleUrl(import.meta.url, 'neural-probe');

const FAMILY_NAMES = { vits: 'VITS/Piper', kokoro: 'Kokoro', kitten: 'Kitten', matcha: 'Matcha' } as const;

/** The pieces of `text`: its sentences, each cut at clause boundaries to NEURAL_PIECE_CHARS. */
export function neuralPieces(text: string, language?: string): (TextPiece & { sentenceEnd?: number })[] {
  const out: (TextPiece & { sentenceEnd?: number })[] = [];
  for (const sentence of piecesIn(text, splitSentences(text, language, Infinity))) {
    piecesIn(sentence.text, splitClauses(sentence.text, NEURAL_PIECE_CHARS)).forEach((part, j) =>
      out.push({
        text: part.text,
        at: sentence.at + part.at,
        ...(j === 0 && { sentenceEnd: sentence.text.length - part.at }),
      }),
    );
  }
  return out;
}

/** Runs the probe of `model`: resolves when a separate process loaded and ran it, else rejects with why. */
function probe(model: NeuralModel): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = forkModule(PROBE_URL, [JSON.stringify(model.config)], PROBE_TIMEOUT_MS);
    let stderr = '';
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (d: string) => (stderr = (stderr + d).slice(-4096)));
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (code === 0) return resolve();
      const lines = stderr
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l.length > 0 && !l.startsWith('at '));
      const said = lines.filter((l) => !/^(terminate called|Aborted)/.test(l)).at(-1) ?? '';
      const how = signal === null ? `exit code ${String(code)}` : signal;
      reject(new Error(`sherpa-onnx could not load it (${how}${said === '' ? '' : `: ${said}`})`));
    });
  });
}

class NeuralEngine implements SpeechEngine {
  private readonly workers: SentenceWorkers;

  constructor(
    threads: number,
    private readonly settings: NeuralSettings,
    private readonly ready: (model: string) => Promise<NeuralModel>,
  ) {
    this.workers = new SentenceWorkers(WORKER_URL, threads, { id: 'neural', label: 'sherpa-onnx' });
    // Each thread (the interactive lane's too) keeps its own instances: the budget is shared out.
    this.memoryPerThread = Math.floor(settings.memoryBytes / (threads + 1));
  }

  private readonly memoryPerThread: number;

  synthesize(req: SynthesisRequest, signal: AbortSignal): AsyncIterable<Int16Array> {
    return pcmOf(this.synthesizeWithMarks(req, signal));
  }

  async *synthesizeWithMarks(req: SynthesisRequest, signal: AbortSignal): AsyncIterable<EngineAudio> {
    const binding = req.voice;
    if (binding.engine !== 'neural')
      throw new Error(`the neural engine cannot speak a ${binding.engine} voice`);
    checkSpeechRate(req.speechRate);
    const model = await untilAborted(this.ready(binding.model), signal);
    const sid = model.speakers.indexOf(binding.voice);
    if (sid < 0) {
      const reason = `model "${model.name}" has no speaker "${binding.voice}"`;
      throw new EngineCallError('failed', { engine: model.name, reason });
    }
    const ref = {
      key: `${model.dir}|${model.stamp}`,
      config: model.config,
      numThreads: this.settings.threads,
      bytes: model.bytes,
    };
    yield* this.workers.speak<NeuralTask, TextPiece & { sentenceEnd?: number }>(
      req,
      neuralPieces(req.text, req.language ?? model.languages[0]),
      (piece) => ({
        text: piece.text,
        model: ref,
        memoryBytes: this.memoryPerThread,
        sid,
        // speechRate is a duration multiplier, sherpa-onnx's speed its inverse.
        speed: 1 / req.speechRate,
        ...(piece.sentenceEnd !== undefined && { sentenceEnd: piece.sentenceEnd }),
      }),
      signal,
    );
  }

  close(): Promise<void> {
    return this.workers.close();
  }
}

function infoOf(entry: ScannedModel, probeFailure: string | undefined): EngineInfo {
  const base = {
    id: entry.name,
    provider: 'neural',
    marks: ['sentence'] as const,
    openVoices: false,
    binding: { engine: 'neural', model: entry.name },
    options: [],
  };
  if (!entry.available) {
    return {
      ...base,
      available: false,
      reason: entry.reason,
      description: `Neural model folder ${entry.name}`,
    };
  }
  const description = `Neural voices (sherpa-onnx, ${FAMILY_NAMES[entry.family]}, ${entry.sampleRate} Hz): ${entry.name}`;
  return probeFailure === undefined
    ? { ...base, available: true, description }
    : { ...base, available: false, reason: probeFailure, description };
}

function voicesOf(model: NeuralModel): EngineVoice[] {
  const quality = `neural (${FAMILY_NAMES[model.family]} through sherpa-onnx); first audio after its first sentence is synthesised`;
  return model.speakers.map((speaker) => ({
    id: speaker,
    name: model.speakers.length === 1 ? model.name : `${model.name} ${speaker}`,
    engine: model.name,
    languages: model.languages,
    sampleRate: model.sampleRate,
    quality,
    binding: { engine: 'neural', model: model.name, voice: speaker },
  }));
}

/** The provider's instance, with `rescan` for SIGHUP and the admin API. */
export interface NeuralInstance extends ProviderInstance<NeuralBinding> {
  rescan(): Promise<ScannedModel[]>;
}

function createInstance(settings: NeuralSettings, synthesisThreads: number | undefined): NeuralInstance {
  let scanned: Promise<Map<string, ScannedModel>> | undefined;
  /** Probes by model key: a replaced folder (new stamp) is probed again. */
  const probes = new Map<string, Promise<void>>();
  /** Why a probed model failed, by model key. */
  const failures = new Map<string, string>();
  let engine: NeuralEngine | undefined;

  const scan = (): Promise<Map<string, ScannedModel>> => {
    const next = scanModels(settings.modelsDir).then((list) => new Map(list.map((m) => [m.name, m])));
    scanned = next;
    // A failed scan (an unreadable MODELS_DIR) is not cached.
    next.catch(() => {
      if (scanned === next) scanned = undefined;
    });
    return next;
  };
  const models = () => scanned ?? scan();
  const keyOf = (m: NeuralModel) => `${m.dir}|${m.stamp}`;

  /** The model of `name` once it loads in a process of its own; EngineCallError otherwise. */
  const ready = async (name: string): Promise<NeuralModel> => {
    const entry = (await models()).get(name);
    if (entry === undefined || !entry.available) {
      const reason =
        entry === undefined
          ? `model "${name}" is not in MODELS_DIR on this node`
          : `model "${name}" is unavailable: ${entry.reason}`;
      throw new EngineCallError('failed', { engine: name, reason });
    }
    const key = keyOf(entry);
    let probed = probes.get(key);
    if (probed === undefined) {
      probed = probe(entry);
      probes.set(key, probed);
      probed.catch((err: unknown) => failures.set(key, err instanceof Error ? err.message : String(err)));
    }
    try {
      await probed;
    } catch (err) {
      const reason = `model "${name}": ${err instanceof Error ? err.message : String(err)}`;
      throw new EngineCallError('failed', { engine: name, reason }, err);
    }
    return entry;
  };

  const availableModel = async (binding: NeuralBinding): Promise<NeuralModel> => {
    const entry = (await models()).get(binding.model);
    if (entry === undefined) throw errors.invalidValue(`engine.model: no neural model "${binding.model}"`);
    const failure = entry.available ? failures.get(keyOf(entry)) : entry.reason;
    if (!entry.available || failure !== undefined) {
      throw errors.invalidValue(
        `engine.model: neural model "${binding.model}" is unavailable (${failure ?? ''})`,
      );
    }
    return entry;
  };

  return {
    async engines() {
      return [...(await models()).values()].map((m) =>
        infoOf(m, m.available ? failures.get(keyOf(m)) : undefined),
      );
    },
    async voices() {
      return [...(await models()).values()].flatMap((m) =>
        m.available && !failures.has(keyOf(m)) ? voicesOf(m) : [],
      );
    },
    async validate(binding) {
      const model = await availableModel(binding);
      if (!model.speakers.includes(binding.voice)) {
        throw errors.invalidValue(
          `engine.voice: model "${model.name}" has no speaker "${binding.voice}" (speakers: ${model.speakers.slice(0, 20).join(', ')})`,
        );
      }
    },
    // Never a default: a new voice gets a neural model only when it names one.
    defaultBinding: async () => undefined,
    engineId: (binding) => binding.model,
    async languages(binding) {
      const entry = (await models()).get(binding.model);
      // A node without the model cannot tell what it speaks: the generating node's engine error
      // names the missing model, so the request is not refused here.
      const own = entry?.available === true ? entry.languages[0] : undefined;
      if (entry?.available !== true || own === undefined) return { engine: binding.model, speaks: 'any' };
      return { engine: binding.model, own, speaks: entry.languages };
    },
    engineFor() {
      engine ??= new NeuralEngine(synthesisThreads ?? Math.min(2, availableParallelism()), settings, ready);
      return engine;
    },
    async rescan() {
      return [...(await scan()).values()];
    },
    async close() {
      await engine?.close();
      engine = undefined;
    },
  };
}

export const neuralProvider: EngineProvider<typeof neuralBindingSchema> = {
  id: 'neural',
  bindingSchema: neuralBindingSchema,
  // Calibrating means ~30 s of speech before a voice's first piece: seconds of CPU for a real
  // model, paid by the first listener. Its audio keeps the level the model gives it.
  loudness: 'as-delivered',
  create: (settings) =>
    createInstance(
      settings.neural ?? { modelsDir: '', threads: 1, memoryBytes: DEFAULT_NEURAL_MEMORY_BYTES },
      settings.synthesisThreads,
    ),
};
