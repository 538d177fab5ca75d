/**
 * Schemas of the stored-audio routes (audio.routes.ts).
 */
import type { ErrorCode } from '../../errors/app-error.js';
import { contentParams, route, taskParams } from '../route-schema.js';
import { audioAnswers, audioQuery, rangeHeaders, streamErrors, streamQuery } from './stream.schemas.js';

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
