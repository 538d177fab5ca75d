/**
 * PieceAudioStore on this node's disk: a piece being generated in this process is an append-only
 * FsGrowingFile (readers follow its growth); a finished piece is a complete file under
 * DATA_DIR/work (`<task>/<idx>.pcm`, its MP3 `<idx>.mp3` beside it, a task's merged MP3
 * `task.mp3`).
 */
import { createReadStream } from 'node:fs';
import { access, mkdir, readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { ENCODE_BLOCK_SAMPLES, encodePiece, silenceSamples } from '../audio/continuous-encoder.js';
import type { EncoderPool, Mp3FileEncoder } from '../audio/encoder-pool.js';
import { pcmChunks } from '../audio/pcm-stream.js';
import { OWNER_DIR_MODE } from '../common/owner-only.js';
import { AppError } from '../errors/app-error.js';
import { FsGrowingFile } from '../storage/growing-file.fs.js';
import type {
  MergedMp3Writer,
  PieceAudioStore,
  PieceMp3Source,
  PieceStateLookup,
  PieceWriter,
} from './piece-audio.js';
import type { TaskEvents } from './queue/task-events.js';

/**
 * Most PCM one file-read encoding call asks its worker for (~3 s): a piece's whole PCM may already
 * be there when its encoding starts, and the worker reads a range into memory at once.
 */
const MAX_FILE_RANGE_BYTES = 256 * 1024;

/** The growing files of a piece being generated in this process. */
interface LivePiece {
  pcm: FsGrowingFile;
  /** Its MP3 as this process writes it; null when none is kept, or while the batch process writes it. */
  mp3: FsGrowingFile | null;
  /** Its MP3 is the canonical encoding of its PCM, made here (not an engine's own MP3). */
  encodedHere: boolean;
  /**
   * Live readers may follow its MP3: false while the batch process encodes it, at a lower priority
   * than a reader's own encoding of the PCM.
   */
  followable: boolean;
}

export class FsPieceAudioStore implements PieceAudioStore {
  private readonly live = new Map<string, LivePiece>();
  /**
   * The merged MP3 of each task being generated in this process: a growing file readers may
   * follow, or null while the batch process writes it.
   */
  private readonly liveMerged = new Map<string, { file: FsGrowingFile | null }>();

  constructor(
    private readonly root: string,
    private readonly events: TaskEvents,
    private readonly pieceState: PieceStateLookup,
  ) {}

  private dir(taskId: string): string {
    return join(this.root, taskId);
  }

  private path(taskId: string, idx: number): string {
    return join(this.dir(taskId), `${idx}.pcm`);
  }

  private mp3Path(taskId: string, idx: number): string {
    return join(this.dir(taskId), `${idx}.mp3`);
  }

  /** The complete PCM of a piece generated on this node (what openPiece gives once it is recorded). */
  readComplete(taskId: string, idx: number, signal?: AbortSignal): Readable {
    return readUntilAborted(this.path(taskId, idx), signal);
  }

  private mergedPath(taskId: string): string {
    return join(this.dir(taskId), 'task.mp3');
  }

  /** Starts (or restarts) writing a task's merged MP3; any earlier file of it is discarded. */
  async startMergedMp3(taskId: string): Promise<MergedMp3Writer> {
    await mkdir(this.dir(taskId), { recursive: true, mode: OWNER_DIR_MODE });
    await rm(this.mergedPath(taskId), { force: true });
    const cache = new FsGrowingFile({ dir: this.dir(taskId), name: 'task.mp3' });
    this.liveMerged.set(taskId, { file: cache });
    const forget = () => {
      if (this.liveMerged.get(taskId)?.file === cache) this.liveMerged.delete(taskId);
    };
    return {
      append: (mp3) => cache.append(mp3),
      finish: () => cache.finish(),
      fail: (err) => {
        forget();
        cache.fail(err);
      },
    };
  }

  /**
   * Writes a task's merged MP3 in the batch process (`encoders` hosts the stream): every piece's
   * PCM, in order, read there from its file as it grows, with each piece's silence before the next
   * one (none after the last): the same bytes as encoding the pieces here. Resolves once the file
   * is complete; live readers do not follow it (they encode the pieces themselves).
   */
  async encodeMergedInHost(
    taskId: string,
    pieces: readonly { idx: number; silenceAfterSeconds: number }[],
    encoders: EncoderPool,
    signal: AbortSignal,
  ): Promise<void> {
    await mkdir(this.dir(taskId), { recursive: true, mode: OWNER_DIR_MODE });
    await rm(this.mergedPath(taskId), { force: true });
    const entry = { file: null };
    this.liveMerged.set(taskId, entry);
    const encoder = encoders.openToFile(this.mergedPath(taskId));
    try {
      let silenceBefore = 0;
      for (const piece of pieces) {
        for (let left = silenceSamples(silenceBefore); left > 0; left -= ENCODE_BLOCK_SAMPLES)
          await encoder.encode(new Int16Array(Math.min(left, ENCODE_BLOCK_SAMPLES)));
        const found = await this.whenFound(taskId, signal, () => this.locate(taskId, piece.idx));
        const path = this.path(taskId, piece.idx);
        if (found === 'complete') await encodeFileRange(encoder, path, 0, (await stat(path)).size, signal);
        else await encodeWhileGrowing(encoder, found.pcm, signal);
        silenceBefore = piece.silenceAfterSeconds;
      }
      await encoder.finish();
    } catch (err) {
      encoder.abort();
      if (this.liveMerged.get(taskId) === entry) this.liveMerged.delete(taskId);
      throw err;
    }
  }

  /** The complete merged MP3 of a task generated on this node (generation stores it as the task's audio). */
  readCompleteMergedMp3(taskId: string, signal?: AbortSignal): Readable {
    return readUntilAborted(this.mergedPath(taskId), signal);
  }

  /**
   * Called once the task's merged MP3 is stored, or its writing or storing failed: new full-task
   * streams no longer follow it (they read the stored audio, or encode the pieces themselves).
   */
  mergedDone(taskId: string): void {
    this.liveMerged.delete(taskId);
  }

  /** The complete MP3 of a piece generated on this node (generation stores it as the piece's audio). */
  readCompleteMp3(taskId: string, idx: number, signal?: AbortSignal): Readable {
    return readUntilAborted(this.mp3Path(taskId, idx), signal);
  }

  /** Starts (or restarts) writing a piece; any earlier partial file of it is discarded. */
  async startPiece(taskId: string, idx: number, mp3Source: PieceMp3Source): Promise<PieceWriter> {
    const key = `${taskId}/${idx}`;
    await mkdir(this.dir(taskId), { recursive: true, mode: OWNER_DIR_MODE });
    await rm(this.path(taskId, idx), { force: true });
    await rm(this.mp3Path(taskId, idx), { force: true });
    // Encoded by the batch process: it reads the PCM from the file and writes the MP3 itself.
    const hosted = mp3Source.kind === 'encode' && mp3Source.encoders.hosted(mp3Source);
    const piece: LivePiece = {
      // Nobody follows a hosted piece's PCM while it is written (a listener first moves it here).
      pcm: new FsGrowingFile({ dir: this.dir(taskId), name: `${idx}.pcm` }, hosted ? { tailBytes: 0 } : {}),
      mp3:
        mp3Source.kind === 'none' || hosted
          ? null
          : new FsGrowingFile({ dir: this.dir(taskId), name: `${idx}.mp3` }),
      encodedHere: mp3Source.kind === 'encode',
      followable: !hosted,
    };
    this.live.set(key, piece);
    this.events.changed(taskId);
    // The encoding follows the PCM as it is written and ends with it; a failed piece stops it.
    let stopEncoding = new AbortController();
    const encode = (source: Extract<PieceMp3Source, { kind: 'encode' }>) => {
      const signal = AbortSignal.any([source.signal, stopEncoding.signal]);
      // Followable: encoded here (from the start, or since encodeHere).
      const started = piece.followable
        ? this.encodeWhileWritten(piece, source, signal)
        : this.encodeInHost(piece, source, this.mp3Path(taskId, idx), signal);
      started.catch(() => undefined); // reported by finish(), or moot after fail()
      return started;
    };
    let encoding = mp3Source.kind === 'encode' ? encode(mp3Source) : undefined;
    /** encodeHere() was called: the piece's MP3 is followable once its new file is in place. */
    let movedHere = false;
    return {
      append: (pcm) => piece.pcm.append(new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength)),
      appendMp3: (mp3) => {
        if (mp3Source.kind !== 'engine' || piece.mp3 === null)
          return Promise.reject(new Error(`piece ${key} was started without engine MP3`));
        return piece.mp3.append(mp3);
      },
      encodeHere: () => {
        if (piece.followable || movedHere || mp3Source.kind !== 'encode') return;
        movedHere = true;
        const inHost = { stop: stopEncoding, encoding };
        const here = (stopEncoding = new AbortController());
        encoding = (async () => {
          inHost.stop.abort(new Error('encoded in the service instead'));
          await inHost.encoding?.catch(() => undefined);
          // Nobody read it (not followable): its partial file goes, the same name starts again.
          // Unlinked first: a write the batch process still makes lands in the old file.
          await rm(this.mp3Path(taskId, idx), { force: true });
          const mp3 = new FsGrowingFile({ dir: this.dir(taskId), name: `${idx}.mp3` });
          piece.mp3 = mp3;
          piece.followable = true;
          if (here.signal.aborted) {
            // The piece failed meanwhile (fail() reached the old file): this one fails too.
            const err = here.signal.reason instanceof Error ? here.signal.reason : new Error('piece failed');
            mp3.fail(err);
            throw err;
          }
          this.events.changed(taskId);
          await encode({ ...mp3Source, listened: true });
        })();
        encoding.catch(() => undefined);
      },
      finish: async () => {
        await piece.pcm.finish();
        await encoding;
        await piece.mp3?.finish();
      },
      fail: (err) => {
        stopEncoding.abort(err);
        piece.mp3?.fail(err);
        piece.pcm.fail(err);
        this.live.delete(key);
        this.events.changed(taskId);
      },
    };
  }

  /** Has the batch process encode a piece's PCM file into its MP3 file while the PCM is written. */
  private async encodeInHost(
    piece: LivePiece,
    source: Extract<PieceMp3Source, { kind: 'encode' }>,
    mp3Path: string,
    signal: AbortSignal,
  ): Promise<void> {
    const encoder = source.encoders.openToFile(mp3Path, {
      interactive: source.interactive === true,
      listened: source.listened === true,
    });
    try {
      await encodeWhileGrowing(encoder, piece.pcm, signal);
      await encoder.finish();
    } catch (err) {
      encoder.abort();
      throw err;
    }
  }

  /** Encodes a piece's PCM into its MP3 file while the PCM is written (one encoder per piece). */
  private async encodeWhileWritten(
    piece: LivePiece,
    source: Extract<PieceMp3Source, { kind: 'encode' }>,
    signal: AbortSignal,
  ): Promise<void> {
    const { mp3 } = piece;
    if (mp3 === null) throw new Error('an encoded piece keeps its MP3');
    const pcm = piece.pcm.createReadStream(0, null, signal);
    pcm.on('error', () => undefined); // iteration reports it
    const encoder = source.encoders.open({
      interactive: source.interactive === true,
      listened: source.listened === true,
    });
    for await (const bytes of encodePiece(pcmChunks(pcm), encoder, signal)) {
      await mp3.append(bytes);
    }
  }

  /** Called once the piece is recorded as generated: new readers then read the complete file. */
  pieceRecorded(taskId: string, idx: number): void {
    this.live.delete(`${taskId}/${idx}`);
    this.events.changed(taskId);
  }

  async openPiece(taskId: string, idx: number, signal: AbortSignal): Promise<Readable> {
    const { reader } = await this.whenStarted(taskId, signal, async () => {
      const found = await this.locate(taskId, idx);
      if (found === undefined) return undefined;
      return {
        reader:
          found === 'complete'
            ? this.readComplete(taskId, idx, signal)
            : found.pcm.createReadStream(0, null, signal),
      };
    });
    return reader;
  }

  async openPieceMp3(taskId: string, idx: number, signal: AbortSignal): Promise<Readable | null> {
    const opened = await this.whenStarted(taskId, signal, async () => {
      const found = await this.locate(taskId, idx);
      if (found === undefined) return undefined;
      if (found !== 'complete')
        return { reader: found.followable ? (found.mp3?.createReadStream(0, null, signal) ?? null) : null };
      const kept = await access(this.mp3Path(taskId, idx)).then(
        () => true,
        () => false,
      );
      return { reader: kept ? this.readCompleteMp3(taskId, idx, signal) : null };
    });
    return opened.reader;
  }

  async openCanonicalMp3(taskId: string, idx: number, signal: AbortSignal): Promise<Readable | null> {
    const opened = await this.whenStarted(taskId, signal, async () => {
      const found = await this.locate(taskId, idx);
      if (found === undefined) return undefined;
      if (found === 'complete' || !found.encodedHere || !found.followable || found.mp3 === null)
        return { reader: null };
      return { reader: found.mp3.createReadStream(0, null, signal) };
    });
    return opened.reader;
  }

  async openMergedMp3(taskId: string, firstIdx: number, signal: AbortSignal): Promise<Readable | null> {
    const opened = await this.whenStarted(taskId, signal, async () => {
      if ((await this.locate(taskId, firstIdx)) === undefined) return undefined;
      const merged = this.liveMerged.get(taskId)?.file;
      return { reader: merged?.createReadStream(0, null, signal) ?? null };
    });
    return opened.reader;
  }

  /**
   * Retries `attempt` at every change of the task until it finds the piece (it returns undefined
   * while the piece has not started), and returns what it found.
   */
  private async whenStarted<R extends Readable | null>(
    taskId: string,
    signal: AbortSignal,
    attempt: () => Promise<{ reader: R } | undefined>,
  ): Promise<{ reader: R }> {
    const opened = await this.whenFound(taskId, signal, attempt);
    // Consumers iterate the reader later (the encoder takes a piece once the previous one is
    // done): an abort before then destroys it with an 'error' event nobody listens to yet, which
    // would be an uncaughtException. Iteration still reports the error.
    opened.reader?.on('error', () => undefined);
    return opened;
  }

  /** Retries `attempt` at every change of the task until it answers something, and returns that. */
  private async whenFound<T>(
    taskId: string,
    signal: AbortSignal,
    attempt: () => Promise<T | undefined>,
  ): Promise<T> {
    for (;;) {
      signal.throwIfAborted();
      // Subscribe before reading state so a change in between is not missed; unsubscribe on return.
      const subscription = new AbortController();
      const change = this.events.nextChange(taskId, AbortSignal.any([signal, subscription.signal]));
      change.catch(() => undefined);
      let found: T | undefined;
      try {
        found = await attempt();
      } catch (err) {
        subscription.abort();
        throw err;
      }
      if (found !== undefined) {
        subscription.abort();
        return found;
      }
      await change;
    }
  }

  /**
   * Where piece `idx` is: being written here (its live files), 'complete' on this node's disk, or
   * undefined when it has not started (or is generated again here); throws when it failed or its
   * audio is lost for good.
   */
  private async locate(taskId: string, idx: number): Promise<LivePiece | 'complete' | undefined> {
    const live = this.live.get(`${taskId}/${idx}`);
    if (live) return live;
    const { piece: state, taskUnfinished } = await this.pieceState(taskId, idx);
    if (state === 'generated') {
      if (await this.hasPiece(taskId, idx)) return 'complete';
      // Generated by a node that is gone (scale-out): this node's worker generates it again.
      if (taskUnfinished) return undefined;
      throw new AppError('TTS_GENERATE_FAILED', `the audio of content ${idx} is not available on this node`);
    }
    if (state === 'failed') throw new AppError('TTS_GENERATE_FAILED', `generation of content ${idx} failed`);
    return undefined;
  }

  /** Whether this node holds the complete PCM of a piece (a task resumed on another node may not). */
  async hasPiece(taskId: string, idx: number): Promise<boolean> {
    if (this.live.has(`${taskId}/${idx}`)) return false;
    return access(this.path(taskId, idx)).then(
      () => true,
      () => false,
    );
  }

  /** Removes every piece file of a task. */
  async deleteTask(taskId: string): Promise<void> {
    await rm(this.dir(taskId), { recursive: true, force: true });
  }

  /**
   * Deletes the piece audio of tasks that no longer need it on this node: not being written here,
   * not among the tasks `stillNeeded` reports (unfinished ones), and untouched for `idleMs` (stream
   * pipelines of a finished task have read their pieces by then). On a cluster, the node that
   * deletes a task is rarely the one holding its piece audio, so every node sweeps its own.
   * Returns the task ids whose files were removed.
   */
  async sweep(stillNeeded: (taskIds: string[]) => Promise<Set<string>>, idleMs: number): Promise<string[]> {
    const names = await readdir(this.root).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [];
      throw err;
    });
    const idle: string[] = [];
    const cutoff = Date.now() - idleMs;
    for (const taskId of names) {
      if (this.liveMerged.has(taskId) || [...this.live.keys()].some((key) => key.startsWith(`${taskId}/`)))
        continue;
      if ((await lastWrite(this.dir(taskId))) < cutoff) idle.push(taskId);
    }
    if (idle.length === 0) return [];
    const needed = await stillNeeded(idle);
    const removed = idle.filter((taskId) => !needed.has(taskId));
    for (const taskId of removed) await this.deleteTask(taskId);
    return removed;
  }
}

/** The newest modification time (ms) of a directory and the files in it. */
async function lastWrite(dir: string): Promise<number> {
  let newest = (await stat(dir)).mtimeMs;
  for (const name of await readdir(dir)) {
    const info = await stat(join(dir, name)).catch(() => undefined);
    if (info !== undefined) newest = Math.max(newest, info.mtimeMs);
  }
  return newest;
}

/**
 * A read stream of `path` that stops when `signal` aborts (an aborted signal throws here). Its
 * abort error goes to whoever consumes it — a consumer that starts later (a blob store that first
 * creates folders) finds it in the stream's `errored` state — and never to the process as an
 * unhandled 'error' event (a task cancelled at that moment took the whole process down in tests).
 */
function readUntilAborted(path: string, signal: AbortSignal | undefined): Readable {
  signal?.throwIfAborted();
  const stream = createReadStream(path, signal === undefined ? {} : { signal });
  stream.on('error', () => undefined);
  return stream;
}

/** Encodes `length` bytes of the PCM file at `path` from `offset`, in ranges a worker reads at once. */
async function encodeFileRange(
  encoder: Mp3FileEncoder,
  path: string,
  offset: number,
  length: number,
  signal: AbortSignal,
): Promise<void> {
  for (let at = offset, end = offset + length; at < end;) {
    signal.throwIfAborted();
    const n = Math.min(end - at, MAX_FILE_RANGE_BYTES);
    await encoder.encodeRange(path, at, n);
    at += n;
  }
}

/** Encodes a piece's PCM file as it is written, to its end (or its failure). */
async function encodeWhileGrowing(
  encoder: Mp3FileEncoder,
  pcm: FsGrowingFile,
  signal: AbortSignal,
): Promise<void> {
  for (let at = 0; ;) {
    await pcm.waitFor(at + 1, signal);
    if (pcm.error !== null) throw pcm.error;
    if (pcm.isDestroyed) throw new Error(`${pcm.path} was removed while it was encoded`);
    const end = pcm.produced;
    await encodeFileRange(encoder, pcm.path, at, end - at, signal);
    at = end;
    if (pcm.finished && at >= pcm.produced) return;
  }
}
