/**
 * Scale-out: a node reads a live stream session from the node that runs its pipeline (the node
 * generating the task, where the growing piece audio is) over ONE connection per session, and fans
 * it out to its own readers from its own session cache, as Icecast relays do. The relayed bytes and
 * the ETag are the owner's, so every node answers Range, If-Range and 416 identically.
 */
import { AppError } from '../errors/app-error.js';

/**
 * Request header that marks a node-to-node relay request (answer locally, never relay again); its
 * value is a proof signed with the cluster's secret (relay-proof.ts), so clients cannot send one.
 */
export const RELAY_HEADER = 'x-voicegen-relay';

/** Which session to relay: the request's key and the task's `auth` token (the owner checks it). */
export interface RelayTarget {
  taskId: string;
  /** Content index for the per-content stream; null for the full-task stream. */
  contentIndex: number | null;
  /** The session id `i` ('' when absent). */
  sessionId: string;
  auth: string;
}

/** The owner's answer: its session build's ETag and its bytes from byte 0, live until the session ends. */
export interface RelayedSession {
  etag: string;
  bytes: AsyncIterable<Uint8Array>;
}

/** Opens relays of sessions owned by other nodes. */
export interface SessionRelay {
  /**
   * Asks `nodeUrl` for the session; resolves once the owner has answered with the session's headers.
   * Throws the owner's own error (e.g. STREAM_NOT_READY), RelayRedirect when the task's audio is
   * finished, or NO_WORKER_AVAILABLE when the owner cannot be reached. Aborting `signal` closes it.
   */
  open(nodeUrl: string, target: RelayTarget, signal: AbortSignal): Promise<RelayedSession>;
}

/** The owner answered with a redirect to the finished audio: pass it on. */
export class RelayRedirect extends Error {
  constructor(readonly location: string) {
    super('the stream owner redirected to the finished audio');
    this.name = 'RelayRedirect';
  }
}

/** The error of a request whose owner node cannot be reached (dead, or still being replaced). */
export function ownerUnreachable(retryAfterSeconds: number, cause?: unknown): AppError {
  return new AppError(
    'NO_WORKER_AVAILABLE',
    'the node generating this task cannot be reached; its work moves to another node when its lease expires',
    { headers: { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterSeconds))) }, cause },
  );
}
