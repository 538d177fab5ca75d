/**
 * The growing-file port: bytes written once by one producer and read by any number of readers, at
 * their own offsets and pace, while they still grow. Generation writes each piece's audio into one
 * (tasks), and each stream session's MP3 is one that every request of the session reads (stream);
 * the adapter keeps them on disk (`growing-file.fs.ts`).
 */
import type { Readable } from 'node:stream';

/** Append-only bytes written by one producer and read by any number of readers. */
export interface GrowingFile {
  /** Bytes appended and readable by new and existing readers. */
  readonly produced: number;
  /** True once `finish()` completed: no more bytes will come. */
  readonly finished: boolean;
  /** True once the producer failed or the cache was destroyed before finishing. */
  readonly failed: boolean;
  /** The failure behind `failed`, else null. */
  readonly error: Error | null;
  /** Final size once finished, else null. */
  readonly size: number | null;

  /** Appends a chunk; resolves once it is written, so the producer is back-pressured by the disk. */
  append(chunk: Uint8Array): Promise<void>;
  /** Marks the file complete after pending appends; readers then end at `size`. */
  finish(): Promise<void>;
  /** Marks the file failed: waiting and future readers get `err`, appends are refused. */
  fail(err: Error): void;
  /** Deletes the backing storage; open readers error out, the file is unusable afterwards. */
  destroy(): Promise<void>;

  /**
   * Resolves when `produced >= byteCount`, or the file finished, failed or was destroyed; woken by
   * appends, never by polling. Rejects with the abort reason if `signal` aborts first.
   */
  waitFor(byteCount: number, signal?: AbortSignal): Promise<void>;

  /**
   * Reads `[start, endExclusive)` (null = to the end of the file), waiting for appends as needed.
   * Bounded memory whatever the consumer's pace; errors with the file's failure; destroyed when
   * `signal` aborts. With `pace`, each chunk is also cut to what the pace grants, and the reader
   * waits for the pace when it grants nothing (without, it goes as fast as its consumer takes).
   */
  createReadStream(
    start: number,
    endExclusive: number | null,
    signal?: AbortSignal,
    pace?: ReadPace,
  ): Readable;
}

/**
 * How fast one reader may take bytes that already exist: consulted before each chunk, so it shapes
 * the sending rate without ever reordering or dropping a byte. One pace per reader.
 */
export interface ReadPace {
  /** Bytes the reader may take now, `available` (> 0) being ready for it; 0 = wait for `ready`. */
  grant(available: number): number;
  /** Records `bytes` taken (at most the last grant). */
  take(bytes: number): void;
  /** Resolves once `grant` may answer more than 0; rejects with the reason when `signal` aborts. */
  ready(signal: AbortSignal): Promise<void>;
  /** The reader is gone: the pace stops waking it. Idempotent. */
  close(): void;
}

/**
 * A folder of growing files that one process owns (a stream service's session caches): made on
 * first use, deleted with everything in it on close.
 */
export interface GrowingFileFolder {
  /** Resolves once the folder exists; files are created after that. */
  ready(): Promise<void>;
  /** A new, empty growing file in the folder; `name` must be a plain file name unique in it. */
  create(name: string): GrowingFile;
  /** Deletes the folder and every file in it. */
  remove(): Promise<void>;
}
