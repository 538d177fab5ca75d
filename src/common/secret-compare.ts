/**
 * The one constant-time comparison of secrets (API-key hashes, stream `auth` tokens, the operator
 * token): both sides are hashed first, so neither the length nor a common prefix leaks through timing.
 */
import { hash, timingSafeEqual } from 'node:crypto';

function digest(value: string): Buffer {
  return hash('sha256', value, 'buffer');
}

/** True when `given` equals `expected`, compared in time independent of where they differ. */
export function secretsEqual(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}
