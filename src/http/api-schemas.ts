/**
 * The route schemas of the API (issue 13): what each route takes and answers, as zod schemas built
 * from the domain's own validators (content items, voice creation, paging, operator bodies), so the
 * OpenAPI document (src/http/openapi.ts) cannot drift from what the service accepts. Every route
 * lists the error codes it may answer, grouped by status from the one error catalogue.
 */
import type { FastifySchema } from 'fastify';
import { z } from 'zod';
import {
  addModelRequestSchema,
  createAccountRequestSchema,
  voiceImportRequestSchema,
} from '../admin/admin-service.js';
import { pageSchema } from '../common/paging.js';
import { ERROR_CATALOGUE, type ErrorCode } from '../errors/app-error.js';
import { contentItemSchema } from '../tasks/requests/generate-request.js';
import { generationFieldSchemas, PRESETS } from '../tasks/requests/generation-params.js';
import { taskListQuerySchema } from '../tasks/task-service.js';
import { voiceBindingSchema } from '../audio/engines/engine-registry.js';
import { createVoiceSchema, languageSchema, VOICE_VERSIONS } from '../voices/voice-service.js';

/** Who may call a route: the OpenAPI security requirement of each kind of credential. */
type Access = 'apiKey' | 'streamToken' | 'adminToken' | 'metricsToken' | 'none';

const SECURITY: Record<Access, Array<Record<string, string[]>>> = {
  apiKey: [{ apiKey: [] }],
  streamToken: [{ streamToken: [] }],
  adminToken: [{ adminToken: [] }],
  metricsToken: [{ metricsToken: [] }, {}],
  none: [],
};

/** Codes any route may answer whatever it does (limits, storage outages, a bug). */
const ALWAYS: ErrorCode[] = ['RATE_LIMIT_EXCEEDED', 'SYSTEM_INTERNAL_ERROR', 'STORAGE_UNAVAILABLE'];
/** Codes of a route with a JSON body: malformed, too deep or of another media type. */
const JSON_BODY: ErrorCode[] = ['VALIDATION_INVALID_FORMAT', 'REQUEST_UNSUPPORTED_MEDIA_TYPE'];
const CREDENTIAL_ERRORS: Record<Access, ErrorCode[]> = {
  apiKey: ['AUTH_UNAUTHORIZED'],
  streamToken: ['AUTH_UNAUTHORIZED', 'AUTH_FORBIDDEN'],
  adminToken: ['AUTH_UNAUTHORIZED'],
  metricsToken: ['AUTH_UNAUTHORIZED', 'AUTH_FORBIDDEN'],
  none: [],
};

/** The spec's error body. */
export const errorBodySchema = z.object({
  status: z.int().describe('The HTTP status, repeated'),
  code: z.string().describe('A code of the error catalogue (docs/decisions.md)'),
  message: z.string().describe('What went wrong, for people'),
  requestId: z
    .string()
    .optional()
    .describe('On reportable errors (429, 5xx, STREAM_NOT_READY): quote it when reporting'),
});

/** Error responses of `codes`, one per status, each naming its codes. */
function errorResponses(codes: readonly ErrorCode[]): Record<string, z.ZodType> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of new Set(codes)) {
    const status: number = ERROR_CATALOGUE[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return Object.fromEntries(
    [...byStatus].map(([status, list]) => [
      String(status),
      errorBodySchema
        .extend({ status: z.literal(status), code: z.enum(list as [ErrorCode, ...ErrorCode[]]) })
        .describe(list.join(', ')),
    ]),
  );
}

/** `{status: 200, message: "OK", data}`: the API's success envelope. */
function envelope(data: z.ZodType, extra: z.ZodRawShape = {}): z.ZodType {
  return z.object({ status: z.literal(200), message: z.literal('OK').optional(), data, ...extra });
}

/** `{status: 200}` without data (deletes, migrations; spec 4.4 has no message either). */
const okNoData = z.object({ status: z.literal(200), message: z.literal('OK').optional() });

/** A list page: `{status: 200, data: [...], total}`. */
function page(item: z.ZodType): z.ZodType {
  return envelope(z.array(item), { total: z.int().describe('Items in all pages') });
}

/** MP3 bytes, as the audio routes answer them (200 whole, 206 a range). */
const MP3_CONTENT = { 'audio/mpeg': { schema: { type: 'string', contentMediaType: 'audio/mpeg' } } };

interface RouteDoc {
  summary: string;
  description?: string;
  tags: string[];
  access: Access;
  params?: z.ZodType;
  querystring?: z.ZodType;
  body?: z.ZodType;
  /** The success answer: a zod schema (JSON), or OpenAPI response objects by status (audio, redirects). */
  ok: z.ZodType | Record<string, unknown>;
  errors: ErrorCode[];
}

/** A route's schema: its parts, its success answer and its error answers. */
function route(doc: RouteDoc): FastifySchema {
  const codes = [
    ...CREDENTIAL_ERRORS[doc.access],
    ...(doc.body === undefined ? [] : JSON_BODY),
    ...doc.errors,
  ];
  const success = doc.ok instanceof z.ZodType ? { '200': doc.ok } : doc.ok;
  return {
    summary: doc.summary,
    ...(doc.description === undefined ? {} : { description: doc.description }),
    tags: doc.tags,
    security: SECURITY[doc.access],
    ...(doc.params === undefined ? {} : { params: doc.params }),
    ...(doc.querystring === undefined ? {} : { querystring: doc.querystring }),
    ...(doc.body === undefined ? {} : { body: doc.body }),
    response: { ...success, ...errorResponses([...codes, ...ALWAYS]) },
  };
}

// ---- shared parts ----------------------------------------------------------------------------

const idParams = z.object({ id: z.string().describe('The resource id') });
const taskParams = z.object({ id: z.string().describe('The task id') });
const contentParams = taskParams.extend({
  contentIndex: z.string().regex(/^\d+$/).describe('The index of a content piece (0-based)'),
});
const timestamp = z.string().describe('ISO 8601 date-time');

const streamQuery = z.object({
  auth: z.string().describe("The task's stream token (from streamUrl)"),
  i: z
    .string()
    .optional()
    .describe('Session id (spec 4.1): readers with the same i share one live session; 1–64 of [A-Za-z0-9_-]'),
  'response-content-disposition': z
    .string()
    .optional()
    .describe('Content-Disposition the audio is answered with (also carried through the 302)'),
});
const audioQuery = streamQuery.omit({ i: true });

const rangeHeaders =
  'Range (one bytes range), If-Range, If-Match, If-None-Match, If-Modified-Since and If-Unmodified-Since are honoured per RFC 9110 (412 → 304 → If-Range → 416 → 206).';

// ---- voices ----------------------------------------------------------------------------------

const voiceSchema = z.object({
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
    description: 'Spec 4.4: answers `{"status":200}` without data once the voice is v3.0.',
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

// ---- splitter configurations ------------------------------------------------------------------

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
      .describe('Markers that start an utterance, e.g. "<A>" or "{tag}" patterns (spec 4.3)'),
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

const splitterExample = {
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

const splitterModeFields = {
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

// ---- tasks -----------------------------------------------------------------------------------

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
  streamUrl: z.string().optional().describe('The full-task MP3 stream with its auth token (spec 4.1)'),
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

// ---- streams and stored audio ------------------------------------------------------------------

const streamErrors: ErrorCode[] = [
  'GENERATE_NOT_FOUND',
  'RESOURCE_NOT_FOUND',
  'STREAM_NOT_READY',
  'VALIDATION_INVALID_VALUE',
  'RANGE_NOT_SATISFIABLE',
  'PRECONDITION_FAILED',
  'STREAM_CAPACITY_EXHAUSTED',
  'TTS_GENERATE_FAILED',
];

function audioAnswers(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    '200': { description: 'The MP3', content: MP3_CONTENT },
    '206': { description: 'One range of the MP3', content: MP3_CONTENT },
    '304': { description: 'Not modified (If-None-Match / If-Modified-Since)' },
    ...extra,
  };
}

const redirectAnswer = {
  '302': {
    description: 'The task is generated: Location is its stored MP3 (carrying response-content-disposition)',
  },
};

/** Schemas of the stream routes (spec 4.1, 4.2). */
export const streamSchemas = {
  fullStream: route({
    summary: "The task's full MP3 stream",
    description: `Spec 4.1: one continuous MP3 of every piece while the task is generated (readers sharing \`i\` share a session); a 302 to the stored file once generated. HEAD answers the headers without starting a session. ${rangeHeaders}`,
    tags: ['streams'],
    access: 'streamToken',
    params: taskParams,
    querystring: streamQuery,
    ok: audioAnswers(redirectAnswer),
    errors: streamErrors,
  }),
  contentStream: route({
    summary: "One piece's MP3 stream",
    description: `Spec 4.2: the piece's audio while it is generated; a 302 to its stored file once generated. ${rangeHeaders}`,
    tags: ['streams'],
    access: 'streamToken',
    params: contentParams,
    querystring: streamQuery,
    ok: audioAnswers(redirectAnswer),
    errors: streamErrors,
  }),
  streamUrl: route({
    summary: "The task's stream URL",
    tags: ['streams'],
    access: 'streamToken',
    params: taskParams,
    querystring: z.object({ auth: z.string() }),
    ok: envelope(z.object({ url: z.string() })),
    errors: ['GENERATE_NOT_FOUND'],
  }),
  pseudoStream: route({
    summary: "A generated piece's stored MP3, by redirect",
    tags: ['streams'],
    access: 'streamToken',
    params: contentParams,
    querystring: audioQuery,
    ok: redirectAnswer,
    errors: ['GENERATE_NOT_FOUND', 'RESOURCE_NOT_FOUND', 'STREAM_NOT_READY', 'VALIDATION_INVALID_VALUE'],
  }),
};

const storedAudioErrors: ErrorCode[] = [
  'GENERATE_NOT_FOUND',
  'RESOURCE_NOT_FOUND',
  'VALIDATION_INVALID_VALUE',
  'RANGE_NOT_SATISFIABLE',
  'PRECONDITION_FAILED',
];

/** Schemas of the stored-audio routes. */
export const audioSchemas = {
  taskAudio: route({
    summary: "The generated task's MP3",
    description: `metadata.audio. ${rangeHeaders}`,
    tags: ['audio'],
    access: 'streamToken',
    params: taskParams,
    querystring: audioQuery,
    ok: audioAnswers(),
    errors: storedAudioErrors,
  }),
  liveAudio: route({
    summary: "The task's MP3, live then stored, from one URL",
    description: `The one-shot answer's streamUrl: the full stream while generated, the stored file afterwards, never a redirect. ${rangeHeaders}`,
    tags: ['audio'],
    access: 'streamToken',
    params: taskParams,
    querystring: streamQuery,
    ok: audioAnswers(),
    errors: streamErrors,
  }),
  contentAudio: route({
    summary: "A generated piece's MP3",
    description: `metadata.contents[n].audio. ${rangeHeaders}`,
    tags: ['audio'],
    access: 'streamToken',
    params: contentParams,
    querystring: audioQuery,
    ok: audioAnswers(),
    errors: storedAudioErrors,
  }),
};

// ---- one-shot synthesis --------------------------------------------------------------------------

const oneShotFields = contentItemSchema.omit({ type: true }).extend({
  stream: z.boolean().optional().describe('Include streamUrl in the JSON answer'),
  direct_stream: z.boolean().optional().describe('Answer with the MP3 bytes instead of JSON'),
});

const oneShotResult = z.object({
  id: z.string(),
  audio: z.string().describe('The stored MP3'),
  streamUrl: z.string().optional(),
  credit_used: z.number(),
});

const oneShotErrors: ErrorCode[] = [
  'VALIDATION_MISSING_FIELD',
  'VALIDATION_INVALID_VALUE',
  'VALIDATION_TOO_LONG',
  'TTS_TEXT_EMPTY',
  'TTS_CONTENTS_INVALID',
  'VOICE_NOT_FOUND',
  'NO_WORKER_AVAILABLE',
  'TTS_GENERATE_FAILED',
  'BILLING_QUOTA_EXCEEDED',
];

const oneShotHeaders =
  'The MP3 answer is chunked audio/mpeg with X-Service-Audio-Id and X-Service-Response-Data (and the hosted names X-Reecho-Audio-Id, X-Reecho-Response-Data); a failure after the first byte cuts the stream.';

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

// ---- account, presets -----------------------------------------------------------------------------

const nullableCount = z.int().nullable().describe('null = unlimited');
const accountInfoSchema = z.object({
  id: z.string(),
  name: z.string(),
  createdAt: timestamp,
  role: z.literal('user'),
  isPaid: z.literal(true),
  credit: z.number().describe('Characters the account may still synthesise today (999999999 = unlimited)'),
  bonusCredit: z.number(),
  credits: z.number().describe('Deprecated hosted field, equal to credit'),
  loraQuota: z.number(),
  quota: z.object({
    maxQueuedTasks: nullableCount,
    maxConcurrentTasks: nullableCount,
    dailyCharacters: nullableCount,
    syncBaseConcurrent: z.int(),
    syncPaidConcurrent: z.int(),
    asyncBaseConcurrent: z.int(),
    asyncHPConcurrent: z.int(),
    lora: z.int(),
    priority: z.int(),
  }),
  usage: z.object({
    queuedTasks: z.int(),
    pendingTasks: z.int(),
    processingTasks: z.int(),
    charactersToday: z.int(),
    charactersRemaining: nullableCount,
    resetsAt: timestamp,
    splitters: z.int().describe('Saved splitter configurations'),
    splitterBytes: z.int().describe('UTF-8 bytes of the saved splitter configurations together'),
    voices: z.int(),
    uploadBytes: z.int().describe('Bytes of the uploaded voice samples together'),
    taskBytes: z
      .int()
      .describe('Bytes of the stored audio of its tasks together (merged and per-content MP3s)'),
  }),
  limits: z
    .object({
      splitters: nullableCount,
      splitterBytes: nullableCount,
      voices: nullableCount,
      uploadBytes: nullableCount,
      taskBytes: nullableCount,
    })
    .describe(
      'What the account may keep stored (null = unlimited); a write past one answers 403 BILLING_QUOTA_EXCEEDED ' +
        '(`taskBytes`: new tasks are refused once the stored task audio has reached it)',
    ),
});

/** Schema of `GET /api/account/info`. */
export const accountSchema = route({
  summary: 'The authenticated account',
  description:
    'With its quotas and usage; the hosted API’s clients read the same object from top-level `user`.',
  tags: ['account'],
  access: 'apiKey',
  ok: envelope(accountInfoSchema, { user: accountInfoSchema }),
  errors: [],
});

const presetSchema = z.object({
  key: z.enum(PRESETS.map((p) => p.key) as [string, ...string[]]),
  style: z.enum(['creative', 'balance', 'stable']),
  i18n_name: z.object({ en: z.string(), zh: z.string() }),
  i18n_description: z.object({ en: z.string(), zh: z.string() }),
  config: z.record(z.string(), z.number()),
});

/** Schema of `GET /api/tts/presets`. */
export const presetsSchema = route({
  summary: 'Synthesis presets',
  description: 'The values `preset` accepts and the style each maps to.',
  tags: ['tasks'],
  access: 'apiKey',
  ok: envelope(z.array(presetSchema)),
  errors: [],
});

// ---- engines and their voices (our extension) ---------------------------------------------------

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

// ---- operator API -----------------------------------------------------------------------------------

const accountRecord = z.object({ id: z.string(), name: z.string(), createdAt: timestamp });
const keyRecord = z.object({
  id: z.string(),
  accountId: z.string(),
  prefix: z.string().describe('The start of the key, never the key'),
  createdAt: timestamp,
  revokedAt: timestamp.nullable(),
});
const accountParams = z.object({ account: z.string().describe('An account id or name') });

/** Schemas of the /admin routes. */
/** A model folder of MODELS_DIR as operators see it. */
const modelRecordSchema = z.object({
  name: z.string().describe('The folder name: the engine id of its voices'),
  available: z.boolean(),
  reason: z.string().optional().describe('Why it cannot be used, when unavailable'),
  family: z.string().optional().describe('vits, kokoro, kitten or matcha'),
  sampleRate: z.int().optional(),
  speakers: z.array(z.string()).optional().describe('Its voices (speaker names or ids)'),
  languages: z.array(z.string()).optional(),
});

export const adminSchemas = {
  createAccount: route({
    summary: 'Create an account',
    tags: ['admin'],
    access: 'adminToken',
    body: createAccountRequestSchema.meta({ examples: [{ name: 'team-a' }] }),
    ok: envelope(accountRecord),
    errors: ['VALIDATION_MISSING_FIELD', 'VALIDATION_INVALID_VALUE', 'VALIDATION_CONFLICT'],
  }),
  listAccounts: route({
    summary: 'List accounts',
    tags: ['admin'],
    access: 'adminToken',
    ok: envelope(z.array(accountRecord)),
    errors: [],
  }),
  createKey: route({
    summary: 'Issue an API key',
    description: 'The only answer that holds the whole key.',
    tags: ['admin'],
    access: 'adminToken',
    params: accountParams,
    ok: envelope(keyRecord.extend({ key: z.string() })),
    errors: ['RESOURCE_NOT_FOUND'],
  }),
  listKeys: route({
    summary: "List an account's keys",
    tags: ['admin'],
    access: 'adminToken',
    params: accountParams,
    ok: envelope(z.array(keyRecord)),
    errors: ['RESOURCE_NOT_FOUND'],
  }),
  revokeKey: route({
    summary: 'Revoke an API key',
    tags: ['admin'],
    access: 'adminToken',
    params: z.object({ keyId: z.string() }),
    ok: okNoData,
    errors: ['RESOURCE_NOT_FOUND'],
  }),
  exportVoices: route({
    summary: "Export an account's voices",
    description:
      'Each voice as the import request that recreates it (POST …/voices/import, or `voicegen voices import --from`).',
    tags: ['admin'],
    access: 'adminToken',
    params: accountParams,
    ok: envelope(z.array(voiceImportRequestSchema)),
    errors: ['RESOURCE_NOT_FOUND'],
  }),
  importVoice: route({
    summary: 'Import a voice into an account',
    description: 'Any version v1.0–v4.0, e.g. to migrate voices from elsewhere.',
    tags: ['admin'],
    access: 'adminToken',
    params: accountParams,
    body: voiceImportRequestSchema.meta({
      examples: [{ name: 'Old narrator', version: 'v2.0', language: 'en' }],
    }),
    ok: envelope(voiceSchema),
    errors: [
      'RESOURCE_NOT_FOUND',
      'VALIDATION_MISSING_FIELD',
      'VALIDATION_INVALID_VALUE',
      'VOICE_MODEL_VERSION_INVALID',
    ],
  }),
  listModels: route({
    summary: 'List the neural models',
    description:
      'The model folders of MODELS_DIR as the start-up check reads them, unavailable ones with the reason.',
    tags: ['admin'],
    access: 'adminToken',
    ok: envelope(z.array(modelRecordSchema)),
    errors: [],
  }),
  addModel: route({
    summary: 'Add a neural model',
    description:
      'Unpacks a .tar.bz2/.tar.gz model archive (the layout sherpa-onnx publishes) from an http(s) URL or a file of the server into MODELS_DIR: the hash is checked when given, entries outside the folder, links and archives over MODELS_MAX_ARCHIVE_BYTES are refused, the folder must pass the start-up check; the model is in the catalogue when this answers.',
    tags: ['admin'],
    access: 'adminToken',
    body: addModelRequestSchema,
    ok: envelope(modelRecordSchema),
    errors: ['VALIDATION_MISSING_FIELD', 'VALIDATION_INVALID_VALUE', 'VALIDATION_CONFLICT'],
  }),
  removeModel: route({
    summary: 'Remove a neural model',
    tags: ['admin'],
    access: 'adminToken',
    params: z.object({ name: z.string() }),
    ok: okNoData,
    errors: ['RESOURCE_NOT_FOUND'],
  }),
  rescanModels: route({
    summary: 'Rescan the neural models',
    description:
      'Reads MODELS_DIR again (as SIGHUP does): folders added or fixed appear in the catalogue. Answers every model folder as an engine, unavailable ones with the reason.',
    tags: ['admin'],
    access: 'adminToken',
    ok: envelope(z.array(engineInfoSchema)),
    errors: [],
  }),
};

// ---- health ---------------------------------------------------------------------------------------

/** Schemas of /healthz, /readyz and /metrics. */
export const healthSchemas = {
  healthz: route({
    summary: 'Liveness',
    tags: ['health'],
    access: 'none',
    ok: z.object({
      status: z.literal(200),
      message: z.string(),
      data: z.object({ healthy: z.literal(true) }),
    }),
    errors: ['SYSTEM_SHUTTING_DOWN'],
  }),
  readyz: route({
    summary: 'Readiness',
    description:
      'The database and, in scale-out, Redis and S3 answer; 503 with Retry-After names the ones that do not.',
    tags: ['health'],
    access: 'none',
    ok: z.object({
      status: z.literal(200),
      message: z.string(),
      data: z.object({ ready: z.literal(true), checks: z.record(z.string(), z.enum(['ok', 'unreachable'])) }),
    }),
    errors: ['SYSTEM_SHUTTING_DOWN'],
  }),
  metrics: route({
    summary: 'Prometheus metrics',
    tags: ['health'],
    access: 'metricsToken',
    ok: {
      '200': {
        description: 'Prometheus text format',
        content: { 'text/plain': { schema: { type: 'string' } } },
      },
    },
    errors: [],
  }),
};
