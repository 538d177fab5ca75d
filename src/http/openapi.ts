/**
 * The OpenAPI 3.1 document: `@fastify/swagger` collects every route's `schema` — zod schemas
 * beside each route (`routes/<name>.schemas.ts`, built with `route-schema.ts` from the domain's own
 * validators) — and this module turns them into JSON Schema (zod's `toJSONSchema`, draft 2020-12,
 * which OpenAPI 3.1 speaks). Served at `/openapi.json`, with a reference page at `/docs`
 * (`@fastify/swagger-ui`, its assets from the npm package: nothing from a CDN).
 *
 * The domain parsers run the same zod schemas and turn a failure into the spec's error code for
 * that field (TTS_CONTENTS_INVALID, VALIDATION_MISSING_FIELD, …), which a generic route validator
 * cannot: Fastify's own validation of these schemas is therefore a pass-through, and the replies
 * are serialised as they are (a response schema documents, it never strips a field).
 */
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import { createRequire } from 'node:module';
import type { FastifyInstance, FastifySchema } from 'fastify';
import { z } from 'zod';

/** The service's version, from package.json (two folders up from src/http and dist/http alike). */
export const SERVICE_VERSION: string = (
  createRequire(import.meta.url)('../../package.json') as { version: string }
).version;

/** What the document's `info` and `servers` say: the service's version and public URL. */
export interface OpenApiInfo {
  version: string;
  publicUrl: string;
}

function isZod(value: unknown): value is z.ZodType {
  return value instanceof z.ZodType;
}

/** JSON Schema of one zod schema as OpenAPI 3.1 embeds it (no `$schema`). */
export function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, {
    io,
    unrepresentable: 'any',
    target: 'draft-2020-12',
  }) as Record<string, unknown>;
  // zod leaves out the examples of a schema with transforms inside (as input): they are inputs here.
  const examples = z.globalRegistry.get(schema)?.examples;
  if (examples !== undefined && json.examples === undefined) json.examples = examples;
  return json;
}

/** An OpenAPI response object whose `content` may hold zod schemas, with them as JSON Schema. */
function withJsonContent(response: unknown): unknown {
  if (typeof response !== 'object' || response === null || !('content' in response)) return response;
  const content = (response as { content: Record<string, { schema?: unknown }> }).content;
  return {
    ...response,
    content: Object.fromEntries(
      Object.entries(content).map(([type, media]) => [
        type,
        isZod(media.schema) ? { ...media, schema: jsonSchemaOf(media.schema, 'output') } : media,
      ]),
    ),
  };
}

/** A route schema with its zod parts turned into JSON Schema (requests as input, responses as output). */
export function routeJsonSchema(schema: FastifySchema): Record<string, unknown> {
  const out: Record<string, unknown> = { ...schema };
  for (const part of ['body', 'querystring', 'params', 'headers'] as const) {
    const value = schema[part];
    if (isZod(value)) out[part] = jsonSchemaOf(value, 'input');
  }
  if (typeof schema.response === 'object' && schema.response !== null) {
    out.response = Object.fromEntries(
      Object.entries(schema.response as Record<string, unknown>).map(([status, value]) => [
        status,
        isZod(value) ? jsonSchemaOf(value, 'output') : withJsonContent(value),
      ]),
    );
  }
  return out;
}

/**
 * Sets the app's schema compilers for zod route schemas (pass-through validation and plain JSON
 * serialisation, see above). Must run before any route is added.
 */
export function useDocumentingSchemas(app: FastifyInstance): void {
  app.setValidatorCompiler(() => (data: unknown) => ({ value: data }));
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
}

/** Registers the document generator; routes added after this are collected. */
export async function registerOpenApi(app: FastifyInstance, info: OpenApiInfo): Promise<void> {
  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'voicegen API',
        version: info.version,
        description:
          'Self-hosted voice generation: text and multi-speaker dialogue scripts to speech, streamed as one continuous 320 kbps MP3 while it is generated. Every error answers `{status, code, message, requestId?}` with the `X-Service-App-Request-Id` header. Extensions to the hosted API are marked as such in their descriptions.',
        license: { name: 'GPL-3.0-or-later', identifier: 'GPL-3.0-or-later' },
      },
      servers: [{ url: info.publicUrl }],
      tags: [
        { name: 'account', description: 'The authenticated account' },
        { name: 'voices', description: 'Voice characters (also under the legacy prefix /api/tts/voice)' },
        { name: 'engines', description: 'Speech engines and their voices (our extension)' },
        { name: 'splitter', description: 'Splitter configurations for marked dialogue texts' },
        { name: 'tasks', description: 'Generation tasks' },
        { name: 'streams', description: "A task's MP3 while it is generated: the `auth` token only" },
        { name: 'audio', description: 'Stored finished audio: the `auth` token only' },
        {
          name: 'subtitles',
          description:
            "A task's subtitles and timestamps, growing while it is generated: the `auth` token or the owner's key",
        },
        { name: 'one-shot', description: 'Synchronous synthesis of one text' },
        { name: 'admin', description: 'Operator API: the admin token only' },
        { name: 'health', description: 'Liveness, readiness and metrics' },
      ],
      components: {
        securitySchemes: {
          apiKey: {
            type: 'http',
            scheme: 'bearer',
            description: 'An API key of the account (`sk-…`).',
          },
          streamToken: {
            type: 'apiKey',
            in: 'query',
            name: 'auth',
            description:
              "The task's stream token, from `streamUrl` in the task's record: the only credential of stream and audio URLs.",
          },
          adminToken: {
            type: 'http',
            scheme: 'bearer',
            description: 'The operator token (ADMIN_TOKEN).',
          },
          metricsToken: {
            type: 'http',
            scheme: 'bearer',
            description: 'METRICS_TOKEN; without it /metrics answers local clients only.',
          },
        },
      },
    },
    transform: ({ schema, url }) => ({
      schema: schema === undefined ? schema : routeJsonSchema(schema),
      url,
    }),
  });
  await app.register(fastifySwaggerUi, {
    routePrefix: '/docs',
    staticCSP: true,
    uiConfig: { deepLinking: true, tryItOutEnabled: false },
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
