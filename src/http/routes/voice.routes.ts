/**
 * Voice routes under /api/voice and the legacy alias /api/tts/voice (every path), including
 * migrateV3 (`{"status":200}` and no data) and migrateV2.
 */
import { Transform, type Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { AppError } from '../../errors/app-error.js';
import type { VoiceService } from '../../voices/voice-service.js';
import { accountOf } from '../auth.js';
import { ok, okNoData } from '../envelope.js';
import { voiceSchemas } from './voice.schemas.js';

interface IdParams {
  id: string;
}

/** Fails the upload with 413 as soon as more than `max` bytes arrive, without buffering them. */
function limitBytes(max: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      seen += chunk.length;
      if (seen > max) done(new AppError('UPLOAD_TOO_LARGE', `upload exceeds ${max} bytes`));
      else done(null, chunk);
    },
  });
}

export function voiceRoutes(voices: VoiceService, uploadLimitBytes: number) {
  return async (app: FastifyInstance): Promise<void> => {
    // Archives stream through to storage; the size limit is enforced while streaming.
    app.addContentTypeParser(['application/octet-stream', 'application/zip'], (_req, payload, done) => {
      done(null, payload);
    });

    for (const prefix of ['/api/voice', '/api/tts/voice']) {
      app.post(prefix, { schema: voiceSchemas.create }, async (request) =>
        ok(await voices.create(accountOf(request).id, request.body)),
      );

      app.get<{ Querystring: { limit?: string; offset?: string } }>(
        prefix,
        { schema: voiceSchemas.list },
        async (request) => {
          const { items, total } = await voices.list(accountOf(request).id, request.query);
          return { ...ok(items), total };
        },
      );

      app.get<{ Params: IdParams }>(`${prefix}/:id`, { schema: voiceSchemas.get }, async (request) =>
        ok(await voices.get(accountOf(request).id, request.params.id)),
      );

      app.delete<{ Params: IdParams }>(`${prefix}/:id`, { schema: voiceSchemas.delete }, async (request) => {
        await voices.delete(accountOf(request).id, request.params.id);
        return okNoData();
      });

      app.put<{ Params: IdParams }>(
        `${prefix}/:id/lora`,
        { schema: voiceSchemas.uploadLora },
        async (request) => {
          const body = request.body as Readable | null | undefined;
          // JSON bodies (`null`, objects) are not archives: only the stream parsers give a Readable.
          if (body === undefined || body === null || typeof (body as Partial<Readable>).pipe !== 'function') {
            throw new AppError(
              'VALIDATION_INVALID_FORMAT',
              'send the archive as application/zip or application/octet-stream',
            );
          }
          const limited = body.pipe(limitBytes(uploadLimitBytes));
          body.on('error', (err) => limited.destroy(err));
          const length = request.headers['content-length'];
          const declared = length === undefined ? undefined : Number(length);
          return ok(await voices.uploadLora(accountOf(request).id, request.params.id, limited, declared));
        },
      );

      app.post<{ Params: IdParams }>(
        `${prefix}/:id/migrateV3`,
        { schema: voiceSchemas.migrateV3 },
        async (request) => {
          await voices.migrate(accountOf(request).id, request.params.id, 'v3.0');
          return { status: 200 };
        },
      );

      app.post<{ Params: IdParams }>(
        `${prefix}/:id/migrateV2`,
        { schema: voiceSchemas.migrateV2 },
        async (request) => {
          await voices.migrate(accountOf(request).id, request.params.id, 'v2.0');
          return { status: 200 };
        },
      );
    }
  };
}
