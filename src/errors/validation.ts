/**
 * Turns a zod validation failure into the catalogue's VALIDATION_* error, naming the field, so
 * every request body is validated the same way and bad input never becomes a 500.
 */
import { z } from 'zod';
import { AppError, type ErrorCode } from './app-error.js';

function fieldName(path: readonly PropertyKey[]): string {
  return path.length === 0
    ? 'body'
    : path
        .map((p) => (typeof p === 'number' ? `[${p}]` : String(p)))
        .join('.')
        .replace(/\.\[/g, '[');
}

/**
 * Index of the first character that must not be stored, or -1. PostgreSQL text can never hold NUL
 * (U+0000: "invalid byte sequence" → a 500), and the other C0 controls have no place in names,
 * ids or texts; tab, line feed and carriage return are allowed (texts keep their line breaks).
 */
export function controlCharacterIndex(value: string): number {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) return i;
  }
  return -1;
}

/** The refusal message for a string holding a control character, shared so every field says the same. */
export const CONTROL_CHARACTER_MESSAGE =
  'must not contain NUL or other control characters (tab, line feed and carriage return are allowed)';

/** A zod string that refuses control characters (see `controlCharacterIndex`). */
export function storableString(): z.ZodString {
  return z.string().refine((s) => controlCharacterIndex(s) === -1, CONTROL_CHARACTER_MESSAGE);
}

/**
 * Parses `input` with `schema`; on failure throws the VALIDATION_* error of the first issue, naming
 * the field. `invalidCode` replaces the code of a bad (or too long) value — a missing field stays
 * VALIDATION_MISSING_FIELD. `fieldPrefix` (e.g. `contents[0]`) names where `input` sits.
 */
export function parseInput<S extends z.ZodType>(
  schema: S,
  input: unknown,
  invalidCode?: ErrorCode,
  fieldPrefix?: string,
): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  if (issue === undefined) throw new AppError(invalidCode ?? 'VALIDATION_INVALID_VALUE', 'invalid request');
  const path = fieldPrefix === undefined ? issue.path : [fieldPrefix, ...issue.path];
  const field = fieldName(path);
  if (issue.code === 'invalid_type' && /received undefined/.test(issue.message)) {
    throw new AppError('VALIDATION_MISSING_FIELD', `${field} is required`);
  }
  if (issue.code === 'too_big' && issue.origin === 'string') {
    throw new AppError(
      invalidCode ?? 'VALIDATION_TOO_LONG',
      `${field} must be at most ${String(issue.maximum)} characters`,
    );
  }
  throw new AppError(invalidCode ?? 'VALIDATION_INVALID_VALUE', `${field}: ${issue.message}`);
}
