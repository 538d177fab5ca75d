/**
 * Query and path checks shared by the stream endpoints: the session id `i`, the
 * content index and the task's `auth` token.
 */
import { AppError } from '../errors/app-error.js';

const SESSION_ID = /^[A-Za-z0-9_-]{0,64}$/;
// Canonical decimal only (no sign, no leading zeros): `01` is not content 1.
const CONTENT_INDEX = /^(?:0|[1-9][0-9]{0,8})$/;

/** The session id `i`: absent = '', else at most 64 of [A-Za-z0-9_-]; anything else is a 400. */
export function parseSessionId(value: unknown): string {
  if (value === undefined) return '';
  if (typeof value !== 'string' || !SESSION_ID.test(value)) {
    throw new AppError(
      'VALIDATION_INVALID_VALUE',
      'i must be given once, as at most 64 characters of A-Z, a-z, 0-9, _ and -',
    );
  }
  return value;
}

/** The `{contentIndex}` path segment as a number, or null when it cannot name a content piece. */
export function parseContentIndex(segment: string): number | null {
  return CONTENT_INDEX.test(segment) ? Number(segment) : null;
}

/** The `auth` query token as given: 401 when it is missing, empty or repeated. */
export function requireAuthToken(value: unknown): string {
  if (typeof value !== 'string' || value === '') {
    throw new AppError('AUTH_UNAUTHORIZED', 'the auth query parameter is required for stream endpoints');
  }
  return value;
}
