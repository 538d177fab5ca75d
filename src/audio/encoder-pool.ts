/**
 * MP3 encoding off the main thread: a few worker_threads, each hosting many LAME instances (the
 * native addon over Debian's libmp3lame when it loads, else the wasm build: same bytes).
 * Each `Mp3Encoder` is one continuous output stream (320 kbps CBR, 44.1 kHz stereo, untagged) and
 * allows one call in flight, so awaiting each call is the backpressure. A worker that dies is
 * replaced: a stream it had not answered yet holds no encoder state, so it moves to the
 * replacement once, with its first call; the other streams' pending calls reject (their LAME state
 * is gone). Other workers' streams are unaffected.
 */
import { availableParallelism } from 'node:os';
import type { BatchWorkerHost, WorkerLike } from './batch-process.js';
import { AppError } from '../errors/app-error.js';
import type { EncoderReply, EncoderRequest } from './encoder-protocol.js';
import { resolveLameBuild, type LameBuild, type LameChoice } from './lame-stream.js';
import { CANONICAL_RATE } from './pcm.js';
import { siblingModuleUrl, startModuleWorker } from '../common/worker-url.js';

/** One MP3 output stream. Feed canonical PCM (44.1 kHz mono s16); flush once with `finish()`. */
export interface Mp3Encoder {
  /**
   * Encodes the next PCM and resolves with the MP3 bytes ready so far (often not frame-aligned,
   * possibly empty). An array that owns its whole buffer is transferred (detached) to the worker.
   */
  encode(pcm: Int16Array): Promise<Uint8Array>;
  /** Flushes the encoder (pads the last frame) and resolves with the final bytes; the stream is then closed. */
  finish(): Promise<Uint8Array>;
  /** Drops the stream and frees its encoder; a pending call rejects. Idempotent, no-op after finish. */
  abort(): void;
}

/**
 * One MP3 stream written to a file by its worker: its PCM read from files there (`encodeRange`) or
 * sent (`encode`, for silences), so that audio encoded by the batch process never passes through
 * the main thread. One call in flight, as Mp3Encoder.
 */
export interface Mp3FileEncoder {
  /** Encodes `length` bytes (whole samples) of canonical PCM of the file at `path`, from `offset`. */
  encodeRange(path: string, offset: number, length: number): Promise<void>;
  encode(pcm: Int16Array): Promise<void>;
  /** Flushes the encoder into the file and closes it; resolves with the file's size. */
  finish(): Promise<number>;
  /** Drops the stream; the file is left as it is (the caller removes it). Idempotent. */
  abort(): void;
}

/** Options of `createEncoderPool`. */
export interface EncoderPoolOptions {
  /** Worker threads; default min(2, availableParallelism()). */
  size?: number;
  /** LAME build (`MP3_ENCODER`): default `auto`, the native addon when it loads, else wasm. */
  lame?: LameChoice;
  /** Told when a worker stops on its own (what it threw, if anything): the service logs it. */
  onWorkerCrash?: (err: unknown) => void;
  /** Where the batch workers run (the batch process); none: threads of this process. */
  batchHost?: BatchWorkerHost;
}

/** How a stream is encoded: see EncoderPool.open. */
export interface EncoderOpenOptions {
  interactive?: boolean;
  listened?: boolean;
}

/**
 * Which workers a stream goes to: the interactive one, this process's batch workers, or the batch
 * workers of the batch host.
 */
type SlotKind = 'interactive' | 'batch' | 'hosted';

/** A pool of encoder workers; `open()` assigns a new stream to the least-loaded worker. */
export interface EncoderPool {
  readonly size: number;
  /** The LAME build the workers use (resolved from the option when the pool was created). */
  readonly lame: LameBuild;
  /**
   * Opens a new MP3 stream. `interactive`: a client is waiting on it (a one-shot, a short task):
   * it gets the pool's interactive worker, which runs at normal priority and never queues behind
   * the batch encoding of long tasks and live sessions. `listened`: batch work someone listens to
   * live, encoded in this process's batch workers even when the other batch work is hosted
   * elsewhere (the batch process, at a lower priority).
   */
  open(options?: EncoderOpenOptions): Mp3Encoder;
  /** Opens a new MP3 stream, as `open`, that its worker writes to the file `out` (see Mp3FileEncoder). */
  openToFile(out: string, options?: EncoderOpenOptions): Mp3FileEncoder;
  /** Whether a stream opened with `options` is encoded by the batch host (at a lower priority). */
  hosted(options?: EncoderOpenOptions): boolean;
  /** MP3 streams open now (not yet finished or aborted) on every worker: fault tests check none leaks. */
  readonly openStreams: number;
  /** Audio encoded since the pool started, and the workers' seconds spent on it (metrics: realtime factor). */
  readonly encoded: { audioSeconds: number; workerSeconds: number };
  /** Kills every worker as a crash would (pending calls reject, fresh workers take their place): recovery hook for a wedged worker, and how tests exercise the crash path. */
  terminateWorkers(): Promise<void>;
  /** Stops all workers; open streams reject. */
  close(): Promise<void>;
}

/** Creates an encoder pool; close it on shutdown (its workers keep the process alive). */
export function createEncoderPool(options: EncoderPoolOptions = {}): EncoderPool {
  return new WorkerEncoderPool(
    options.size ?? Math.min(2, availableParallelism()),
    resolveLameBuild(options.lame ?? 'auto'),
    options.onWorkerCrash,
    options.batchHost,
  );
}

interface Pending {
  resolve(mp3: Uint8Array): void;
  reject(err: Error): void;
  /** The request, kept while the stream has had no answer, so a replacement worker can take it. */
  replay?: EncoderRequest;
}

type StreamState = 'open' | 'closed' | { failed: Error };

class Stream implements Mp3Encoder {
  state: StreamState = 'open';
  pending: Pending | undefined;
  /** No answer yet: the worker holds no state of this stream, which can still move to another one. */
  unanswered = true;
  /** Moved once already: a second lost worker fails it (a request that kills workers stops there). */
  moved = false;
  /** Bytes its worker wrote to its file so far (a stream opened with `out`). */
  written = 0;

  constructor(
    readonly id: number,
    public slot: Slot,
    /** Sent to open it (again, on a replacement worker). */
    readonly opening: Extract<EncoderRequest, { op: 'open' }>,
  ) {}

  encodeRange(path: string, offset: number, length: number): Promise<Uint8Array> {
    return this.call({ op: 'encode-file', id: this.id, path, offset, length }, []);
  }

  encode(pcm: Int16Array): Promise<Uint8Array> {
    // Transfer when the array owns its buffer; copy a view so the caller's other data survives.
    // Before the first answer the request is sent as a copy, and kept, in case the worker is lost.
    const owned =
      pcm.byteOffset === 0 && pcm.byteLength === pcm.buffer.byteLength && pcm.buffer instanceof ArrayBuffer;
    const data = owned ? pcm : pcm.slice();
    const transfer = this.unanswered ? [] : [data.buffer as ArrayBuffer];
    return this.call({ op: 'encode', id: this.id, pcm: data }, transfer);
  }

  finish(): Promise<Uint8Array> {
    return this.call({ op: 'finish', id: this.id }, [], true);
  }

  abort(): void {
    if (this.state !== 'open' && this.pending === undefined) return;
    if (this.state === 'open') this.slot.post({ op: 'abort', id: this.id }, []);
    this.state = 'closed';
    this.slot.streams.delete(this.id);
    this.fail(new Error('MP3 encoder aborted'));
  }

  /** Rejects the pending call, if any (the stream's state is the caller's business). */
  fail(err: Error): void {
    const p = this.pending;
    this.pending = undefined;
    p?.reject(err);
  }

  settle(reply: EncoderReply): void {
    const p = this.pending;
    this.pending = undefined;
    this.unanswered = false;
    if (reply.ok) {
      if (this.state === 'closed') this.slot.streams.delete(this.id);
      if (reply.written !== undefined) this.written = reply.written;
      p?.resolve(reply.mp3);
    } else {
      const err = new AppError('TTS_GENERATE_FAILED', `MP3 encoding failed: ${reply.error}`);
      this.state = { failed: err };
      this.slot.streams.delete(this.id);
      p?.reject(err);
    }
  }

  /** Posts one request; `last` closes the stream once the request is on its way. */
  private call(req: EncoderRequest, transfer: ArrayBuffer[], last = false): Promise<Uint8Array> {
    if (typeof this.state === 'object') return Promise.reject(this.state.failed);
    if (this.state === 'closed')
      return Promise.reject(new Error('MP3 encoder is already finished or aborted'));
    if (this.pending !== undefined) return Promise.reject(new Error('MP3 encoder allows one call in flight'));
    return new Promise<Uint8Array>((resolve, reject) => {
      this.pending = this.unanswered ? { resolve, reject, replay: req } : { resolve, reject };
      this.slot.post(req, transfer);
      if (last) this.state = 'closed';
    });
  }
}

/** One worker and the streams it hosts. */
class Slot {
  readonly streams = new Map<number, Stream>();
  readonly worker: WorkerLike;
  readonly exited: Promise<void>;
  /** What made the worker stop, when it threw (kept as the cause of the streams' failure). */
  crash: unknown;
  /** The worker's exit code, once it has stopped. */
  exitCode: number | undefined;

  constructor(
    url: URL,
    onExit: (slot: Slot) => void,
    encoded: EncoderPool['encoded'],
    /** The interactive worker (normal priority, only interactive streams), or a batch one, here or hosted. */
    readonly kind: SlotKind,
    lame: LameBuild,
    host: BatchWorkerHost | undefined,
  ) {
    const interactive = kind === 'interactive';
    this.worker =
      host !== undefined && kind === 'hosted'
        ? host.startWorker(url, { interactive, lame })
        : startModuleWorker(url, { interactive, lame });
    this.worker.on('message', (message) => {
      const reply = message as EncoderReply;
      if (reply.ok) {
        encoded.audioSeconds += reply.samples / CANONICAL_RATE;
        encoded.workerSeconds += reply.ms / 1000;
      }
      this.streams.get(reply.id)?.settle(reply);
    });
    // Without an 'error' listener a worker exception would be rethrown in the main thread; it is
    // kept instead, so the failure it causes names it.
    this.worker.on('error', (err) => {
      this.crash = err;
    });
    this.exited = new Promise((resolve) =>
      this.worker.once('exit', (code: number) => {
        this.exitCode = code;
        onExit(this);
        resolve();
      }),
    );
  }

  post(req: EncoderRequest, transfer: ArrayBuffer[]): void {
    this.worker.postMessage(req, transfer);
  }

  /** Fails every stream of this slot with `err` (worker gone). */
  failAll(err: Error): void {
    for (const s of this.streams.values()) {
      s.state = { failed: err };
      s.fail(err);
    }
    this.streams.clear();
  }
}

class WorkerEncoderPool implements EncoderPool {
  private readonly url = siblingModuleUrl(import.meta.url, 'encoder.worker');
  private readonly slots: Slot[] = [];
  private nextId = 1;
  private closed = false;
  readonly encoded = { audioSeconds: 0, workerSeconds: 0 };

  constructor(
    readonly size: number,
    readonly lame: LameBuild,
    private readonly onWorkerCrash: ((err: unknown) => void) | undefined,
    private readonly batchHost: BatchWorkerHost | undefined,
  ) {
    if (!Number.isInteger(size) || size < 1)
      throw new RangeError(`encoder pool size must be a positive integer, got ${size}`);
    // Workers start with the first stream of their kind: an idle service holds none.
  }

  hosted(options: EncoderOpenOptions = {}): boolean {
    return this.batchHost !== undefined && options.interactive !== true && options.listened !== true;
  }

  get openStreams(): number {
    return this.slots.reduce((sum, slot) => sum + slot.streams.size, 0);
  }

  open(options: EncoderOpenOptions = {}): Mp3Encoder {
    return this.openStream(options);
  }

  openToFile(out: string, options: EncoderOpenOptions = {}): Mp3FileEncoder {
    const stream = this.openStream(options, out);
    return {
      encodeRange: async (path, offset, length) => void (await stream.encodeRange(path, offset, length)),
      encode: async (pcm) => void (await stream.encode(pcm)),
      finish: async () => {
        await stream.finish();
        return stream.written;
      },
      abort: () => stream.abort(),
    };
  }

  private openStream(options: EncoderOpenOptions, out?: string): Stream {
    if (this.closed) throw new Error('encoder pool is closed');
    const kind: SlotKind =
      options.interactive === true ? 'interactive' : this.hosted(options) ? 'hosted' : 'batch';
    const slot = this.pick(kind);
    const id = this.nextId++;
    const stream = new Stream(id, slot, { op: 'open', id, ...(out !== undefined && { out }) });
    slot.streams.set(stream.id, stream);
    slot.post(stream.opening, []);
    return stream;
  }

  async terminateWorkers(): Promise<void> {
    const old = [...this.slots];
    await Promise.all(
      old.map(async (s) => {
        await s.worker.terminate();
        await s.exited;
      }),
    );
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.terminateWorkers();
  }

  /** The least-loaded worker of the kind, starting the kind's workers when they are not there. */
  private pick(kind: SlotKind): Slot {
    const want = kind === 'interactive' ? 1 : this.size;
    let have = this.slots.filter((s) => s.kind === kind).length;
    for (; have < want; have++) this.slots.push(this.spawn(kind));
    let slot: Slot | undefined;
    for (const s of this.slots) {
      if (s.kind === kind && (slot === undefined || s.streams.size < slot.streams.size)) slot = s;
    }
    if (slot === undefined) throw new Error('encoder pool has no workers');
    return slot;
  }

  private spawn(kind: SlotKind): Slot {
    return new Slot(this.url, (slot) => this.onExit(slot), this.encoded, kind, this.lame, this.batchHost);
  }

  private onExit(slot: Slot): void {
    const i = this.slots.indexOf(slot);
    if (i >= 0) this.slots.splice(i, 1);
    if (this.closed) {
      slot.failAll(new Error('encoder pool closed'));
      return;
    }
    this.onWorkerCrash?.(slot.crash ?? new Error(`MP3 encoder worker exited with code ${slot.exitCode}`));
    const movable = [...slot.streams.values()].filter((s) => s.unanswered && !s.moved);
    for (const s of movable) slot.streams.delete(s.id);
    slot.failAll(
      new AppError('TTS_GENERATE_FAILED', 'MP3 encoder worker stopped unexpectedly', { cause: slot.crash }),
    );
    // Workers of the kind start again on the next open; the streams moved here start them now.
    for (const s of movable) this.move(s, this.pick(slot.kind));
  }

  /** Gives an unanswered stream to another worker: its open again, then its first call, if sent. */
  private move(stream: Stream, to: Slot): void {
    stream.moved = true;
    stream.slot = to;
    to.streams.set(stream.id, stream);
    to.post(stream.opening, []);
    const replay = stream.pending?.replay;
    if (replay !== undefined) to.post(replay, []);
  }
}
