/**
 * Recognises the errors of a backing service that cannot be reached or went away — PostgreSQL
 * restarting, Redis down, the S3-compatible store refusing connections or failing on its side — so
 * the one error handler answers them as 503 STORAGE_UNAVAILABLE with Retry-After instead of a 500:
 * the request was fine, the client should retry.
 */
import { AppError } from './app-error.js';

/** Seconds a client is asked to wait before retrying after a backing service failed. */
export const DEPENDENCY_RETRY_AFTER_SECONDS = 5;

/** Node socket errors of a server that refused, dropped or never answered a connection. */
const NETWORK_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** PostgreSQL SQLSTATEs of a server going down or not up yet (class 08 is matched by prefix). */
const POSTGRES_UNAVAILABLE_CODES = new Set([
  '57P01', // admin_shutdown: the session was terminated (restart, pg_terminate_backend)
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now: starting up or shutting down
]);

/** Messages of client libraries whose errors carry no code. */
const UNAVAILABLE_MESSAGES = [
  /^Connection terminated( unexpectedly)?$/, // pg: the server closed the connection
  /^Client has encountered a connection error and is not queryable$/, // pg: a client whose connection broke
  /^timeout exceeded when trying to connect$/, // pg pool: connectionTimeoutMillis
  /^Connection is closed\.$/, // ioredis: a command on a connection that ended
  /^Stream isn't writeable and enableOfflineQueue options is false$/, // ioredis, offline queue off
];

interface ErrorFields {
  name?: unknown;
  code?: unknown;
  message?: unknown;
  cause?: unknown;
  errors?: unknown;
  $metadata?: { httpStatusCode?: unknown };
}

function matchesOne(err: ErrorFields): boolean {
  const { code, name, message } = err;
  if (typeof code === 'string') {
    if (NETWORK_ERROR_CODES.has(code) || POSTGRES_UNAVAILABLE_CODES.has(code)) return true;
    if (/^08[0-9A-Z]{3}$/.test(code)) return true; // PostgreSQL connection_exception class
  }
  // ioredis gave up on a command while it reconnects (maxRetriesPerRequest).
  if (name === 'MaxRetriesPerRequestError') return true;
  // AWS SDK: a connection or socket timeout of its request handler.
  if (name === 'TimeoutError' && err.$metadata !== undefined) return true;
  // An S3-compatible store failing on its side (500 InternalError, 503 SlowDown, a proxy's 502/504).
  const status = err.$metadata?.httpStatusCode;
  if (typeof status === 'number' && status >= 500) return true;
  return typeof message === 'string' && UNAVAILABLE_MESSAGES.some((pattern) => pattern.test(message));
}

/**
 * True when `err`, or an error it wraps (`cause`, AggregateError's `errors`), says a backing
 * service is unreachable or failed on its side: worth a 503 and a retry, not a 500.
 */
export function isDependencyUnavailable(err: unknown): boolean {
  const seen = new Set<unknown>();
  const pending: unknown[] = [err];
  while (pending.length > 0 && seen.size < 32) {
    const current = pending.pop();
    if (typeof current !== 'object' || current === null || seen.has(current)) continue;
    seen.add(current);
    const fields = current as ErrorFields;
    if (matchesOne(fields)) return true;
    pending.push(fields.cause);
    if (Array.isArray(fields.errors)) pending.push(...(fields.errors as unknown[]));
  }
  return false;
}

/** 503 STORAGE_UNAVAILABLE with Retry-After for a backing service's failure (kept as the cause, for the log). */
export function dependencyUnavailable(cause: unknown): AppError {
  return new AppError('STORAGE_UNAVAILABLE', 'a storage service is temporarily unavailable; retry later', {
    cause,
    headers: { 'Retry-After': String(DEPENDENCY_RETRY_AFTER_SECONDS) },
  });
}
