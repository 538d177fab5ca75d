/**
 * What every route schema is built from: who may call a route (its OpenAPI security), the error
 * answers it lists (grouped by status from the one error catalogue), the success envelope, list
 * pages and the parameters many routes share. Each route's own schemas live beside it in
 * `routes/<name>.schemas.ts`; `openapi.ts` turns them into the OpenAPI document.
 */
import type { FastifySchema } from 'fastify';
import { z } from 'zod';
import { ERROR_CATALOGUE, type ErrorCode } from '../errors/app-error.js';

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
export function envelope(data: z.ZodType, extra: z.ZodRawShape = {}): z.ZodType {
  return z.object({ status: z.literal(200), message: z.literal('OK').optional(), data, ...extra });
}

/** `{status: 200}` without data (deletes, migrations: no message either). */
export const okNoData = z.object({ status: z.literal(200), message: z.literal('OK').optional() });

/** A list page: `{status: 200, data: [...], total}`. */
export function page(item: z.ZodType): z.ZodType {
  return envelope(z.array(item), { total: z.int().describe('Items in all pages') });
}

/** MP3 bytes, as the audio routes answer them (200 whole, 206 a range). */
export const MP3_CONTENT = { 'audio/mpeg': { schema: { type: 'string', contentMediaType: 'audio/mpeg' } } };

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
export function route(doc: RouteDoc): FastifySchema {
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

// ---- parameters many routes share ----------------------------------------------------------------

export const idParams = z.object({ id: z.string().describe('The resource id') });
export const taskParams = z.object({ id: z.string().describe('The task id') });
export const contentParams = taskParams.extend({
  contentIndex: z.string().regex(/^\d+$/).describe('The index of a content piece (0-based)'),
});
export const timestamp = z.string().describe('ISO 8601 date-time');
