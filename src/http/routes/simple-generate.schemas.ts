/**
 * Schemas of the one-shot synthesis routes (simple-generate.routes.ts).
 */
import { z } from 'zod';
import type { ErrorCode } from '../../errors/app-error.js';
import { contentItemSchema } from '../../tasks/requests/generate-request.js';
import { envelope, MP3_CONTENT, route } from '../route-schema.js';

const oneShotFields = contentItemSchema.omit({ type: true }).extend({
  stream: z.boolean().optional().describe('Include streamUrl in the JSON answer'),
  direct_stream: z.boolean().optional().describe('Answer with the MP3 bytes instead of JSON'),
});

const oneShotResult = z.object({
  id: z.string(),
  audio: z.string().describe('The stored MP3'),
  streamUrl: z.string().optional(),
  credit_used: z.number(),
  srt: z.string().optional().describe('SRT subtitles URL, when the request asked for srt: true'),
});

const oneShotErrors: ErrorCode[] = [
  'VALIDATION_MISSING_FIELD',
  'VALIDATION_INVALID_VALUE',
  'VALIDATION_TOO_LONG',
  'TTS_TEXT_EMPTY',
  'TTS_CONTENTS_INVALID',
  'UNSUPPORTED_LANGUAGE',
  'VOICE_NOT_FOUND',
  'NO_WORKER_AVAILABLE',
  'TTS_GENERATE_FAILED',
  'BILLING_QUOTA_EXCEEDED',
];

const oneShotHeaders =
  'The MP3 answer is chunked audio/mpeg with X-Service-Audio-Id and X-Service-Response-Data (and the hosted names X-Reecho-Audio-Id, X-Reecho-Response-Data; with srt: true both carry the SRT subtitles URL as `srt`); a failure after the first byte cuts the stream.';

/** Schemas of the one-shot synthesis routes. */
export const oneShotSchemas = {
  post: route({
    summary: 'Synthesise one text (synchronous)',
    description: `Waits for the audio and answers its URL, or with direct_stream the MP3 bytes as they are encoded. Generation fields are taken leniently (a value it cannot use is dropped). ${oneShotHeaders}`,
    tags: ['one-shot'],
    access: 'apiKey',
    body: oneShotFields.meta({ examples: [{ text: 'Hello from voicegen.', voiceId: 'VOICE_ID' }] }),
    ok: {
      '200': {
        description: 'JSON, or the MP3 with direct_stream',
        content: {
          'application/json': { schema: envelope(oneShotResult) },
          ...MP3_CONTENT,
        },
      },
    },
    errors: oneShotErrors,
  }),
  get: route({
    summary: 'Synthesise one text to MP3 (GET)',
    description: `The POST form's fields as query parameters (numbers, true/false/1/0, comma-separated emo_switch); always the MP3 bytes. ${oneShotHeaders}`,
    tags: ['one-shot'],
    access: 'apiKey',
    querystring: z.looseObject({
      text: z.string(),
      voiceId: z.string(),
      speechRate: z.string().optional(),
      language: z.string().optional(),
      preset: z.string().optional(),
      seed: z.string().optional(),
    }),
    ok: { '200': { description: 'The MP3, chunked, while it is encoded', content: MP3_CONTENT } },
    errors: oneShotErrors,
  }),
};
