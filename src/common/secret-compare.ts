/**
 * The one constant-time comparison of secrets (API-key hashes, stream `auth` tokens, the operator
 * token): both sides are hashed first, so neither the length nor a common prefix leaks through timing.
 */
import { hash, timingSafeEqual } from 'node:crypto';

/** The form a secret is compared in; keep it with a secret that is compared often (secretMatches). */
export function secretDigest(value: string): Buffer {
  return hash('sha256', value, 'buffer');
}

/** True when `given` equals `expected`, compared in time independent of where they differ. */
export function secretsEqual(given: string, expected: string): boolean {
  return timingSafeEqual(secretDigest(given), secretDigest(expected));
}

/** secretsEqual against a secret's kept digest (from secretDigest): one hash per comparison. */
export function secretMatches(given: string, expectedDigest: Buffer): boolean {
  return timingSafeEqual(secretDigest(given), expectedDigest);
}
