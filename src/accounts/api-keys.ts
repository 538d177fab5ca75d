/** API key format and hashing: `sk-` + 32 lowercase alphanumerics, stored only as a sha256 hash. */
import { createHash, randomInt } from 'node:crypto';

export const API_KEY_PATTERN = /^sk-[a-z0-9]{32}$/;
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

/** A new random key (about 165 bits of entropy). */
export function generateApiKey(): string {
  let body = '';
  for (let i = 0; i < 32; i++) body += ALPHABET[randomInt(ALPHABET.length)];
  return `sk-${body}`;
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** What listings show of a key: enough to tell keys apart, never enough to use one. */
export function keyPrefix(key: string): string {
  return key.slice(0, 7);
}
