/**
 * The one place where errors become HTTP responses: AppErrors render as the spec's error body;
 * framework errors (bad JSON, body too large, rate limit, bad URL encoding, unsupported media type)
 * are mapped to catalogue codes; anything else is logged and answered as a reportable 500 without
 * leaking internals. Errors Node's HTTP parser raises before a request exists (malformed request,
 * headers or request line too large, timeouts) are rendered here too, as raw HTTP on the socket
 * with the same body and request-id header.
 */
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyBaseLogger, FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, isAppError } from '../errors/app-error.js';
import { dependencyUnavailable, isDependencyUnavailable } from '../errors/dependency-unavailable.js';

/** The response header that carries every request's id. */
export const REQUEST_ID_HEADER = 'X-Service-App-Request-Id';

/** Longest request target (path and query) the service reads; longer ones are 414 (Node has no such limit). */
export const MAX_URL_LENGTH = 8 * 1024;

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
      return new AppError(
        'REQUEST_UNSUPPORTED_MEDIA_TYPE',
        'this route does not accept the Content-Type of the request (JSON routes take application/json)',
      );
    case 'FST_ERR_BAD_URL':
      return new AppError('VALIDATION_INVALID_FORMAT', 'the URL path is not valid percent-encoded UTF-8');
    case 'FST_ERR_MAX_PARAM_LENGTH':
      // A path segment longer than any id names nothing: the same 404 as an unknown resource.
      return new AppError('RESOURCE_NOT_FOUND', 'resource not found (a path segment is too long)');
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
  if (status === 408) return requestTimeout();
  if (status === 414) return uriTooLong();
  if (status === 415) return new AppError('REQUEST_UNSUPPORTED_MEDIA_TYPE', 'unsupported Content-Type');
  if (status === 417) return expectationFailed();
  if (status === 431) return headersTooLarge();
  if (status !== undefined && status >= 400 && status < 500) {
    return new AppError('VALIDATION_INVALID_FORMAT', fe.message ?? 'bad request');
  }
  // PostgreSQL, Redis or the S3 store unreachable (scale-out faults): 503 + Retry-After, not 500.
  if (isDependencyUnavailable(err)) return dependencyUnavailable(err);
  return new AppError('SYSTEM_INTERNAL_ERROR', 'internal error', { cause: err });
}

/** The JSON error body `{status, code, message, requestId}` for `err`; `requestId` only on the reportable tier. */
export function errorBody(err: AppError, requestId: string): ErrorBody {
  const body: ErrorBody = { status: err.status, code: err.code, message: err.message };
  if (err.reportable) body.requestId = requestId;
  return body;
}

/** 414: the request target is longer than MAX_URL_LENGTH. */
export function uriTooLong(): AppError {
  return new AppError('REQUEST_URI_TOO_LONG', `the request URL is longer than ${MAX_URL_LENGTH} characters`);
}

/** 417: an `Expect` other than 100-continue (RFC 9110 §10.1.1). */
export function expectationFailed(): AppError {
  return new AppError(
    'REQUEST_EXPECTATION_FAILED',
    'the only expectation this service meets is "Expect: 100-continue"',
    { headers: { connection: 'close' } },
  );
}

function headersTooLarge(): AppError {
  return new AppError('REQUEST_HEADERS_TOO_LARGE', 'the request headers are too large');
}

function requestTimeout(): AppError {
  return new AppError('REQUEST_TIMEOUT', 'the request was not received in time');
}

/** Fastify error handler: renders every error the same way. */
export function handleError(err: unknown, request: FastifyRequest, reply: FastifyReply): void {
  const appError = toAppError(err);
  // The err serializer (log-redaction.ts) follows `cause` and drops SQL, parameters and row data.
  if (appError.code === 'SYSTEM_INTERNAL_ERROR') request.log.error({ err }, 'unhandled error');
  else if (appError.status >= 500) request.log.error({ err: appError }, appError.message);
  if (reply.sent || reply.raw.headersSent) {
    // Bytes already flowed: cut the connection instead of appending a JSON body.
    reply.raw.destroy();
    return;
  }
  void reply
    .status(appError.status)
    .headers(appError.headers)
    .type('application/json; charset=utf-8')
    .send(errorBody(appError, request.id));
}

/**
 * Fastify `frameworkErrors` handler (bad URL encoding, an over-long path segment): these skip the
 * onRequest hooks, so the request-id header is set here before the one error handler renders.
 */
export function handleFrameworkError(err: unknown, request: FastifyRequest, reply: FastifyReply): void {
  // Fastify writes no completion line for these: the request's one log line is this one.
  request.log.info({ req: request }, 'refused a request Fastify could not route');
  reply.header(REQUEST_ID_HEADER, request.id);
  reply.header('X-Content-Type-Options', 'nosniff');
  handleError(
    request.raw.url !== undefined && request.raw.url.length > MAX_URL_LENGTH ? uriTooLong() : err,
    request,
    reply,
  );
}

/** A socket error Node's parser reports (`clientError`), with the bytes it could not parse. */
export interface ClientError extends Error {
  code?: string;
  rawPacket?: Buffer;
}

/**
 * True when the bytes that overflowed Node's header limit show a request line longer than
 * MAX_URL_LENGTH (or one that never ends): the URL is what is too large, so 414 rather than 431.
 */
function requestLineTooLong(rawPacket: Buffer | undefined): boolean {
  if (rawPacket === undefined) return false;
  const end = rawPacket.indexOf('\r\n');
  const line = rawPacket.subarray(0, end < 0 ? rawPacket.length : end).toString('latin1');
  if (!/^[A-Za-z]+ /.test(line)) return false;
  return end < 0 || line.length > MAX_URL_LENGTH;
}

/** The catalogue error for a socket-level parse error or timeout. */
export function clientErrorToAppError(err: ClientError): AppError {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return requestLineTooLong(err.rawPacket) ? uriTooLong() : headersTooLarge();
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return requestTimeout();
    case 'HPE_INVALID_TRANSFER_ENCODING':
      return new AppError(
        'VALIDATION_INVALID_FORMAT',
        'the Transfer-Encoding of the request is not valid (the only one this service reads is "chunked")',
      );
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return new AppError('UPLOAD_TOO_LARGE', 'the chunk extensions of the request body are too large');
    default:
      return new AppError('VALIDATION_INVALID_FORMAT', 'the request is not valid HTTP/1.1');
  }
}

/** A complete HTTP/1.1 error response (error body, request-id header), for writing to a raw socket. */
export function rawErrorResponse(err: AppError, requestId: string): string {
  const body = JSON.stringify(errorBody(err, requestId));
  const headers = {
    ...err.headers,
    [REQUEST_ID_HEADER]: requestId,
    'Content-Type': 'application/json; charset=utf-8',
    'X-Content-Type-Options': 'nosniff',
    'Content-Length': String(Buffer.byteLength(body)),
    Connection: 'close',
  };
  const head = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
  return `HTTP/1.1 ${err.status} ${STATUS_CODES[err.status] ?? 'Error'}\r\n${head.join('')}\r\n${body}`;
}

/**
 * Fastify `clientErrorHandler`: Node's parser refused the bytes before any request existed. Answers
 * with the spec's error body and a fresh request id (logged with the error, so it can be quoted),
 * unless a response is already under way on the socket; then the socket is closed.
 */
export function answerClientError(log: FastifyBaseLogger, err: ClientError, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const requestId = randomUUID();
  const appError = clientErrorToAppError(err);
  // `err` goes through the allowlist serializer: its rawPacket (request headers) is never logged.
  log.info({ reqId: requestId, err, status: appError.status }, 'refused a malformed request');
  // As Node's own handler: write only when no response on this socket has sent its head yet.
  const inFlight = (socket as Duplex & { _httpMessage?: { _headerSent?: boolean } | null })._httpMessage;
  if (socket.writable && inFlight?._headerSent !== true) socket.write(rawErrorResponse(appError, requestId));
  socket.destroy();
}
