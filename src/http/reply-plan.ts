/**
 * Writes a stream response description (status, headers, body stream) with Fastify. `reply.send`
 * pipes the body with socket backpressure and destroys it when the client goes away; a body that
 * fails after the headers went out cuts the connection in the error handler.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyReply } from 'fastify';
import type { ConditionalHeaders } from '../stream/range-plan.js';
import type { StreamResponse } from '../stream/stream-service.js';

/** The header fields the range planner decides on: Range, If-Range and the RFC 9110 §13.1 preconditions. */
export interface PlannedRequestHeaders extends ConditionalHeaders {
  rangeHeader: string | undefined;
  ifRangeHeader: string | undefined;
}

/** One header value; a repeated field is joined with ", " (a list field's meaning, RFC 9110 §5.3). */
function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

/** Reads Range, If-Range, If-Match, If-None-Match, If-Modified-Since and If-Unmodified-Since of a request. */
export function plannedRequestHeaders(headers: IncomingHttpHeaders): PlannedRequestHeaders {
  return {
    rangeHeader: headerValue(headers.range),
    ifRangeHeader: headerValue(headers['if-range']),
    ifMatchHeader: headerValue(headers['if-match']),
    ifNoneMatchHeader: headerValue(headers['if-none-match']),
    ifModifiedSinceHeader: headerValue(headers['if-modified-since']),
    ifUnmodifiedSinceHeader: headerValue(headers['if-unmodified-since']),
  };
}

/** Sends `response` on `reply`; returns the reply for an async route handler. */
export function sendStreamResponse(reply: FastifyReply, response: StreamResponse): FastifyReply {
  reply.status(response.status).headers(response.headers);
  const { body } = response;
  if (body === null) return reply.send();
  // Fastify sets the headers on the raw response and writes them with the first byte. A body that
  // fails before that becomes a JSON error: drop the audio headers first (this listener runs before
  // Fastify's own), so the error body does not go out under Content-Range, ETag or Content-Disposition.
  body.once('error', () => {
    if (reply.raw.headersSent) return;
    for (const name of Object.keys(response.headers)) {
      reply.removeHeader(name);
      reply.raw.removeHeader(name);
    }
  });
  return reply.send(body);
}
