/**
 * Writes a stream response description (status, headers, body stream) with Fastify. `reply.send`
 * pipes the body with socket backpressure and destroys it when the client goes away; a body that
 * fails after the headers went out cuts the connection in the error handler (spec 4.1 rule 4).
 */
import type { FastifyReply } from 'fastify';
import type { StreamResponse } from '../stream/stream-service.js';

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
