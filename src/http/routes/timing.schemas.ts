/**
 * Schemas of the subtitle and timestamp routes (timing.routes.ts).
 */
import { z } from 'zod';
import type { ErrorCode } from '../../errors/app-error.js';
import { contentParams, route, taskParams } from '../route-schema.js';

const timingQuery = z.object({
  auth: z
    .string()
    .optional()
    .describe("The task's stream token (as in streamUrl); or send the owner's API key as a bearer header"),
});

const timingErrors: ErrorCode[] = ['GENERATE_NOT_FOUND', 'RESOURCE_NOT_FOUND'];

const word = z.object({
  start: z.number().describe('Seconds into the decoded audio'),
  end: z.number().describe('Seconds into the decoded audio'),
  text: z.string(),
});

const timestampsBody = z.object({
  taskId: z.string(),
  content: z
    .int()
    .nullable()
    .describe('The content the times are of (its own MP3), or null: the full-task audio'),
  status: z.string().describe("The task's status"),
  complete: z.boolean().describe('True once the task is generated: nothing will be added'),
  sentences: z.array(
    z.object({
      content: z.int().describe('Index of its content piece'),
      voiceId: z.string(),
      speaker: z.string().nullable().describe('The splitter marker that started its content (splitter mode)'),
      start: z.number(),
      end: z.number().describe('Its last voiced sample: a pause after it lies outside'),
      text: z.string(),
      words: z.array(word).describe('Where the engine times words (espeak-ng); empty otherwise'),
    }),
  ),
  words: z
    .array(word.extend({ content: z.int(), sentence: z.int().describe('Index in sentences') }))
    .describe('Every word of sentences, flat'),
});

const description =
  "Times are seconds of what a decoder gives from the MP3 we serve (sample 0 of the decode is 0), within one MP3 frame (26 ms). While the task is generated, what has been produced so far (a prefix of the final result; poll to follow); final once generated. Authorised by the task's auth token (so a <track src> works) or the owner's API key.";

/** The OpenAPI security of these routes: the stream token, or the owner's key. */
const security: Record<string, string[]>[] = [{ streamToken: [] }, { apiKey: [] }];

function timingRoute(
  summary: string,
  perContent: boolean,
  ok: Record<string, unknown>,
): ReturnType<typeof route> {
  return {
    ...route({
      summary,
      description: perContent
        ? `${description} Times of the content's own MP3 (metadata.contents[n].audio).`
        : `${description} Times of the full-task audio (streamUrl, metadata.audio).`,
      tags: ['subtitles'],
      access: 'streamToken',
      params: perContent ? contentParams : taskParams,
      querystring: timingQuery,
      ok,
      errors: timingErrors,
    }),
    security,
  };
}

const text = (type: string, what: string): Record<string, unknown> => ({
  '200': { description: what, content: { [type]: { schema: { type: 'string' } } } },
});
const json = {
  '200': {
    description: 'Sentences and words with their times (not in the API envelope: a file, like the SRT)',
    content: { 'application/json': { schema: timestampsBody } },
  },
};

/** Schemas of the subtitle and timestamp routes. */
export const timingSchemas = {
  srt: timingRoute("The task's subtitles (SRT)", false, text('application/x-subrip', 'SRT subtitles')),
  vtt: timingRoute("The task's subtitles (WebVTT)", false, text('text/vtt', 'WebVTT subtitles')),
  timestamps: timingRoute("The task's sentence and word times", false, json),
  contentSrt: timingRoute("A content's subtitles (SRT)", true, text('application/x-subrip', 'SRT subtitles')),
  contentVtt: timingRoute("A content's subtitles (WebVTT)", true, text('text/vtt', 'WebVTT subtitles')),
  contentTimestamps: timingRoute("A content's sentence and word times", true, json),
};
