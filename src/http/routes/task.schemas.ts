/**
 * Schemas of the task routes (task.routes.ts): creation in contents or splitter mode, the task's
 * detail and its list summary.
 */
import { z } from 'zod';
import { contentItemSchema } from '../../tasks/requests/generate-request.js';
import { taskListQuerySchema } from '../../tasks/task-service.js';
import { envelope, okNoData, page, route, taskParams, timestamp } from '../route-schema.js';
import { splitterExample, splitterModeFields } from './splitter.schemas.js';
import { voiceSchema } from './voice.schemas.js';

const taskStatus = z.enum(['pending', 'processing', 'generated', 'failed']);
const taskVoice = z.union([
  voiceSchema,
  z.object({ id: z.string(), idForGenerate: z.string(), deleted: z.literal(true) }),
]);
const taskBase = {
  id: z.string(),
  userId: z.string(),
  status: taskStatus,
  type: z.string().describe('contents or splitter'),
  createdAt: timestamp,
  error: z.string().optional().describe('Why the task failed'),
  streamUrl: z.string().optional().describe('The full-task MP3 stream with its auth token'),
};
const taskContentSchema = z.looseObject({
  index: z.int(),
  type: z.literal('text'),
  text: z.string(),
  voiceId: z.string(),
  audio: z.string().optional().describe("The piece's stored MP3, once generated"),
  generatedAt: timestamp.optional(),
  duration: z.number().optional().describe('Seconds of audio, once generated (our extension)'),
});
const taskDetailSchema = z.object({
  ...taskBase,
  metadata: z.object({
    contents: z.array(taskContentSchema),
    characters: z.int(),
    voices: z.array(taskVoice),
    audio: z.string().optional().describe('The finished MP3, once generated'),
    generatedAt: timestamp.optional(),
    request: z.record(z.string(), z.unknown()).optional(),
    srt: z
      .string()
      .optional()
      .describe('SRT subtitles URL (…/subtitles.srt?auth=…), present when a content asked for srt: true'),
  }),
  credit_used: z.number(),
  billing: z.object({ unit: z.literal('character'), characters: z.int(), credits: z.number() }),
  estimatedDuration: z.number().describe('Seconds of audio expected'),
});
const listedContentSchema = z.object({
  index: z.int(),
  type: z.literal('text'),
  text: z.string().describe('The first 200 characters of the text'),
  textTruncated: z.boolean().describe('True when the text is longer (the detail has it whole)'),
  voiceId: z.string(),
  audio: z.string().optional().describe("The piece's stored MP3, once generated"),
  duration: z.number().optional().describe('Seconds of audio, once generated (our extension)'),
  generatedAt: timestamp.optional(),
});
const taskSummarySchema = z.object({
  ...taskBase,
  metadata: z.object({
    contents: z.array(listedContentSchema).describe('The first 20 contents (all of them: the detail)'),
    characters: z.int(),
    contentsCount: z.int(),
    voices: z.array(taskVoice),
    audio: z.string().optional(),
    generatedAt: timestamp.optional(),
  }),
});

const generateBody = z
  .object({
    contents: z.array(contentItemSchema).optional().describe('Contents mode: the pieces to speak, in order'),
    ...splitterModeFields,
    text: splitterModeFields.text.optional(),
  })
  .describe('Either `contents`, or `text` with `splitter` or `splitterId` (splitter mode)')
  .meta({
    examples: [
      { contents: [{ text: 'Hello from voicegen.', voiceId: 'VOICE_ID' }] },
      { text: '<A>Hello there.<B>Hi! How are you?', splitter: splitterExample },
    ],
  });

/** Schemas of the task routes. */
export const taskSchemas = {
  create: route({
    summary: 'Create a generation task',
    description: 'Queued at once; follow it by its detail or play its streamUrl while it is generated.',
    tags: ['tasks'],
    access: 'apiKey',
    body: generateBody,
    ok: envelope(taskDetailSchema),
    errors: [
      'VALIDATION_MISSING_FIELD',
      'VALIDATION_INVALID_VALUE',
      'VALIDATION_TOO_LONG',
      'VALIDATION_CONFLICT',
      'TTS_TEXT_EMPTY',
      'TTS_CONTENTS_INVALID',
      'TTS_SPLITTER_INVALID',
      'UNSUPPORTED_LANGUAGE',
      'VOICE_NOT_FOUND',
      'SPLITTER_NOT_FOUND',
      'TTS_SPLITTER_METADATA_INVALID',
      'BILLING_QUOTA_EXCEEDED',
    ],
  }),
  list: route({
    summary: 'List tasks',
    description:
      'Summaries, newest first: each task with its first 20 contents (texts cut to 200 characters, `textTruncated` when cut, audio URLs, no parameters), `contentsCount`, and no request echo, so a page stays small whatever its tasks hold.',
    tags: ['tasks'],
    access: 'apiKey',
    querystring: taskListQuerySchema,
    ok: page(taskSummarySchema),
    errors: ['VALIDATION_INVALID_VALUE'],
  }),
  get: route({
    summary: 'Get a task',
    description: 'The whole record; `stream=false` leaves out streamUrl.',
    tags: ['tasks'],
    access: 'apiKey',
    params: taskParams,
    querystring: z.object({ stream: z.enum(['true', 'false']).optional() }),
    ok: envelope(taskDetailSchema),
    errors: ['GENERATE_NOT_FOUND', 'VALIDATION_INVALID_VALUE'],
  }),
  cancel: route({
    summary: 'Cancel a task',
    description:
      'Our extension: stops a pending or processing task (it ends `failed`, "cancelled"); a finished one is answered as it is.',
    tags: ['tasks'],
    access: 'apiKey',
    params: taskParams,
    ok: envelope(taskDetailSchema),
    errors: ['GENERATE_NOT_FOUND'],
  }),
  rotateToken: route({
    summary: "Rotate a task's stream token",
    description:
      'Our extension: gives the task a new `auth` token and answers the task with its new `streamUrl` and audio URLs. ' +
      'The old URLs then answer 403 AUTH_FORBIDDEN on every node (a load balancer that keeps finished audio may answer ' +
      'them from its copy for up to 10 s more); streams already being read with the old token go on until their readers leave.',
    tags: ['tasks'],
    access: 'apiKey',
    params: taskParams,
    ok: envelope(taskDetailSchema),
    errors: ['GENERATE_NOT_FOUND'],
  }),
  delete: route({
    summary: 'Delete a task',
    description: 'Its audio too. A pending or processing task cannot be deleted (cancel it first).',
    tags: ['tasks'],
    access: 'apiKey',
    params: taskParams,
    ok: okNoData,
    errors: ['GENERATE_NOT_FOUND', 'GENERATE_DELETE_IN_PROGRESS'],
  }),
};
