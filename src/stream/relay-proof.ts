/**
 * Proof that a stream request comes from another node of the cluster: an HMAC of the request's path
 * and query with the cluster's shared secret, valid for a short while. Only a relayed request is
 * answered from the node's own session whatever the task's state, so a client must not be able to
 * claim to be one (it would start fresh pipelines for finished tasks instead of taking the 302).
 */
import { createHmac } from 'node:crypto';
import { secretsEqual } from '../common/secret-compare.js';

/** Seconds a proof stays valid: the time from one node's signing to another's check. */
export const RELAY_PROOF_TTL_SECONDS = 60;

function mac(secret: string, expires: number, pathAndQuery: string): string {
  return createHmac('sha256', secret)
    .update(`${String(expires)}\n${pathAndQuery}`)
    .digest('base64url');
}

/** The relay header's value for a request of `pathAndQuery` (e.g. `/api/…/stream.mp3?auth=…`). */
export function signRelay(secret: string, pathAndQuery: string, nowMs = Date.now()): string {
  const expires = Math.floor(nowMs / 1000) + RELAY_PROOF_TTL_SECONDS;
  return `${String(expires)}.${mac(secret, expires, pathAndQuery)}`;
}

/** Whether `proof` was signed with `secret` for exactly `pathAndQuery` and has not expired. */
export function verifyRelay(
  secret: string,
  proof: string | string[] | undefined,
  pathAndQuery: string,
  nowMs = Date.now(),
): boolean {
  if (typeof proof !== 'string') return false;
  const match = /^(\d{1,12})\.([A-Za-z0-9_-]{43})$/.exec(proof);
  if (match === null) return false;
  const expires = Number(match[1]);
  const now = Math.floor(nowMs / 1000);
  if (expires < now || expires > now + RELAY_PROOF_TTL_SECONDS) return false;
  return secretsEqual(match[2] ?? '', mac(secret, expires, pathAndQuery));
}
