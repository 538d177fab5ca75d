/**
 * Schemas of the OpenAI-compatible routes (openai.routes.ts). Their errors are documented in
 * OpenAI's shape (`{error: {message, type, param, code}}`), which is what they answer.
 */
import type { FastifySchema } from 'fastify';
import { z } from 'zod';
import { AUDIO_FORMATS } from '../../audio/formats/registry.js';
import { OPENAI_MODELS, SPEED_MAX, SPEED_MIN } from '../../openai/speech-request.js';
import type { ErrorCode } from '../../errors/app-error.js';
import { route } from '../route-schema.js';

/** OpenAI's error object, naming the catalogue codes one status may carry. */
function openAiErrorSchema(status: number, codes: readonly string[]): z.ZodType {
  return z
    .object({
      error: z.object({
        message: z.string().describe('What went wrong, for people'),
        type: z.string().describe('OpenAI error type: invalid_request_error, authentication_error, …'),
        param: z.string().nullable().describe('The request field at fault, when one is'),
        code: z.enum(codes as [string, ...string[]]).describe('A code of the error catalogue'),
      }),
    })
    .describe(`${codes.join(', ')} (HTTP ${status})`);
}

/** `route(doc)` with its error answers in OpenAI's shape. */
function openAiRoute(doc: Parameters<typeof route>[0], security?: FastifySchema['security']): FastifySchema {
  const schema = route(doc);
  const response = Object.fromEntries(
    Object.entries(schema.response as Record<string, unknown>).map(([status, answer]) => {
      if (Number(status) < 400) return [status, answer];
      const code = (answer as z.ZodObject<{ code: z.ZodEnum }>).shape.code;
      return [status, openAiErrorSchema(Number(status), code.options as string[])];
    }),
  );
  return { ...schema, response, ...(security !== undefined && { security }) };
}

const speechBody = z.object({
  model: z
    .string()
    .optional()
    .describe(`${OPENAI_MODELS.join(', ')} or an engine's name (GET /v1/models); default tts-1`),
  input: z
    .string()
    .describe('The text to speak (at most OPENAI_INPUT_MAX_CHARS characters, 4096 by default)'),
  voice: z
    .string()
    .describe(
      "A voice id, an engine voice such as espeak:en-us+f3, one of OpenAI's voice names (alloy, …), or the name of one of your voices",
    ),
  response_format: z
    .string()
    .optional()
    .describe(`${[...AUDIO_FORMATS.keys()].join(' | ')} (default mp3); aac is refused with 400`),
  speed: z
    .number()
    .min(SPEED_MIN)
    .max(SPEED_MAX)
    .optional()
    .describe('Tempo, 2.0 = twice as fast; mapped to speechRate 1/speed, clamped to 0.5–2'),
  instructions: z.string().optional().describe('Passed to engines that take them (remote OpenAI endpoints)'),
  stream_format: z.enum(['audio', 'sse']).optional().describe('audio (default) or sse'),
});

const AUDIO_CONTENT = Object.fromEntries(
  [...AUDIO_FORMATS.values()].map((f) => [
    f.contentType,
    { schema: { type: 'string', contentMediaType: f.contentType } },
  ]),
);

const speechErrors: ErrorCode[] = [
  'VALIDATION_MISSING_FIELD',
  'VALIDATION_INVALID_VALUE',
  'VALIDATION_TOO_LONG',
  'TTS_TEXT_EMPTY',
  'UNSUPPORTED_LANGUAGE',
  'VOICE_NOT_FOUND',
  'VOICE_CREATING',
  'NO_WORKER_AVAILABLE',
  'TTS_GENERATE_FAILED',
  'BILLING_QUOTA_EXCEEDED',
];

/** A key is optional on the lists: without one they list public entries only. */
const optionalKey: Array<Record<string, string[]>> = [{ apiKey: [] }, {}];

export const openAiSchemas = {
  speech: openAiRoute({
    summary: 'Synthesise speech (OpenAI-compatible)',
    description:
      "OpenAI's speech request. Recorded, billed and queued like a one-shot synthesis; the audio streams (chunked) while it is generated. " +
      'mp3 is the service’s 320 kbps 44.1 kHz MP3; opus (Ogg), flac, wav and pcm (s16le mono) are 24 kHz. ' +
      'stream_format sse answers speech.audio.delta events (base64 audio) then speech.audio.done with usage (characters).',
    tags: ['openai'],
    access: 'apiKey',
    body: speechBody,
    ok: {
      '200': {
        description: 'The audio in the format asked for, or an event stream',
        content: { ...AUDIO_CONTENT, 'text/event-stream': { schema: { type: 'string' } } },
      },
    },
    errors: speechErrors,
  }),
  models: openAiRoute(
    {
      summary: 'List models (OpenAI shape)',
      description:
        'OpenAI model names and the engines’ names, as {object: "list", data: [{id, object, created, owned_by}]}.',
      tags: ['openai'],
      access: 'none',
      ok: z.object({
        object: z.literal('list'),
        data: z.array(
          z.object({ id: z.string(), object: z.literal('model'), created: z.int(), owned_by: z.string() }),
        ),
      }),
      errors: ['AUTH_UNAUTHORIZED'],
    },
    optionalKey,
  ),
  audioModels: openAiRoute(
    {
      summary: 'List speech models',
      description: 'The model names `model` accepts, as {models: [{id}]} (what Open WebUI reads).',
      tags: ['openai'],
      access: 'none',
      ok: z.object({ models: z.array(z.object({ id: z.string() })) }),
      errors: ['AUTH_UNAUTHORIZED'],
    },
    optionalKey,
  ),
  audioVoices: openAiRoute(
    {
      summary: 'List voices',
      description:
        "The voices `voice` accepts, as {voices: [{id, name}]}: with a key, the account's voices first; always OpenAI's voice names and every engine voice (`<engine>:<voice>`). " +
        'Without a key only public entries (or 401 when OPENAI_PUBLIC_LISTS=false).',
      tags: ['openai'],
      access: 'none',
      ok: z.object({ voices: z.array(z.object({ id: z.string(), name: z.string() })) }),
      errors: ['AUTH_UNAUTHORIZED'],
    },
    optionalKey,
  ),
};
