/**
 * Schemas of the voice routes (voice.routes.ts), the same under /api/voice and /api/tts/voice. The
 * voice record is shared with the task and operator routes that answer voices.
 */
import { z } from 'zod';
import { voiceBindingSchema } from '../../audio/engines/engine-registry.js';
import { createVoiceSchema, VOICE_VERSIONS } from '../../voices/voice-service.js';
import { envelope, idParams, okNoData, page, route, timestamp } from '../route-schema.js';
import { pageSchema } from '../../common/paging.js';

export const voiceSchema = z.object({
  id: z.string(),
  idForGenerate: z.string().describe('The id to put in voiceId'),
  name: z.string(),
  status: z.enum(['creating', 'ready', 'failed']),
  version: z.enum(VOICE_VERSIONS as ['v1.0', 'v2.0', 'v3.0', 'v4.0']),
  from: z.literal('user'),
  language: z.string(),
  engine: voiceBindingSchema,
  metadata: z.object({
    description: z.string(),
    withLora: z.boolean(),
    prompts: z.array(z.object({ id: z.string(), name: z.string() })),
  }),
  createdAt: timestamp,
  updatedAt: timestamp,
});

const createVoiceBody = createVoiceSchema.meta({
  examples: [
    { name: 'Narrator', language: 'en', engine: { engine: 'espeak', voice: 'en-us', variant: 'f3' } },
  ],
});

/** Schemas of the voice routes (the same under /api/voice and /api/tts/voice). */
export const voiceSchemas = {
  create: route({
    summary: 'Create a voice',
    description:
      'A v3.0 voice (v4.0 when asked) bound to an engine voice; without `engine`, the embedded engine’s voice for `language`. `language` is kept when it is a language tag the engine speaks; `auto`, and any language it does not know, is kept as `auto` (the voice then speaks with the embedded English voice as its prior), as the hosted API does.',
    tags: ['voices'],
    access: 'apiKey',
    body: createVoiceBody,
    ok: envelope(voiceSchema),
    errors: [
      'VALIDATION_MISSING_FIELD',
      'VALIDATION_INVALID_VALUE',
      'VALIDATION_TOO_LONG',
      'VOICE_MODEL_VERSION_INVALID',
      'BILLING_QUOTA_EXCEEDED',
    ],
  }),
  list: route({
    summary: 'List voices',
    tags: ['voices'],
    access: 'apiKey',
    querystring: pageSchema,
    ok: page(voiceSchema),
    errors: ['VALIDATION_INVALID_VALUE'],
  }),
  get: route({
    summary: 'Get a voice',
    tags: ['voices'],
    access: 'apiKey',
    params: idParams,
    ok: envelope(voiceSchema),
    errors: ['VOICE_NOT_FOUND'],
  }),
  delete: route({
    summary: 'Delete a voice',
    description: 'Tasks that used it keep their audio and list the voice as deleted.',
    tags: ['voices'],
    access: 'apiKey',
    params: idParams,
    ok: okNoData,
    errors: ['VOICE_NOT_FOUND', 'VOICE_CREATING'],
  }),
  uploadLora: route({
    summary: 'Upload professional-cloning (LoRA) artifacts',
    description:
      'The archive as application/zip or application/octet-stream, streamed to storage; beyond UPLOAD_LIMIT_BYTES the upload fails with 413 as soon as the limit is crossed, and beyond the account’s upload bytes (ACCOUNT_MAX_UPLOAD_BYTES, the voice’s previous archive not counted) with 403 BILLING_QUOTA_EXCEEDED, before reading when Content-Length says so. A failed upload leaves the voice’s previous archive in place.',
    tags: ['voices'],
    access: 'apiKey',
    params: idParams,
    ok: envelope(voiceSchema),
    errors: [
      'VOICE_NOT_FOUND',
      'VALIDATION_INVALID_FORMAT',
      'UPLOAD_TOO_LARGE',
      'REQUEST_UNSUPPORTED_MEDIA_TYPE',
      'BILLING_QUOTA_EXCEEDED',
    ],
  }),
  migrateV3: route({
    summary: 'Migrate a voice to v3.0',
    description: 'Answers `{"status":200}` without data once the voice is v3.0.',
    tags: ['voices'],
    access: 'apiKey',
    params: idParams,
    ok: okNoData,
    errors: ['VOICE_NOT_FOUND', 'VOICE_MIGRATE_NOT_NEEDED', 'VOICE_MIGRATE_NOT_ALLOWED', 'VOICE_CREATING'],
  }),
  migrateV2: route({
    summary: 'Migrate a voice to v2.0',
    description: 'The same flow as migrateV3, one version lower.',
    tags: ['voices'],
    access: 'apiKey',
    params: idParams,
    ok: okNoData,
    errors: ['VOICE_NOT_FOUND', 'VOICE_MIGRATE_NOT_NEEDED', 'VOICE_MIGRATE_NOT_ALLOWED', 'VOICE_CREATING'],
  }),
};
