/**
 * The one place where errors become HTTP responses: AppErrors render as the spec's error body;
 * framework errors (bad JSON, body too large, rate limit) are mapped to catalogue codes; anything
 * else is logged and answered as a reportable 500 without leaking internals.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, isAppError } from '../errors/app-error.js';

export interface ErrorBody {
  status: number;
  code: string;
  message: string;
  requestId?: string;
}

/** Maps any thrown value to an AppError; unknown failures become SYSTEM_INTERNAL_ERROR. */
export function toAppError(err: unknown): AppError {
  if (isAppError(err)) return err;
  const fe = err as Partial<FastifyError> & { statusCode?: number };
  switch (fe.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError('UPLOAD_TOO_LARGE', 'request body is too large');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError('VALIDATION_INVALID_FORMAT', 'unsupported Content-Type');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new AppError(
        'VALIDATION_INVALID_FORMAT',
        'request body is empty but Content-Type is application/json',
      );
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new AppError('VALIDATION_INVALID_FORMAT', 'request body is not valid JSON');
    case 'FST_ERR_VALIDATION':
      return new AppError('VALIDATION_INVALID_VALUE', fe.message ?? 'invalid request');
    default:
      break;
  }
  if (err instanceof SyntaxError && fe.statusCode === 400) {
    return new AppError('VALIDATION_INVALID_FORMAT', 'request body is not valid JSON');
  }
  const status = fe.statusCode;
  if (status === 429) return new AppError('RATE_LIMIT_EXCEEDED', fe.message ?? 'rate limit exceeded');
  if (status === 413) return new AppError('UPLOAD_TOO_LARGE', 'request body is too large');
  if (status === 404) return new AppError('RESOURCE_NOT_FOUND', 'resource not found');
  if (status !== undefined && status >= 400 && status < 500) {
    return new AppError('VALIDATION_INVALID_FORMAT', fe.message ?? 'bad request');
  }
  return new AppError('SYSTEM_INTERNAL_ERROR', 'internal error', { cause: err });
}

/** The JSON error body of spec §2.6 for `err`; `requestId` only on the reportable tier. */
export function errorBody(err: AppError, requestId: string): ErrorBody {
  const body: ErrorBody = { status: err.status, code: err.code, message: err.message };
  if (err.reportable) body.requestId = requestId;
  return body;
}

/** Fastify error handler: renders every error the same way. */
export function handleError(err: unknown, request: FastifyRequest, reply: FastifyReply): void {
  const appError = toAppError(err);
  if (appError.code === 'SYSTEM_INTERNAL_ERROR') request.log.error({ err }, 'unhandled error');
  else if (appError.status >= 500)
    request.log.error({ err: appError, cause: appError.cause }, appError.message);
  if (reply.sent || reply.raw.headersSent) {
    // Bytes already flowed (spec 4.1 rule 4): cut the connection instead of appending a JSON body.
    reply.raw.destroy();
    return;
  }
  void reply
    .status(appError.status)
    .headers(appError.headers)
    .type('application/json; charset=utf-8')
    .send(errorBody(appError, request.id));
}
