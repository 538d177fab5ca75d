/**
 * The embedded engine: espeak-ng (wasm) in a piscina pool of worker threads. Text is split into
 * sentences, each synthesised as one task; a sentence's audio is yielded while the worker speaks
 * it (chunks through a message port), sentences in order, with the next one already being
 * synthesised (one-ahead pipelining).
 */
import { availableParallelism } from 'node:os';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { errors } from '../../errors/app-error.js';
import { siblingModuleUrl, workerExecArgv } from '../../common/worker-url.js';
import {
  EngineCallError,
  pcmOf,
  SPEECH_RATE_RANGE,
  type EngineAudio,
  type SpeechEngine,
  type SynthesisRequest,
  type TimingMark,
} from './engine.js';
import type { EspeakBinding } from './espeak.provider.js';
import { untilAborted } from '../../common/call-deadline.js';
import {
  SENTENCE_END,
  type EspeakCatalogue,
  type SentenceChunk,
  type SynthesizeTask,
} from './espeak-protocol.js';
import { PriorityTaskQueue, withQueueOptions, type SynthesisQueueOptions } from './priority-task-queue.js';
import { splitSentences } from './sentences.js';
import { CANONICAL_RATE, concatPcm } from '../pcm.js';

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

function createPool(threads: number, lane: 'batch' | 'interactive' = 'batch'): Piscina {
  return new Piscina({
    filename: fileURLToPath(WORKER_URL),
    execArgv: workerExecArgv(WORKER_URL),
    workerData: { interactive: lane === 'interactive' },
    // Threads start on demand and retire after a quiet minute: an idle service holds none.
    minThreads: 0,
    maxThreads: threads,
    // A one-shot's sentences go before queued sentences of long tasks.
    taskQueue: new PriorityTaskQueue(),
    // A task that could not be placed goes back to its place in the queue, not to its end.
    stricterFIFO: true,
    idleTimeout: 60_000,
  });
}

let catalogueCache: Promise<EspeakCatalogue> | undefined;

function loadCatalogue(pool?: Piscina): Promise<EspeakCatalogue> {
  catalogueCache ??= (async () => {
    // Without an engine at hand, a one-off single-thread pool answers and is torn down.
    const p = pool ?? createPool(1);
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

/**
 * Interactive sentences the interactive lane takes at once (one running, one next); more go to the
 * batch threads, first in their queue.
 */
const INTERACTIVE_LANE_DEPTH = 2;

class PooledEspeakEngine implements EspeakEngine {
  private readonly pool: Piscina;
  /** Batch (not interactive) sentences given to the batch threads and not yet done: running or queued. */
  private batchInPool = 0;
  /**
   * One thread at normal priority for sentences a client is waiting for (one-shots, short tasks)
   * while the batch threads are taken by batch work: those run at niceness 10, so under load an
   * interactive sentence waited there for a long task's sentence to end and then got a fraction of
   * a core, and a one-shot's first byte took 3× as long (issue 11 soak). Otherwise interactive
   * sentences go to the batch threads, first in their queue: a burst of one-shots alone gains
   * nothing from a third thread on busy cores (it took the event loop's CPU: bench:first-byte), and
   * the batch threads stay warm. Started on first use, retired after an idle minute.
   */
  private readonly interactiveLane: Piscina;
  private inLane = 0;

  constructor(private readonly threads: number) {
    this.pool = createPool(threads);
    this.interactiveLane = createPool(1, 'interactive');
  }

  /** Runs one sentence: an interactive one on the interactive lane when batch work holds the batch threads. */
  private run(task: SynthesizeTask, options: SynthesisQueueOptions): Promise<unknown> {
    const interactive = options.interactive === true;
    const toLane = interactive && this.batchInPool >= this.threads && this.inLane < INTERACTIVE_LANE_DEPTH;
    const transfer = { transferList: [task.port] };
    const done = toLane
      ? this.interactiveLane.run(task, transfer)
      : this.pool.run(withQueueOptions(task, options), transfer);
    const count = (change: 1 | -1) => {
      if (toLane) this.inLane += change;
      else if (!interactive) this.batchInPool += change;
    };
    count(1);
    done.then(
      () => count(-1),
      () => count(-1),
    );
    return done;
  }

  synthesize(req: SynthesisRequest, signal: AbortSignal): AsyncIterable<Int16Array> {
    return pcmOf(this.synthesizeWithMarks(req, signal));
  }

  async *synthesizeWithMarks(req: SynthesisRequest, signal: AbortSignal): AsyncIterable<EngineAudio> {
    if (req.voice.engine !== 'espeak')
      throw new Error(`espeak engine cannot speak a ${req.voice.engine} voice`);
    if (!(req.speechRate >= SPEECH_RATE_RANGE.min && req.speechRate <= SPEECH_RATE_RANGE.max)) {
      throw errors.invalidValue(
        `speechRate must be between ${SPEECH_RATE_RANGE.min} and ${SPEECH_RATE_RANGE.max}`,
      );
    }
    const catalogue = await loadCatalogue(this.pool);
    const voice = specFor(speakingVoice(req.voice, req.language, catalogue), catalogue);
    const base = {
      voice,
      rate: Math.round(ESPEAK_BASE_WPM / req.speechRate),
      pitch: req.voice.pitch ?? ESPEAK_DEFAULT_PITCH,
    };
    const sentences = splitSentences(req.text, req.language ?? req.voice.voice);
    const textAt = offsetsIn(req.text, sentences);

    /**
     * The queue rank of a sentence: where it starts in the task's audio — the seconds synthesised
     * so far plus an estimate of the sentences submitted before it (about 14 characters a second).
     */
    let produced = 0;
    let submittedAhead = 0;
    const estimate = (text: string) => (text.length / 14) * req.speechRate;
    const start = (i: number): SentenceAudio | undefined => {
      const text = sentences[i];
      if (text === undefined) return undefined;
      // Not aborting a running task on purpose: piscina would kill the thread and its warm instance.
      const sentence = new SentenceAudio((port) =>
        this.run(
          { ...base, text, port },
          {
            interactive: req.interactive === true,
            owner: req.owner,
            rank: (req.startsAt ?? 0) + produced + submittedAhead,
          },
        ),
      );
      submittedAhead += estimate(text);
      return sentence;
    };

    let current: SentenceAudio | undefined;
    let next = start(0);
    /** Samples yielded before the current sentence: where its marks' samples count from. */
    let sentenceAt = 0;
    try {
      for (let i = 0; next !== undefined; i++) {
        signal.throwIfAborted();
        current = next;
        next = start(i + 1);
        const sentenceStart = sentenceAt;
        for (;;) {
          let chunk: SentenceChunk | null;
          try {
            // A stuck worker must not hold the caller past its deadline: stop waiting on abort.
            chunk = await untilAborted(current.next(), signal);
          } catch (err) {
            signal.throwIfAborted();
            throw new EngineCallError('failed', { engine: 'espeak', reason: describe(err) }, err);
          }
          signal.throwIfAborted();
          if (chunk === null) break;
          produced += chunk.pcm.length / CANONICAL_RATE;
          sentenceAt += chunk.pcm.length;
          yield { pcm: chunk.pcm, marks: shifted(chunk.marks, sentenceStart, textAt[i] ?? 0) };
        }
        submittedAhead -= estimate(sentences[i] ?? '');
      }
    } finally {
      // Abandoned (abort, error, early return): the ports of the sentences in flight are closed.
      current?.close();
      next?.close();
    }
  }

  async close(): Promise<void> {
    await Promise.all([this.pool.destroy(), this.interactiveLane.destroy()]);
  }
}

/**
 * One sentence being spoken by a worker: its PCM chunks arrive through a message port while it is
 * synthesised and wait here until read (at most one sentence: the engine reads one sentence ahead).
 */
class SentenceAudio {
  private readonly port: MessagePort;
  private arrived: SentenceChunk[] = [];
  private ended = false;
  private failure: { err: unknown } | undefined;
  private wake: (() => void) | undefined;

  /** `run` starts the worker's task with the port its chunks go to (transferred to the worker). */
  constructor(run: (port: MessagePort) => Promise<unknown>) {
    const { port1, port2 } = new MessageChannel();
    this.port = port1;
    port1.on('message', (message: SentenceChunk | typeof SENTENCE_END) => {
      if (message === SENTENCE_END) {
        this.ended = true;
        port1.close(); // nothing follows; an open port would keep the process alive
      } else this.arrived.push(message);
      this.notify();
    });
    run(port2).catch((err: unknown) => {
      this.failure = { err };
      port1.close();
      this.notify();
    });
  }

  /**
   * Everything that arrived since the last call, as one chunk (waiting for the next if none did),
   * or null once the sentence is complete. Rejects with the worker's error.
   */
  async next(): Promise<SentenceChunk | null> {
    for (;;) {
      if (this.arrived.length > 0) {
        const chunks = this.arrived;
        this.arrived = [];
        return chunks.length === 1 && chunks[0] !== undefined
          ? chunks[0]
          : { pcm: concatPcm(chunks.map((c) => c.pcm)), marks: chunks.flatMap((c) => c.marks) };
      }
      if (this.ended) return null;
      if (this.failure !== undefined) throw this.failure.err;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  /** Stops listening (the worker's later chunks are dropped); idempotent. */
  close(): void {
    this.port.close();
    this.arrived = [];
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}

/** Where each sentence starts in `text` (they are its trimmed substrings, in order). */
function offsetsIn(text: string, sentences: readonly string[]): number[] {
  let from = 0;
  return sentences.map((sentence) => {
    const at = text.indexOf(sentence, from);
    if (at === -1) return from;
    from = at + sentence.length;
    return at;
  });
}

/** A sentence's marks on the call's timeline: `samples` and `chars` before the sentence added. */
function shifted(marks: readonly TimingMark[], samples: number, chars: number): TimingMark[] {
  return marks.map((m) => ({
    ...m,
    sample: m.sample + samples,
    textStart: m.textStart + chars,
    textEnd: m.textEnd + chars,
  }));
}

function describe(err: unknown): string {
  return `espeak-ng synthesis failed (${err instanceof Error ? err.message : String(err)})`;
}
