/**
 * What the embedded engines share on the main thread: a piscina pool of synthesis threads with an
 * interactive lane beside it, and the speaking of a text piece by piece (a sentence, or a clause
 * of a long one), each piece one task, yielded while its thread speaks it (chunks through a
 * message port), pieces in order, with the next one already being synthesised (one-ahead
 * pipelining). An engine brings its worker module and says what a task carries.
 */
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { untilAborted } from '../../common/call-deadline.js';
import { workerExecArgv } from '../../common/worker-url.js';
import { CANONICAL_RATE, concatPcm } from '../pcm.js';
import { EngineCallError, type EngineAudio, type SynthesisRequest, type TimingMark } from './engine.js';
import { PriorityTaskQueue, withQueueOptions, type SynthesisQueueOptions } from './priority-task-queue.js';
import { concatVoiced } from '../voiced-index.js';
import type { BatchSynthesisHost } from '../batch-process.js';
import {
  SENTENCE_END,
  SENTENCE_STARTED,
  type PieceChain,
  type SentenceChunk,
  type SentenceTask,
} from './sentence-protocol.js';

/** A pool of synthesis threads running `workerUrl`; batch threads lower their priority, the interactive lane's do not. */
export function createSynthesisPool(
  workerUrl: URL,
  threads: number,
  lane: 'batch' | 'interactive' = 'batch',
): Piscina {
  return new Piscina({
    filename: fileURLToPath(workerUrl),
    execArgv: workerExecArgv(workerUrl),
    workerData: { interactive: lane === 'interactive' },
    // Threads start on demand and retire after a quiet minute: an idle service holds none.
    minThreads: 0,
    maxThreads: threads,
    // A one-shot's sentences go before queued sentences of long tasks.
    taskQueue: new PriorityTaskQueue(),
    // A task that could not be placed goes back to its place in the queue, not to its end.
    stricterFIFO: true,
    idleTimeout: 60_000,
    closeTimeout: CLOSE_TIMEOUT_MS,
  });
}

/**
 * How long closing waits for the pieces being spoken. A thread terminated inside a native call
 * (sherpa-onnx's generate) aborts the whole process when the addon then reaches into the dying
 * environment, so closing lets running pieces finish (queued ones are dropped) and only then ends
 * the threads; past this a thread stuck in an engine is ended anyway.
 */
const CLOSE_TIMEOUT_MS = 10_000;

/**
 * Interactive sentences a lane thread takes at once (one running, one next) when the lane is
 * smaller than the batch threads; more go to the batch threads, first in their queue.
 */
const INTERACTIVE_LANE_DEPTH = 2;

/** A piece of the request's text: what one synthesis task speaks. */
export interface TextPiece {
  text: string;
  /** UTF-16 offset of its first character in the request's text. */
  at: number;
}

/** The synthesis threads of one embedded engine, and how it speaks a text with them. */
export class SentenceWorkers {
  readonly pool: Piscina;
  /** Batch (not interactive) pieces given to the batch threads and not yet done: running or queued. */
  private batchInPool = 0;
  /**
   * Threads at normal priority for pieces a client is waiting for (one-shots, short tasks): the
   * batch threads run at niceness 10, where an interactive piece gets a fraction of a busy core
   * (behind a long task's sentence, or behind the event loop creating the tasks of a burst) and
   * its listener's audio comes late. With `laneThreads` as many as the batch threads, every
   * interactive piece runs here. An engine whose instances are heavy (a neural model per thread)
   * keeps one lane thread: its interactive pieces go there while batch work holds the batch
   * threads, and otherwise to the batch threads, first in their queue. Started on first use,
   * retired after an idle minute.
   */
  private readonly interactiveLane: Piscina;
  private inLane = 0;

  /**
   * `engine` names the engine in failures (operators' logs), `label` in their reason. `batchHost`:
   * where batch pieces are spoken instead of this process's batch threads (the batch process);
   * interactive pieces stay here. `laneThreads`: of the interactive lane (see there), by default
   * as many as the batch threads.
   */
  constructor(
    private readonly workerUrl: URL,
    private readonly threads: number,
    private readonly engine: { id: string; label: string },
    private readonly batchHost?: BatchSynthesisHost,
    private readonly laneThreads = threads,
  ) {
    this.pool = createSynthesisPool(workerUrl, threads);
    this.interactiveLane = createSynthesisPool(workerUrl, laneThreads, 'interactive');
  }

  /** Runs one piece: an interactive one on the interactive lane (see there for when), batch work on the batch threads or host. */
  private run(
    task: SentenceTask,
    options: SynthesisQueueOptions,
    ports: readonly MessagePort[] = [],
    listened = false,
  ): Promise<unknown> {
    const interactive = options.interactive === true;
    // With a batch host, batch work nobody listens to is not here: the batch threads are free for
    // interactive pieces and for the batch pieces of live listeners.
    const toLane =
      interactive &&
      (this.laneThreads >= this.threads ||
        (this.batchInPool >= this.threads && this.inLane < INTERACTIVE_LANE_DEPTH * this.laneThreads));
    const toHost = !interactive && !listened && this.batchHost !== undefined;
    const transfer = { transferList: [task.port, ...ports] };
    // Both queues take the piece furthest behind in its task's audio first (PriorityTaskQueue).
    const done = toHost
      ? this.batchHost.run(this.workerUrl, this.threads, task, options, transfer.transferList)
      : (toLane ? this.interactiveLane : this.pool).run(withQueueOptions(task, options), transfer);
    const count = (change: 1 | -1) => {
      if (toLane) this.inLane += change;
      else if (!interactive && !toHost) this.batchInPool += change;
    };
    count(1);
    done.then(
      () => count(-1),
      () => count(-1),
    );
    return done;
  }

  /**
   * Speaks `pieces` of `req.text` in order, each as the task `taskFor` makes of it, yielding each
   * piece's audio as it arrives with its marks on the call's timeline.
   */
  async *speak<T extends SentenceTask, P extends TextPiece = TextPiece>(
    req: SynthesisRequest,
    pieces: readonly P[],
    taskFor: (piece: P, index: number) => Omit<T, 'port'>,
    signal: AbortSignal,
  ): AsyncIterable<EngineAudio> {
    /**
     * The queue rank of a piece: where it starts in the task's audio — the seconds synthesised
     * so far plus an estimate of the pieces submitted before it (about 14 characters a second).
     * A piece is queued while the one before is still being spoken, so its rank is estimated;
     * once the one before has ended, its real end replaces the estimate (the queue reads ranks
     * when it picks): "Story number 30." and "Story number 37." estimate alike, but the first is
     * shorter spoken, and its listener needs the next piece sooner. An interactive piece's rank is
     * when it is due: when its task's audio began being made plus where it starts, so that the
     * lane serves the listener that will run dry first, whenever its task began; batch work is
     * ranked within its owner's turn by where it starts alone.
     */
    const due = req.interactive === true ? (req.since ?? performance.now() / 1000 - (req.startsAt ?? 0)) : 0;
    let produced = 0;
    let submittedAhead = 0;
    const estimate = (text: string) => (text.length / 14) * req.speechRate;
    /** Each piece's queue options (its rank is updated in place) and where it really starts, once known. */
    const queued: SynthesisQueueOptions[] = [];
    const startsAt: (number | undefined)[] = [req.startsAt ?? 0];
    const ended = (i: number, samples: number) => {
      const at = startsAt[i];
      if (at === undefined) return;
      const end = at + samples / CANONICAL_RATE;
      startsAt[i + 1] = end;
      const next = queued[i + 1];
      if (next !== undefined) next.rank = due + end;
    };
    // With a gain, the call's GainStage runs in the threads, handed from piece to piece: each
    // piece gets the port the previous one hands it over on, and one to hand it on.
    const gainDb = req.gainDb;
    let handOver: MessagePort | undefined;
    const start = (i: number): PieceAudio | undefined => {
      const piece = pieces[i];
      if (piece === undefined) return undefined;
      let chain: PieceChain | undefined;
      const ports: MessagePort[] = [];
      if (gainDb !== undefined) {
        const from = handOver;
        const channel = i + 1 < pieces.length ? new MessageChannel() : undefined;
        handOver = channel?.port2;
        chain = {
          gainDb,
          textAt: piece.at,
          ...(from !== undefined && { from }),
          ...(channel !== undefined && { to: channel.port1 }),
        };
        if (from !== undefined) ports.push(from);
        if (channel !== undefined) ports.push(channel.port1);
      }
      const at = startsAt[i] ?? (req.startsAt ?? 0) + produced + submittedAhead;
      const rank = due + at;
      const options: SynthesisQueueOptions = {
        interactive: req.interactive === true,
        owner: req.owner,
        rank,
      };
      queued[i] = options;
      // Not aborting a running task on purpose: piscina would kill the thread and its warm instance.
      const audio = new PieceAudio(
        (port) =>
          this.run(
            { ...taskFor(piece, i), port, ...(chain !== undefined && { chain }) },
            options,
            ports,
            // Asked only where it decides something: with a batch host.
            this.batchHost !== undefined && req.listened?.(at) === true,
          ),
        chain !== undefined,
        (samples) => ended(i, samples),
      );
      submittedAhead += estimate(piece.text);
      return audio;
    };

    let current: PieceAudio | undefined;
    let next = start(0);
    /** Samples yielded before the current piece: where its marks' samples count from. */
    let pieceAt = 0;
    try {
      for (let i = 0; next !== undefined; i++) {
        signal.throwIfAborted();
        current = next;
        // A chained piece waits in its thread for the stage of the one before: it is queued only
        // once that one has a thread, so no thread ever waits for a piece still in the queue.
        if (gainDb !== undefined) await untilAborted(current.started, signal);
        next = start(i + 1);
        const pieceStart = pieceAt;
        for (;;) {
          let chunk: SentenceChunk | null;
          try {
            // A stuck worker must not hold the caller past its deadline: stop waiting on abort.
            chunk = await untilAborted(current.next(), signal);
          } catch (err) {
            signal.throwIfAborted();
            const reason = `${this.engine.label} synthesis failed (${err instanceof Error ? err.message : String(err)})`;
            throw new EngineCallError('failed', { engine: this.engine.id, reason }, err);
          }
          signal.throwIfAborted();
          if (chunk === null) break;
          produced += chunk.pcm.length / CANONICAL_RATE;
          pieceAt += chunk.pcm.length;
          // A chained piece's marks are on the call's timeline already.
          const marks =
            gainDb !== undefined ? chunk.marks : shifted(chunk.marks, pieceStart, pieces[i]?.at ?? 0);
          yield { pcm: chunk.pcm, marks, ...(chunk.voiced !== undefined && { voiced: chunk.voiced }) };
        }
        submittedAhead -= estimate(pieces[i]?.text ?? '');
      }
    } finally {
      // Abandoned (abort, error, early return): the ports of the pieces in flight are closed.
      current?.close();
      next?.close();
      handOver?.close();
    }
  }

  async close(): Promise<void> {
    // A close that timed out has destroyed its pool too: nothing is left to wait for.
    const close = (pool: Piscina) => pool.close({ force: true }).catch(() => undefined);
    await Promise.all([close(this.pool), close(this.interactiveLane)]);
  }
}

/**
 * One piece being spoken by a worker: its PCM chunks arrive through a message port while it is
 * synthesised and wait here until read (at most one piece: the engine reads one piece ahead).
 */
class PieceAudio {
  private readonly port: MessagePort;
  private arrived: SentenceChunk[] = [];
  private ended = false;
  private failure: { err: unknown } | undefined;
  private wake: (() => void) | undefined;
  /** Resolves once a thread took the piece (a chained one says so; others count as taken at once), or it failed. */
  readonly started: Promise<void>;
  private markStarted: () => void = () => {};

  /** Samples arrived so far. */
  private samples = 0;

  /**
   * `run` starts the worker's task with the port its chunks go to (transferred to the worker);
   * `chained`: the task says when a thread took it (SENTENCE_STARTED); `onEnd` hears how many
   * samples the piece had once its last chunk has arrived.
   */
  constructor(
    run: (port: MessagePort) => Promise<unknown>,
    chained = false,
    onEnd: (samples: number) => void = () => undefined,
  ) {
    const { port1, port2 } = new MessageChannel();
    this.port = port1;
    this.started = chained ? new Promise((resolve) => (this.markStarted = resolve)) : Promise.resolve();
    port1.on('message', (message: SentenceChunk | typeof SENTENCE_END | typeof SENTENCE_STARTED) => {
      if (message === SENTENCE_STARTED) {
        this.markStarted();
        return;
      }
      if (message === SENTENCE_END) {
        this.ended = true;
        port1.close(); // nothing follows; an open port would keep the process alive
        onEnd(this.samples);
      } else {
        this.arrived.push(message);
        this.samples += message.pcm.length;
      }
      this.notify();
    });
    run(port2).catch((err: unknown) => {
      this.failure = { err };
      port1.close();
      this.markStarted();
      this.notify();
    });
  }

  /**
   * Everything that arrived since the last call, as one chunk (waiting for the next if none did),
   * or null once the piece is complete. Rejects with the worker's error.
   */
  async next(): Promise<SentenceChunk | null> {
    for (;;) {
      if (this.arrived.length > 0) {
        const chunks = this.arrived;
        this.arrived = [];
        return chunks.length === 1 && chunks[0] !== undefined ? chunks[0] : merged(chunks);
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

/** Chunks of a piece that arrived together, as one (their voiced indexes joined). */
function merged(chunks: readonly SentenceChunk[]): SentenceChunk {
  const voiced = concatVoiced(chunks.map((c) => ({ length: c.pcm.length, voiced: c.voiced })));
  return {
    pcm: concatPcm(chunks.map((c) => c.pcm)),
    marks: chunks.flatMap((c) => c.marks),
    ...(voiced !== undefined && { voiced }),
  };
}

/** `parts` of `text` (its trimmed substrings, in order) with where each starts in it. */
export function piecesIn(text: string, parts: readonly string[]): TextPiece[] {
  let from = 0;
  return parts.map((part) => {
    const at = text.indexOf(part, from);
    if (at === -1) return { text: part, at: from };
    from = at + part.length;
    return { text: part, at };
  });
}

/** A piece's marks on the call's timeline: `samples` and `chars` before the piece added. */
function shifted(marks: readonly TimingMark[], samples: number, chars: number): TimingMark[] {
  return marks.map((m) => ({
    ...m,
    sample: m.sample + samples,
    textStart: m.textStart + chars,
    textEnd: m.textEnd + chars,
  }));
}
