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
import type { NeuralReference, NeuralTask } from './neural-protocol.js';
import { wavToClip, type Clip } from '../reference-clip.js';
import type {
  EngineInfo,
  EngineProvider,
  EngineVoice,
  NeuralSettings,
  ProviderInstance,
  ReferenceClips,
} from './provider.js';
import { piecesIn, SentenceWorkers, type TextPiece } from './sentence-workers.js';
import { splitClauses, splitSentences } from './sentences.js';

/** Where the voice domain keeps a voice's reference clip: `voices/<voice id>/reference-<id>.wav`. */
export const REFERENCE_CLIP_KEY = /^voices\/[0-9a-f-]{36}\/reference-[0-9a-f-]{36}\.wav$/;

/** The `voice` of a voice that speaks like its reference clip (the model has no speakers of its own). */
export const REFERENCE_VOICE = 'reference';

/** Longest transcript of a reference clip (a 30 s clip says a few hundred characters). */
export const MAX_REFERENCE_TEXT = 1000;

export const neuralBindingSchema = z.object({
  engine: z.literal('neural'),
  /** The model's folder in MODELS_DIR. */
  model: z.string().regex(MODEL_NAME, 'must name a model folder of MODELS_DIR'),
  /** A speaker of the model: its name, or its id when the model names none. */
  voice: z.string().min(1).max(200),
  /**
   * The clip a reference-audio model (ZipVoice) speaks like and its transcript. Set by the voice
   * domain from a create request's `prompt` and `promptText`, never from a request's `engine`.
   */
  reference: z
    .object({
      clip: z.string().regex(REFERENCE_CLIP_KEY, 'must be a stored reference clip'),
      // Empty for a model that does not read it (Pocket TTS); voice creation requires it otherwise.
      text: z.string().max(MAX_REFERENCE_TEXT),
    })
    .optional(),
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

const FAMILY_NAMES = {
  vits: 'VITS/Piper',
  kokoro: 'Kokoro',
  kitten: 'Kitten',
  matcha: 'Matcha',
  zipvoice: 'ZipVoice',
  pocket: 'Pocket TTS',
} as const;

/** Decoded reference clips kept by the engine (a voice's clip is read once, not per sentence). */
const CLIP_CACHE_ENTRIES = 16;

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
    const args = [JSON.stringify(model.config), ...(model.reference ? ['reference'] : [])];
    const child = forkModule(PROBE_URL, args, PROBE_TIMEOUT_MS);
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
    private readonly clips: ReferenceClips | undefined,
  ) {
    // One lane thread: each thread holds its own models.
    this.workers = new SentenceWorkers(
      WORKER_URL,
      threads,
      { id: 'neural', label: 'sherpa-onnx' },
      undefined,
      1,
    );
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
    const fail = (reason: string) => new EngineCallError('failed', { engine: model.name, reason });
    let sid = 0;
    let reference: NeuralReference | undefined;
    if (model.reference) {
      if (binding.reference === undefined)
        throw fail(`model "${model.name}" speaks like a reference clip, and this voice has none`);
      const clip = await untilAborted(this.clipOf(binding.reference.clip, model.name), signal);
      reference = { ...clip, text: binding.reference.text };
    } else {
      if (binding.reference !== undefined)
        throw fail(`model "${model.name}" takes no reference clip (${FAMILY_NAMES[model.family]})`);
      sid = model.speakers.indexOf(binding.voice);
      if (sid < 0) throw fail(`model "${model.name}" has no speaker "${binding.voice}"`);
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
        ...(reference !== undefined && { reference }),
        ...(piece.sentenceEnd !== undefined && { sentenceEnd: piece.sentenceEnd }),
      }),
      signal,
    );
  }

  /** Decoded clips by blob key, least recently used first; keys are never reused for other audio. */
  private readonly clipCache = new Map<string, Promise<Clip>>();

  /** The reference clip stored under `key`, decoded (shared by every sentence and call of the voice). */
  private clipOf(key: string, engine: string): Promise<Clip> {
    const cached = this.clipCache.get(key);
    if (cached !== undefined) {
      this.clipCache.delete(key);
      this.clipCache.set(key, cached);
      return cached;
    }
    const clips = this.clips;
    const loading = (async () => {
      if (clips === undefined) throw new Error('this service keeps no reference clips');
      return wavToClip(await clips.read(key));
    })().catch((err: unknown) => {
      this.clipCache.delete(key);
      const why = err instanceof Error ? err.message : String(err);
      throw new EngineCallError('failed', { engine, reason: `the voice's reference clip: ${why}` }, err);
    });
    this.clipCache.set(key, loading);
    for (const old of this.clipCache.keys()) {
      if (this.clipCache.size <= CLIP_CACHE_ENTRIES) break;
      this.clipCache.delete(old);
    }
    return loading;
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
  const description = entry.reference
    ? `Neural voices cloned from a reference clip (sherpa-onnx, ${FAMILY_NAMES[entry.family]}, ${entry.sampleRate} Hz): ${entry.name}; create a voice with a \`prompt\` clip and its \`promptText\``
    : `Neural voices (sherpa-onnx, ${FAMILY_NAMES[entry.family]}, ${entry.sampleRate} Hz): ${entry.name}`;
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

function createInstance(
  settings: NeuralSettings,
  synthesisThreads: number | undefined,
  clips: ReferenceClips | undefined,
): NeuralInstance {
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
      if (model.reference) {
        if (binding.reference === undefined) {
          throw errors.invalidValue(
            `engine.model: neural model "${model.name}" speaks like a reference clip: create the voice with a \`prompt\` clip and its \`promptText\``,
          );
        }
        return;
      }
      if (binding.reference !== undefined) {
        const takers = [...(await models()).values()]
          .filter((m) => m.available && m.reference)
          .map((m) => m.name);
        throw errors.invalidValue(
          `engine.model: neural model "${model.name}" (${FAMILY_NAMES[model.family]}) takes no reference clip; models that do: ${takers.length === 0 ? 'none installed (ZipVoice, Pocket TTS)' : takers.join(', ')}`,
        );
      }
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
    async referenceModel(name) {
      const all = [...(await models()).values()];
      const usable = (m: ScannedModel): m is ScannedModel & NeuralModel =>
        m.available && m.reference && !failures.has(keyOf(m));
      if (name !== undefined) {
        const model = await availableModel({ engine: 'neural', model: name, voice: REFERENCE_VOICE });
        if (!model.reference) {
          throw errors.invalidValue(
            `engine.model: neural model "${name}" (${FAMILY_NAMES[model.family]}) takes no reference clip: a voice with a \`prompt\` needs a model that does (ZipVoice, Pocket TTS)`,
          );
        }
        return {
          binding: { engine: 'neural', model: name, voice: REFERENCE_VOICE },
          sampleRate: model.sampleRate,
          transcript: model.family === 'zipvoice',
        };
      }
      const first = all.find(usable);
      if (first === undefined) {
        throw errors.invalidValue(
          'prompt: no model that speaks like a reference clip is installed (a ZipVoice or Pocket TTS model in MODELS_DIR)',
        );
      }
      return {
        binding: { engine: 'neural', model: first.name, voice: REFERENCE_VOICE },
        sampleRate: first.sampleRate,
        transcript: first.family === 'zipvoice',
      };
    },
    engineFor() {
      engine ??= new NeuralEngine(
        synthesisThreads ?? Math.min(2, availableParallelism()),
        settings,
        ready,
        clips,
      );
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
      settings.referenceClips,
    ),
};
