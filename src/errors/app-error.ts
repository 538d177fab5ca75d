/**
 * The one error catalogue of the service: every error code, its HTTP status and whether it is
 * "reportable" (its body carries `requestId`). Domain code throws `AppError`; the HTTP layer's
 * single error handler renders it. Domain modules never build HTTP replies themselves.
 */

interface CodeInfo {
  readonly status: number;
  /** Reportable-tier errors carry `requestId` in the body. */
  readonly reportable?: boolean;
}

export const ERROR_CATALOGUE = {
  VALIDATION_MISSING_FIELD: { status: 400 },
  VALIDATION_TOO_LONG: { status: 400 },
  VALIDATION_INVALID_VALUE: { status: 400 },
  VALIDATION_INVALID_FORMAT: { status: 400 },
  VALIDATION_CONFLICT: { status: 400 },
  TTS_TEXT_EMPTY: { status: 400 },
  TTS_CONTENTS_INVALID: { status: 400 },
  TTS_SPLITTER_INVALID: { status: 400 },
  /** The piece's language (asked for, or the script of its text) is one no voice of its voice's engine speaks. */
  UNSUPPORTED_LANGUAGE: { status: 400 },
  STREAM_NOT_READY: { status: 400, reportable: true },
  VOICE_MIGRATE_NOT_NEEDED: { status: 400 },
  VOICE_MIGRATE_NOT_ALLOWED: { status: 400 },
  VOICE_MODEL_VERSION_INVALID: { status: 400 },
  AUTH_UNAUTHORIZED: { status: 401 },
  AUTH_FORBIDDEN: { status: 403 },
  /** A per-account storage limit (splitters, voices, uploads) would be passed; nothing was written. */
  BILLING_QUOTA_EXCEEDED: { status: 403 },
  GENERATE_DELETE_IN_PROGRESS: { status: 403 },
  GENERATE_NOT_FOUND: { status: 404 },
  VOICE_NOT_FOUND: { status: 404 },
  SPLITTER_NOT_FOUND: { status: 404 },
  RESOURCE_NOT_FOUND: { status: 404 },
  VOICE_CREATING: { status: 409 },
  UPLOAD_TOO_LARGE: { status: 413 },
  /** Protocol-level refusals: the client must change how it sends, not what. */
  REQUEST_TIMEOUT: { status: 408 },
  REQUEST_URI_TOO_LONG: { status: 414 },
  REQUEST_UNSUPPORTED_MEDIA_TYPE: { status: 415 },
  REQUEST_EXPECTATION_FAILED: { status: 417 },
  REQUEST_HEADERS_TOO_LARGE: { status: 431 },
  RANGE_NOT_SATISFIABLE: { status: 416 },
  /** If-Match / If-Unmodified-Since did not hold on an audio route. */
  PRECONDITION_FAILED: { status: 412 },
  RATE_LIMIT_EXCEEDED: { status: 429, reportable: true },
  SYSTEM_INTERNAL_ERROR: { status: 500, reportable: true },
  TTS_GENERATE_FAILED: { status: 500, reportable: true },
  TTS_SPLITTER_METADATA_INVALID: { status: 500, reportable: true },
  STORAGE_UNAVAILABLE: { status: 503, reportable: true },
  NO_WORKER_AVAILABLE: { status: 503, reportable: true },
  /** The stream session caches of a node are full of sessions in use. */
  STREAM_CAPACITY_EXHAUSTED: { status: 503, reportable: true },
  /** The node is shutting down: retry (the load balancer sends it to another node). */
  SYSTEM_SHUTTING_DOWN: { status: 503, reportable: true },
} as const satisfies Record<string, CodeInfo>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

/** Looks up the HTTP status and tier of a code. */
export function describeCode(code: ErrorCode): { status: number; reportable: boolean } {
  const info: CodeInfo = ERROR_CATALOGUE[code];
  return { status: info.status, reportable: info.reportable === true || info.status >= 500 };
}

/** An expected, client-visible failure. `headers` lets e.g. 429 carry Retry-After or 416 Content-Range. */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly reportable: boolean;
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    code: ErrorCode,
    message: string,
    options?: { headers?: Record<string, string>; cause?: unknown },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    const info = describeCode(code);
    this.status = info.status;
    this.reportable = info.reportable;
    this.headers = options?.headers ?? {};
  }
}

export function isAppError(err: unknown): err is AppError {
  return err instanceof AppError;
}

/** Factories for the errors raised from many places, so messages stay consistent. */
export const errors = {
  missingField: (field: string) => new AppError('VALIDATION_MISSING_FIELD', `${field} is required`),
  tooLong: (field: string, max: number) =>
    new AppError('VALIDATION_TOO_LONG', `${field} must be at most ${max} characters`),
  invalidValue: (message: string) => new AppError('VALIDATION_INVALID_VALUE', message),
  conflict: (message: string) => new AppError('VALIDATION_CONFLICT', message),
  unauthorized: (message = 'missing or unknown credential') => new AppError('AUTH_UNAUTHORIZED', message),
  forbidden: (message = 'credential is not valid for this resource') =>
    new AppError('AUTH_FORBIDDEN', message),
  notFound: (
    code: 'GENERATE_NOT_FOUND' | 'VOICE_NOT_FOUND' | 'SPLITTER_NOT_FOUND' | 'RESOURCE_NOT_FOUND',
    what: string,
  ) => new AppError(code, `${what} not found`),
  internal: (message = 'internal error', cause?: unknown) =>
    new AppError('SYSTEM_INTERNAL_ERROR', message, { cause }),
};
