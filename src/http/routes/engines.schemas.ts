/**
 * Schemas of the engine catalogue routes (engines.routes.ts).
 */
import { z } from 'zod';
import { languageSchema } from '../../voices/voice-service.js';
import { envelope, route } from '../route-schema.js';

const genderSchema = z.enum(['female', 'male']);

export const engineInfoSchema = z.object({
  id: z.string().describe('Unique engine name: a built-in engine, or an operator-configured endpoint name'),
  provider: z.string().describe('The kind of engine: the `engine` field of its voice bindings'),
  available: z.boolean(),
  reason: z.string().optional().describe('Why it cannot be used, when unavailable'),
  description: z.string(),
  marks: z.array(z.enum(['sentence', 'word'])).describe('Timing marks its audio carries'),
  openVoices: z.boolean().describe('Voice names beyond the listed ones are accepted (the remote decides)'),
  options: z
    .array(
      z.object({
        field: z.string().describe('The binding field it sets'),
        description: z.string(),
        values: z
          .array(z.object({ id: z.string(), name: z.string(), gender: genderSchema.optional() }))
          .optional()
          .describe('Every value it accepts, when it is a choice'),
        min: z.number().optional(),
        max: z.number().optional(),
      }),
    )
    .describe('Binding settings beside the voice (e.g. espeak-ng variants)'),
  binding: z
    .looseObject({ engine: z.string() })
    .describe('The binding fields that select this engine; a voice binding adds `voice` and settings'),
});

const engineVoiceSchema = z.object({
  id: z.string().describe("The voice's id within its engine"),
  name: z.string(),
  engine: z.string().describe('The id of its engine'),
  languages: z.array(z.string()).describe('Language tags it speaks, best first'),
  gender: genderSchema.optional(),
  sampleRate: z.int().optional().describe('The rate the engine makes it at (resampled to 44.1 kHz)'),
  quality: z.string().describe('What to expect: quality and first-audio latency'),
  binding: z.looseObject({ engine: z.string() }).describe('The `engine` of a voice created with it'),
});

/** Filters of `GET /api/engines/voices`. */
export const engineVoicesQuerySchema = z.object({
  language: languageSchema.optional().describe('Voices speaking this language (en also matches en-us)'),
  engine: z
    .string()
    .min(1)
    .max(64)
    .optional()
    .describe('Voices of one engine (its id) or of one kind of engine (a provider, e.g. remote)'),
});

/** Schemas of the engine catalogue routes. */
export const engineSchemas = {
  list: route({
    summary: 'Speech engines',
    description:
      'Extension: every engine with its availability (and why, when unavailable); remote endpoints by their configured name.',
    tags: ['engines'],
    access: 'apiKey',
    ok: envelope(z.array(engineInfoSchema)),
    errors: [],
  }),
  voices: route({
    summary: 'Engine voices',
    description:
      'Extension: every voice of the available engines, for the `engine` of a new voice; filtered by language and engine.',
    tags: ['engines'],
    access: 'apiKey',
    querystring: engineVoicesQuerySchema,
    ok: envelope(z.array(engineVoiceSchema)),
    errors: ['VALIDATION_INVALID_VALUE'],
  }),
};
