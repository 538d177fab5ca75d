/**
 * The byte cache of one stream session (spec §2.2): the audio pipeline appends to it once, every
 * HTTP request for the session reads from it, at its own offset and pace, while it still grows.
 */
import type { Readable } from 'node:stream';

/** Append-only bytes of one session, written by one producer and read by any number of readers. */
export interface SessionCache {
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
  /** Marks the session complete after pending appends; readers then end at `size`. */
  finish(): Promise<void>;
  /** Marks the session failed: waiting and future readers get `err`, appends are refused. */
  fail(err: Error): void;
  /** Deletes the backing storage; open readers error out, the cache is unusable afterwards. */
  destroy(): Promise<void>;

  /**
   * Resolves when `produced >= byteCount`, or the cache finished, failed or was destroyed; woken by
   * appends, never by polling. Rejects with the abort reason if `signal` aborts first.
   */
  waitFor(byteCount: number, signal?: AbortSignal): Promise<void>;

  /**
   * Reads `[start, endExclusive)` (null = to the end of the session), waiting for appends as needed.
   * Bounded memory whatever the consumer's pace; errors with the cache's failure; destroyed when
   * `signal` aborts.
   */
  createReadStream(start: number, endExclusive: number | null, signal?: AbortSignal): Readable;
}

/** Where a session cache lives: a directory and a file name unique to the session build. */
export interface SessionCacheLocation {
  dir: string;
  name: string;
}
