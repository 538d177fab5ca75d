/**
 * How a synthesis thread posts a piece's canonical PCM to the main thread, whatever the engine:
 * each chunk with its marks and the index of where it is voiced (the timing collector's
 * questions, answered here rather than by scanning on the main thread), and for a call whose
 * loudness gain is applied in the synthesis threads (SentenceTask.chain) through the call's
 * GainStage, taken over from the previous piece's thread and handed on to the next one's. Loaded
 * only by worker modules.
 */
import { receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import { GainStage } from '../loudness.js';
import { indexVoiced, markPositions } from '../voiced-index.js';
import type { TimingMark } from './engine.js';
import {
  SENTENCE_END,
  SENTENCE_STARTED,
  type ChainHandover,
  type PieceChain,
  type SentenceChunk,
  type SentenceTask,
} from './sentence-protocol.js';

/** One piece's output: `send` its chunks in order, then `end`; `close` in a `finally`. */
export class PieceOutput {
  private readonly port: MessagePort;
  private readonly chain: PieceChain | undefined;
  /** Raw samples of the piece sent so far (piece timeline). */
  private sent = 0;
  /** The call's stage, once this piece has it (at once on the first piece). */
  private stage: GainStage | undefined;
  /** Samples of the call before this piece: its marks' samples count from there. */
  private start = 0;
  /** Samples of the call posted so far (the stage holds the rest). */
  private emitted = 0;
  /** Marks (call timeline) of samples the stage still holds. */
  private pending: TimingMark[] = [];
  /** Chunks sent before the stage arrived (piece timeline). */
  private waiting: { pcm: Int16Array; marks: TimingMark[] }[] = [];
  private closed = false;

  constructor(task: SentenceTask) {
    this.port = task.port;
    this.chain = task.chain;
    if (this.chain === undefined) return;
    if (this.chain.from === undefined) this.stage = new GainStage(this.chain.gainDb);
    // The next piece is queued only now: it waits for this one's stage, never for a queued piece.
    this.port.postMessage(SENTENCE_STARTED);
  }

  /**
   * The next raw chunk of the piece with the marks whose sample falls in it (piece timeline: its
   * samples and text from the piece's start). Posted at once, or once the stage has come.
   */
  send(pcm: Int16Array, marks: TimingMark[]): void {
    if (this.chain === undefined) {
      const at = this.sent;
      this.sent += pcm.length;
      this.post(pcm, marks, at);
      return;
    }
    this.sent += pcm.length;
    this.waiting.push({ pcm, marks });
    if (this.stage === undefined) this.takeOver(receiveMessageOnPort(this.chain.from!)?.message);
    this.drain();
  }

  /**
   * The piece is complete: waits for the stage if it has not come, posts the rest, hands the
   * stage on (or, on the last piece, flushes it), then SENTENCE_END. Resolves with the piece's
   * raw samples.
   */
  async end(): Promise<number> {
    const chain = this.chain;
    if (chain !== undefined) {
      if (this.stage === undefined) this.takeOver(await handover(chain.from!));
      this.drain();
      const stage = this.stage!;
      if (chain.to !== undefined) {
        const next: ChainHandover = {
          stage: stage.snapshot(),
          pending: this.pending,
          samples: this.start + this.sent,
          emitted: this.emitted,
        };
        chain.to.postMessage(next);
      } else {
        this.emit(stage.flush(), true);
      }
    }
    this.port.postMessage(SENTENCE_END);
    this.close();
    return this.sent;
  }

  /** Lets go of the chain's ports (the next piece's thread then fails instead of waiting); idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.chain?.from?.close();
    this.chain?.to?.close();
  }

  private takeOver(message: unknown): void {
    if (message === undefined) return;
    const h = message as ChainHandover;
    this.stage = GainStage.restore(h.stage);
    this.pending = h.pending;
    this.start = h.samples;
    this.emitted = h.emitted;
    this.chain?.from?.close();
  }

  /** The waiting chunks through the stage, once it is here. */
  private drain(): void {
    const stage = this.stage;
    const chain = this.chain;
    if (stage === undefined || chain === undefined) return;
    for (const { pcm, marks } of this.waiting) {
      for (const m of marks)
        this.pending.push({
          ...m,
          sample: m.sample + this.start,
          textStart: m.textStart + chain.textAt,
          textEnd: m.textEnd + chain.textAt,
        });
      this.emit(stage.process(pcm), false);
    }
    this.waiting = [];
  }

  /** Gained samples of the call with the marks of the samples among them (every one left when `last`). */
  private emit(pcm: Int16Array, last: boolean): void {
    const at = this.emitted;
    this.emitted += pcm.length;
    const end = this.emitted;
    const marks = last ? this.pending : this.pending.filter((m) => m.sample < end);
    this.pending = last ? [] : this.pending.filter((m) => m.sample >= end);
    if (pcm.length > 0 || marks.length > 0) this.post(pcm, marks, at);
  }

  /** Posts a chunk starting at `at` (on its marks' timeline), indexed, its arrays transferred. */
  private post(pcm: Int16Array, marks: TimingMark[], at: number): void {
    const voiced = indexVoiced(pcm, markPositions(marks, at, pcm.length));
    const chunk: SentenceChunk = { pcm, marks, voiced };
    // A fresh array of its own may be transferred; a view into a larger buffer is copied.
    const own = pcm.byteOffset === 0 && pcm.byteLength === pcm.buffer.byteLength;
    this.port.postMessage(chunk, [
      ...(own ? [pcm.buffer as ArrayBuffer] : []),
      voiced.at.buffer as ArrayBuffer,
      voiced.next.buffer as ArrayBuffer,
      voiced.prev.buffer as ArrayBuffer,
    ]);
  }
}

/** The previous piece's handover; rejects when its thread let go of the chain without one. */
function handover(from: MessagePort): Promise<ChainHandover> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: ChainHandover) => {
      from.off('close', onClose);
      resolve(message);
    };
    const onClose = () => {
      from.off('message', onMessage);
      const late = receiveMessageOnPort(from)?.message as ChainHandover | undefined;
      if (late !== undefined) resolve(late);
      else reject(new Error('the piece before this one failed'));
    };
    from.once('message', onMessage);
    from.once('close', onClose);
  });
}
