/**
 * Turns a zod validation failure into the catalogue's VALIDATION_* error, naming the field, so
 * every request body is validated the same way and bad input never becomes a 500.
 */
import type { z } from 'zod';
import { AppError, type ErrorCode } from './app-error.js';

function fieldName(path: readonly PropertyKey[]): string {
  return path.length === 0
    ? 'body'
    : path
        .map((p) => (typeof p === 'number' ? `[${p}]` : String(p)))
        .join('.')
        .replace(/\.\[/g, '[');
}

/** Parses `input` with `schema`; on failure throws the VALIDATION_* (or `codeOverride`) error of the first issue. */
export function parseInput<S extends z.ZodType>(
  schema: S,
  input: unknown,
  codeOverride?: ErrorCode,
): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  if (issue === undefined) throw new AppError(codeOverride ?? 'VALIDATION_INVALID_VALUE', 'invalid request');
  const field = fieldName(issue.path);
  if (issue.code === 'invalid_type' && /received undefined/.test(issue.message)) {
    throw new AppError(codeOverride ?? 'VALIDATION_MISSING_FIELD', `${field} is required`);
  }
  if (issue.code === 'too_big' && issue.origin === 'string') {
    throw new AppError(
      codeOverride ?? 'VALIDATION_TOO_LONG',
      `${field} must be at most ${String(issue.maximum)} characters`,
    );
  }
  throw new AppError(codeOverride ?? 'VALIDATION_INVALID_VALUE', `${field}: ${issue.message}`);
}
