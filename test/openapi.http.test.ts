// /openapi.json is a valid OpenAPI 3.1 document generated from the route schemas,
// every registered route is in it with its error responses, the documented examples validate
// against the documented schemas and are accepted by the API itself, and /docs serves the
// reference page with its assets from this server (no CDN).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { ERROR_CATALOGUE, type ErrorCode } from '../src/errors/app-error.js';
import { bearer, createVoice, startTestApp, type TestApp } from './helpers/test-app.js';

const ADMIN_TOKEN = 'admin-token-for-the-openapi-test-0123456789';

interface Operation {
  summary?: string;
  tags?: string[];
  security?: unknown[];
  requestBody?: { content: Record<string, MediaType> };
  responses: Record<
    string,
    { description?: string; content?: Record<string, { schema?: Record<string, unknown> }> }
  >;
}
interface MediaType {
  schema: Record<string, unknown>;
  example?: unknown;
  examples?: Record<string, { value: unknown }>;
}
interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
}

/** Fastify's `/api/voice/:id` as OpenAPI writes it: `/api/voice/{id}`. */
function openApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

function operations(doc: OpenApiDocument): Array<{ path: string; method: string; op: Operation }> {
  return Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => ({ path, method, op })),
  );
}

/** Replaces the examples' placeholders (VOICE_ID…) with ids of this account. */
function withIds(value: unknown, voiceId: string): unknown {
  return JSON.parse(JSON.stringify(value).replace(/VOICE_ID(_OF_[AB])?/g, voiceId));
}

describe('OpenAPI reference', () => {
  let t: TestApp;
  let doc: OpenApiDocument;
  let voiceId: string;

  before(async () => {
    t = await startTestApp({ env: { ADMIN_TOKEN } });
    voiceId = await createVoice(t.app, t.key);
    const res = await t.app.http.inject({ url: '/openapi.json' });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    doc = res.json<OpenApiDocument>();
  });
  after(async () => {
    await t.close();
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    assert.equal(doc.openapi, '3.1.0');
    const result = await new Validator().validate(doc as unknown as Parameters<Validator['validate']>[0]);
    assert.equal(result.valid, true, JSON.stringify(result.errors, null, 1)?.slice(0, 2000));
  });

  it('documents every registered route, with its success and error responses', () => {
    const documented = new Set(operations(doc).map(({ path, method }) => `${method.toUpperCase()} ${path}`));
    const routes = t.app.routes.filter((r) => !r.hidden && !r.automaticHead);
    assert.ok(routes.length > 40, `only ${String(routes.length)} routes registered`);
    const missing = routes
      .map((r) => `${r.method} ${openApiPath(r.url)}`)
      .filter((route) => !documented.has(route));
    assert.deepEqual(missing, [], 'routes missing from /openapi.json');

    for (const { path, method, op } of operations(doc)) {
      const where = `${method.toUpperCase()} ${path}`;
      assert.ok(op.summary !== undefined && op.summary.length > 0, `${where} has no summary`);
      assert.ok(op.tags !== undefined && op.tags.length > 0, `${where} has no tag`);
      assert.ok(Array.isArray(op.security), `${where} does not say its credential`);
      const statuses = Object.keys(op.responses).map(Number);
      assert.ok(
        statuses.some((s) => s >= 200 && s < 400),
        `${where} documents no success`,
      );
      const errorStatuses = statuses.filter((s) => s >= 400);
      assert.ok(errorStatuses.includes(500), `${where} does not document 500`);
      if (op.security.length > 0) assert.ok(errorStatuses.includes(401), `${where} does not document 401`);
      for (const status of errorStatuses) {
        const schema = op.responses[String(status)]?.content?.['application/json']?.schema as
          | {
              properties?: {
                code?: { enum?: string[] };
                status?: { const?: number };
                // The OpenAI-compatible routes answer `{error: {message, type, param, code}}`.
                error?: { properties?: { code?: { enum?: string[] } } };
              };
            }
          | undefined;
        const codes = schema?.properties?.code?.enum ?? schema?.properties?.error?.properties?.code?.enum;
        assert.ok(codes !== undefined && codes.length > 0, `${where} ${String(status)} names no error code`);
        for (const code of codes) {
          assert.equal(
            ERROR_CATALOGUE[code as ErrorCode]?.status,
            status,
            `${where}: ${code} is documented under ${String(status)}`,
          );
        }
      }
    }
  });

  it('has request examples that validate against their schemas and that the API accepts', async () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    let checked = 0;
    for (const { path, method, op } of operations(doc)) {
      const media = op.requestBody?.content['application/json'];
      if (media === undefined) continue;
      const examples = [
        ...(media.example === undefined ? [] : [media.example]),
        ...Object.values(media.examples ?? {}).map((e) => e.value),
      ];
      const validate = ajv.compile(media.schema);
      for (const example of examples) {
        const where = `${method.toUpperCase()} ${path} example ${JSON.stringify(example)}`;
        assert.ok(validate(example), `${where}: ${ajv.errorsText(validate.errors)}`);
        const url = path
          .replace('{account}', t.accountId)
          .replace(/\{id\}/, voiceId)
          .replace(/\{[A-Za-z]+\}/g, '0');
        const res = await t.app.http.inject({
          method: method.toUpperCase() as 'POST',
          url,
          headers: path.startsWith('/admin') ? { authorization: `Bearer ${ADMIN_TOKEN}` } : bearer(t.key),
          payload: withIds(example, voiceId) as Record<string, unknown>,
        });
        assert.ok(res.statusCode < 300, `${where} → ${String(res.statusCode)} ${res.body.slice(0, 300)}`);
        // The answer has the documented shape.
        const answered = op.responses[String(res.statusCode)]?.content?.['application/json']?.schema;
        assert.ok(answered !== undefined, `${where}: ${String(res.statusCode)} is not documented`);
        const validAnswer = ajv.compile(answered);
        assert.ok(
          validAnswer(res.json()),
          `${where}: the answer does not match its schema: ${ajv.errorsText(validAnswer.errors)}`,
        );
        checked++;
      }
    }
    // Voices (twice: both prefixes), splitter create and preview, generate (two forms), one-shot, admin.
    assert.ok(checked >= 9, `only ${String(checked)} examples checked`);
  });

  it('serves the reference page and its assets from this server', async () => {
    const page = await t.app.http.inject({ url: '/docs/' });
    assert.equal(page.statusCode, 200);
    assert.match(String(page.headers['content-type']), /^text\/html/);
    const assets = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1] ?? '');
    assert.ok(assets.length > 0);
    for (const asset of assets) {
      assert.doesNotMatch(asset, /^(https?:)?\/\//, `the page loads ${asset} from elsewhere`);
      const res = await t.app.http.inject({ url: new URL(asset, 'http://x/docs/').pathname });
      assert.equal(res.statusCode, 200, `${asset} → ${String(res.statusCode)}`);
    }
  });
});
