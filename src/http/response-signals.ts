/**
 * AbortSignals tied to a reply's connection, the one place routes get them from:
 * `responseClosed` fires when the response is closed for any reason (finished or not: stream
 * readers then let go of their session), `clientGone` only when the client went away before the
 * response was sent in full (work for an answer nobody will read stops).
 */
import type { FastifyReply } from 'fastify';

/** Fires when the response is closed: finished, or the client went away. */
export function responseClosed(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once('close', () => controller.abort(new Error('client closed the connection')));
  return controller.signal;
}

/** Fires when the client goes away before the response has been sent in full. */
export function clientGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) controller.abort(new Error('the client closed the connection'));
  });
  return controller.signal;
}
