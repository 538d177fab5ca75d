/**
 * Errors of the OpenAI-compatible routes (`/v1/…`) in OpenAI's shape, which its SDKs and the
 * tools built on them parse: `{error: {message, type, param, code}}`, with the same HTTP status
 * and request-id header as everywhere else. The one error handler renders every error as the
 * service's body first; this hook re-shapes that body for `/v1` paths only, so framework errors
 * (bad JSON, unknown path, rate limits, bad keys) are covered as well as the route's own.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ErrorBody } from './error-handler.js';

/** Whether `url` (path and query) is on the OpenAI-compatible API. */
export function isOpenAiPath(url: string): boolean {
  return url === '/v1' || url.startsWith('/v1/') || url.startsWith('/v1?');
}

/** OpenAI's error object. */
export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string };
}

/** OpenAI's error types by status. */
function errorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/** The request fields error messages start with when a field is at fault. */
const PARAM = /^(model|input|voice|response_format|speed|instructions|stream_format)\b/;

/** The service's error body as OpenAI's; `code` keeps the catalogue's code. */
export function openAiErrorBody(body: ErrorBody): OpenAiErrorBody {
  return {
    error: {
      message: body.message,
      type: errorType(body.status),
      param: PARAM.exec(body.message)?.[1] ?? null,
      code: body.code,
    },
  };
}

function isErrorBody(value: unknown): value is ErrorBody {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return typeof v.status === 'number' && typeof v.code === 'string' && typeof v.message === 'string';
}

/** Adds the hook that re-shapes error bodies on `/v1` paths (register before any route). */
export function registerOpenAiErrors(app: FastifyInstance): void {
  app.addHook('onSend', async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    if (reply.statusCode < 400 || typeof payload !== 'string' || !isOpenAiPath(request.url)) return payload;
    let body: unknown;
    try {
      body = JSON.parse(payload);
    } catch {
      return payload;
    }
    return isErrorBody(body) ? JSON.stringify(openAiErrorBody(body)) : payload;
  });
}
