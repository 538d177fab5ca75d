/**
 * SessionRelay over HTTP: the owner's own stream endpoint, asked with the relay header (signed with
 * the cluster's secret) so that it answers from its local session (200 from byte 0, live) and never
 * relays further.
 */
import { AppError, ERROR_CATALOGUE, type ErrorCode } from '../errors/app-error.js';
import { signRelay } from './relay-proof.js';
import {
  ownerUnreachable,
  RELAY_HEADER,
  RelayRedirect,
  type RelayTarget,
  type RelayedSession,
  type SessionRelay,
} from './session-relay.js';

/** Options of the HTTP relay. */
export interface HttpSessionRelayOptions {
  /** Deadline for the owner's response headers (the body then streams as long as the session lives). */
  headersTimeoutMs: number;
  /** Retry-After of the error when the owner cannot be reached (about the task lease). */
  retryAfterSeconds: number;
  /** The cluster's shared secret: the owner answers as to a relay only requests signed with it. */
  secret: string;
}

function relayUrl(nodeUrl: string, target: RelayTarget): string {
  const content = target.contentIndex === null ? '' : `/${String(target.contentIndex)}`;
  const url = new URL(
    `${nodeUrl}/api/tts/generate/${encodeURIComponent(target.taskId)}${content}/stream.mp3`,
  );
  url.searchParams.set('auth', target.auth);
  if (target.sessionId !== '') url.searchParams.set('i', target.sessionId);
  return url.toString();
}

function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CATALOGUE, value);
}

/** The owner's JSON error as our own AppError (same code and message); unknown shapes become 503. */
async function ownerError(response: Response, retryAfterSeconds: number): Promise<Error> {
  const body = (await response.json().catch(() => undefined)) as
    { code?: unknown; message?: unknown } | undefined;
  if (body !== undefined && isErrorCode(body.code)) {
    const retryAfter = response.headers.get('retry-after');
    return new AppError(body.code, typeof body.message === 'string' ? body.message : body.code, {
      headers: retryAfter === null ? {} : { 'Retry-After': retryAfter },
    });
  }
  return ownerUnreachable(retryAfterSeconds, new Error(`owner answered ${String(response.status)}`));
}

async function* bodyBytes(response: Response): AsyncIterable<Uint8Array> {
  if (response.body === null) return;
  for await (const chunk of response.body) yield chunk;
}

/** Creates the HTTP relay (Node's fetch; one connection per relayed session). */
export function createHttpSessionRelay(options: HttpSessionRelayOptions): SessionRelay {
  return {
    async open(nodeUrl: string, target: RelayTarget, signal: AbortSignal): Promise<RelayedSession> {
      const headersDeadline = new AbortController();
      const timer = setTimeout(
        () => headersDeadline.abort(new Error('the stream owner did not answer in time')),
        options.headersTimeoutMs,
      );
      timer.unref();
      let response: Response;
      const url = new URL(relayUrl(nodeUrl, target));
      try {
        response = await fetch(url, {
          headers: { [RELAY_HEADER]: signRelay(options.secret, `${url.pathname}${url.search}`) },
          redirect: 'manual',
          signal: AbortSignal.any([signal, headersDeadline.signal]),
        });
      } catch (err) {
        if (signal.aborted) throw err;
        throw ownerUnreachable(options.retryAfterSeconds, err);
      } finally {
        clearTimeout(timer);
      }
      if (response.status === 302) {
        await response.body?.cancel();
        const location = response.headers.get('location');
        if (location === null)
          throw ownerUnreachable(options.retryAfterSeconds, new Error('302 without Location'));
        throw new RelayRedirect(location);
      }
      if (response.status !== 200) throw await ownerError(response, options.retryAfterSeconds);
      const etag = response.headers.get('etag');
      if (etag === null) {
        await response.body?.cancel();
        throw ownerUnreachable(options.retryAfterSeconds, new Error('the owner answered without an ETag'));
      }
      return { etag, bytes: bodyBytes(response) };
    },
  };
}
