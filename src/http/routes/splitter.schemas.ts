/**
 * Schemas of the splitter configuration routes (splitter.routes.ts). The configuration and the
 * splitter-mode fields are shared with task creation, which takes the same text and configuration.
 */
import { z } from 'zod';
import { pageSchema } from '../../common/paging.js';
import type { ErrorCode } from '../../errors/app-error.js';
import { generationFieldSchemas } from '../../tasks/requests/generation-params.js';
import { envelope, idParams, okNoData, page, route, timestamp } from '../route-schema.js';

const utteranceParamsSchema = z
  .looseObject({
    voiceId: z.string().optional(),
    speechRate: generationFieldSchemas.speechRate.optional(),
  })
  .describe('Parameters bound to an utterance; other generation fields are passed to its content item');

const splitterConfigSchema = z
  .looseObject({
    splitterMarks: z
      .array(z.string())
      .optional()
      .describe('Markers that start an utterance, e.g. "<A>" or "{tag}" patterns'),
    lookupTable: z
      .record(
        z.string(),
        utteranceParamsSchema.extend({
          tags: z.array(z.union([z.string(), z.array(z.string())])),
        }),
      )
      .optional(),
    fallbackConfig: utteranceParamsSchema
      .extend({ voiceId: z.string() })
      .optional()
      .describe('For text outside any marker; without it, such text is dropped'),
  })
  .describe('Reserved keys plus placeholder keys (every other key), each mapping a marker to its parameters');

export const splitterExample = {
  '<A>': { voiceId: 'VOICE_ID_OF_A' },
  '<B>': { voiceId: 'VOICE_ID_OF_B', speechRate: 1.1 },
};

const splitterSchema = z.object({
  id: z.string(),
  name: z.string(),
  config: splitterConfigSchema,
  createdAt: timestamp,
  updatedAt: timestamp,
});

const splitterBody = z
  .object({ name: z.string().describe('1–100 characters'), config: splitterConfigSchema })
  .meta({ examples: [{ name: 'Two speakers', config: splitterExample }] });

export const splitterModeFields = {
  text: z.string().describe('A text with markers, e.g. "<A>Hello.<B>Hi there."'),
  splitter: splitterConfigSchema.optional().describe('An inline configuration'),
  splitterId: z.string().optional().describe('A saved configuration (exclusive with splitter)'),
};

const previewUtteranceSchema = z.object({
  index: z.int(),
  text: z.string(),
  voiceId: z.string(),
  speechRate: z.number(),
  marker: z.string().nullable(),
  params: z.record(z.string(), z.unknown()),
});

const splitterErrors: ErrorCode[] = [
  'VALIDATION_MISSING_FIELD',
  'VALIDATION_INVALID_VALUE',
  'VALIDATION_TOO_LONG',
  'TTS_SPLITTER_INVALID',
];

/** Schemas of the splitter routes. */
export const splitterSchemas = {
  preview: route({
    summary: 'Preview how a text splits',
    description:
      'Our extension: the same parsing and validation as generation in splitter mode, answering the utterances instead of creating a task.',
    tags: ['splitter'],
    access: 'apiKey',
    body: z
      .object(splitterModeFields)
      .meta({ examples: [{ text: '<A>Hello there.<B>Hi! How are you?', splitter: splitterExample }] }),
    ok: envelope(z.object({ utterances: z.array(previewUtteranceSchema) })),
    errors: [
      ...splitterErrors,
      'VALIDATION_CONFLICT',
      'TTS_TEXT_EMPTY',
      'TTS_CONTENTS_INVALID',
      'SPLITTER_NOT_FOUND',
      'TTS_SPLITTER_METADATA_INVALID',
    ],
  }),
  create: route({
    summary: 'Save a splitter configuration',
    tags: ['splitter'],
    access: 'apiKey',
    body: splitterBody,
    ok: envelope(splitterSchema),
    errors: [...splitterErrors, 'BILLING_QUOTA_EXCEEDED'],
  }),
  list: route({
    summary: 'List splitter configurations',
    description:
      'Newest first; a page holds at most `limit` configurations and, past its first, at most 1 MiB of configs: continue from `offset` + the items received while that is below `total`.',
    tags: ['splitter'],
    access: 'apiKey',
    querystring: pageSchema,
    ok: page(splitterSchema),
    errors: ['VALIDATION_INVALID_VALUE', 'TTS_SPLITTER_METADATA_INVALID'],
  }),
  get: route({
    summary: 'Get a splitter configuration',
    tags: ['splitter'],
    access: 'apiKey',
    params: idParams,
    ok: envelope(splitterSchema),
    errors: ['SPLITTER_NOT_FOUND', 'TTS_SPLITTER_METADATA_INVALID'],
  }),
  update: route({
    summary: 'Update a splitter configuration',
    description: '`name` and/or `config`; what is given replaces what is stored.',
    tags: ['splitter'],
    access: 'apiKey',
    params: idParams,
    body: splitterBody.partial(),
    ok: envelope(splitterSchema),
    errors: [...splitterErrors, 'SPLITTER_NOT_FOUND', 'BILLING_QUOTA_EXCEEDED'],
  }),
  delete: route({
    summary: 'Delete a splitter configuration',
    tags: ['splitter'],
    access: 'apiKey',
    params: idParams,
    ok: okNoData,
    errors: ['SPLITTER_NOT_FOUND'],
  }),
};
