/**
 * Schemas of the stream routes (stream.routes.ts). The token query, the MP3 answers and the error
 * codes of a live stream are shared with the stored-audio routes, which serve the same URLs' audio
 * once the task is generated.
 */
import { z } from 'zod';
import type { ErrorCode } from '../../errors/app-error.js';
import { contentParams, envelope, MP3_CONTENT, route, taskParams } from '../route-schema.js';

export const streamQuery = z.object({
  auth: z.string().describe("The task's stream token (from streamUrl)"),
  i: z
    .string()
    .optional()
    .describe('Session id: readers with the same i share one live session; 1–64 of [A-Za-z0-9_-]'),
  'response-content-disposition': z
    .string()
    .optional()
    .describe('Content-Disposition the audio is answered with (also carried through the 302)'),
});
export const audioQuery = streamQuery.omit({ i: true });

export const rangeHeaders =
  'Range (one bytes range), If-Range, If-Match, If-None-Match, If-Modified-Since and If-Unmodified-Since are honoured per RFC 9110 (412 → 304 → If-Range → 416 → 206).';

export const streamErrors: ErrorCode[] = [
  'GENERATE_NOT_FOUND',
  'RESOURCE_NOT_FOUND',
  'STREAM_NOT_READY',
  'VALIDATION_INVALID_VALUE',
  'RANGE_NOT_SATISFIABLE',
  'PRECONDITION_FAILED',
  'STREAM_CAPACITY_EXHAUSTED',
  'TTS_GENERATE_FAILED',
];

export function audioAnswers(extra: Record<string, unknown> = {}): Record<string, unknown> {
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

/** Schemas of the stream routes. */
export const streamSchemas = {
  fullStream: route({
    summary: "The task's full MP3 stream",
    description: `One continuous MP3 of every piece while the task is generated (readers sharing \`i\` share a session); a 302 to the stored file once generated. HEAD answers the headers without starting a session. ${rangeHeaders}`,
    tags: ['streams'],
    access: 'streamToken',
    params: taskParams,
    querystring: streamQuery,
    ok: audioAnswers(redirectAnswer),
    errors: streamErrors,
  }),
  contentStream: route({
    summary: "One piece's MP3 stream",
    description: `The piece's audio while it is generated; a 302 to its stored file once generated. ${rangeHeaders}`,
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
