/**
 * One-shot synthesis routes (the hosted API's sync endpoints), bearer-protected:
 *  - `POST /api/tts/simple-generate`: JSON `{status, message, data:{id, audio, streamUrl?, credit_used}}`
 *    once the audio is stored, or with `direct_stream: true` the MP3 bytes themselves;
 *  - `GET /api/tts/simple-generate.mp3`: the same fields as query parameters, always the MP3 bytes.
 * The MP3 answer is chunked audio/mpeg with `X-Service-Audio-Id` and `X-Service-Response-Data` (and
 * their hosted-API names `X-Reecho-Audio-Id`, `X-Reecho-Response-Data`), the
 * only responses that carry these headers. Errors before the first byte are
 * JSON; a failure after it cuts the stream.
 */
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  parseOneShotBody,
  parseOneShotQuery,
  type OneShotRequest,
  type OneShotService,
} from '../../tasks/one-shot/one-shot.js';
import { accountOf } from '../auth.js';
import { ok } from '../envelope.js';
import { clientGone } from '../response-signals.js';
import { oneShotSchemas } from './simple-generate.schemas.js';

async function answer(
  oneShot: OneShotService,
  request: FastifyRequest,
  reply: FastifyReply,
  input: OneShotRequest,
) {
  const accountId = accountOf(request).id;
  const signal = clientGone(reply);
  const task = await oneShot.start(accountId, input);
  let audio: Awaited<ReturnType<OneShotService['audio']>>;
  try {
    if (!input.directStream) return ok(await oneShot.result(accountId, task, input.stream, signal));
    audio = await oneShot.audio(accountId, task, signal);
  } catch (err) {
    // The client left while waiting: nobody to answer (the task itself goes on).
    if (signal.aborted) return reply.hijack();
    throw err;
  }
  const { info, body } = audio;
  void reply
    .header('Content-Type', 'audio/mpeg')
    .header('Cache-Control', 'no-store')
    .header('X-Service-Audio-Id', info.id)
    .header('X-Service-Response-Data', JSON.stringify(info))
    // The hosted API's names of the same headers, which its clients read (docs/compatibility.md).
    .header('X-Reecho-Audio-Id', info.id)
    .header('X-Reecho-Response-Data', JSON.stringify(info));
  // No Content-Length: the length is unknown until the encoder is flushed, so the reply is chunked.
  return reply.send(Readable.from(body, { objectMode: false }));
}

export function simpleGenerateRoutes(oneShot: OneShotService) {
  return async (app: FastifyInstance): Promise<void> => {
    app.post('/api/tts/simple-generate', { schema: oneShotSchemas.post }, async (request, reply) =>
      answer(oneShot, request, reply, parseOneShotBody(request.body)),
    );

    app.route<{ Querystring: Record<string, unknown> }>({
      method: 'GET',
      url: '/api/tts/simple-generate.mp3',
      schema: oneShotSchemas.get,
      // HEAD must not start a synthesis.
      exposeHeadRoute: false,
      handler: async (request, reply) => answer(oneShot, request, reply, parseOneShotQuery(request.query)),
    });
  };
}
