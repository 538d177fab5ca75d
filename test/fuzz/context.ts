/**
 * Fixtures and after-run checks of the fuzz suite, shared by the CI test and bench/fuzz.ts: the
 * app's settings (limits high enough that the fuzzer measures validation, not 429s), the resources
 * the generators refer to, the "nothing invalid was stored" check and memory after a GC.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import v8 from 'node:v8';
import vm from 'node:vm';
import type { App } from '../../src/app.js';
import type { FuzzContext } from './arbitraries.js';
import { checkResponse, type FuzzRequest } from './invariants.js';
import { injectCase } from './transport.js';

/** The fuzz app's admin token (≥ 24 characters). */
export const FUZZ_ADMIN_TOKEN = 'fuzz-admin-token-0123456789abcdef';

/** Request bodies above this are 413; small, so "over the limit" cases stay cheap. */
export const FUZZ_BODY_LIMIT_BYTES = 64 * 1024;

/**
 * Environment of the fuzz app: rate limits out of the way, a small body limit, an admin token,
 * one generation slot (only the fixture task is ever generated).
 */
export const FUZZ_ENV: Record<string, string> = {
  RATE_LIMIT_MAX: '1000000',
  STREAM_RATE_LIMIT_MAX: '1000000',
  RATE_LIMIT_IP_MAX: '1000000',
  BODY_LIMIT_BYTES: String(FUZZ_BODY_LIMIT_BYTES),
  ADMIN_TOKEN: FUZZ_ADMIN_TOKEN,
  GENERATION_CONCURRENCY: '1',
};

function bearer(key: string): Record<string, string> {
  return { authorization: `Bearer ${key}` };
}

/**
 * Creates the fixtures: a voice, a splitter whose voices do not exist, and one generated task with
 * stored audio (the only synthesis of the run), waiting for it at most `timeoutMs`.
 */
export async function createFuzzContext(
  app: App,
  owner: { key: string; accountId: string },
  other: { key: string },
  timeoutMs = 60_000,
): Promise<FuzzContext> {
  const json = async (method: 'POST' | 'GET' | 'HEAD', url: string, payload?: unknown) => {
    const res = await app.http.inject({
      method,
      url,
      headers: bearer(owner.key),
      ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
    });
    if (res.statusCode !== 200) throw new Error(`fixture ${method} ${url}: ${res.statusCode} ${res.body}`);
    return res;
  };
  const voiceId = (await json('POST', '/api/voice', { name: 'Fuzz narrator' })).json<{
    data: { id: string };
  }>().data.id;
  const splitterId = (
    await json('POST', '/api/splitter', {
      name: 'fuzz fixture',
      config: { '<A>': { voiceId: 'missing-a' }, fallbackConfig: { voiceId: 'missing-fallback' } },
    })
  ).json<{ data: { id: string } }>().data.id;
  const created = await json('POST', '/api/tts/generate', {
    contents: [
      { type: 'text', text: 'Hi.', voiceId },
      { type: 'text', text: 'Yes.', voiceId },
    ],
  });
  const taskId = created.json<{ data: { id: string } }>().data.id;
  const deadline = Date.now() + timeoutMs;
  let authToken = '';
  for (;;) {
    const task = (await json('GET', `/api/tts/generate/${taskId}?stream=true`)).json<{
      data: { status: string; streamUrl?: string; metadata?: { audio?: string } };
    }>().data;
    if (task.status === 'failed') throw new Error('the fixture task failed');
    if (task.status === 'generated' && task.metadata?.audio !== undefined && task.streamUrl !== undefined) {
      authToken = new URL(task.streamUrl).searchParams.get('auth') ?? '';
      break;
    }
    if (Date.now() > deadline) throw new Error(`the fixture task was not generated within ${timeoutMs} ms`);
    await sleep(25);
  }
  const head = await app.http.inject({
    method: 'HEAD',
    url: `/api/tts/generate/${taskId}/audio.mp3?auth=${authToken}`,
  });
  const etag = head.headers.etag;
  if (head.statusCode !== 200 || typeof etag !== 'string')
    throw new Error(`fixture audio HEAD: ${head.statusCode}`);
  return {
    key: owner.key,
    otherKey: other.key,
    adminToken: FUZZ_ADMIN_TOKEN,
    accountId: owner.accountId,
    voiceId,
    splitterId,
    taskId,
    authToken,
    audioEtag: etag,
    bodyLimitBytes: FUZZ_BODY_LIMIT_BYTES,
  };
}

/**
 * After a run, nothing stored is garbage: every list answers 200 on every page, every stored
 * splitter and voice reads back (200, invariants held), every splitter previews without a 5xx
 * (a saved config that cannot be used would be TTS_SPLITTER_METADATA_INVALID), /healthz is 200.
 * Returns the problems found and how many stored items were read.
 */
export async function checkStoredData(
  app: App,
  ctx: FuzzContext,
): Promise<{ problems: string[]; read: number }> {
  const problems: string[] = [];
  let read = 0;
  const call = async (method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>) => {
    const request: FuzzRequest = { method, url, headers: bearer(ctx.key), label: 'stored-data' };
    const res = await injectCase(app, {
      ...request,
      ...(payload === undefined
        ? {}
        : {
            payload: JSON.stringify(payload),
            headers: { ...request.headers, 'content-type': 'application/json' },
          }),
    });
    for (const p of checkResponse(request, res)) problems.push(`${method} ${url}: ${p}`);
    return res;
  };
  for (const list of ['/api/splitter', '/api/voice', '/api/tts/generate']) {
    for (let offset = 0; ; offset += 50) {
      const res = await call('GET', `${list}?limit=50&offset=${offset}`);
      if (res.status !== 200) {
        problems.push(`GET ${list} offset ${offset}: ${res.status} ${res.body.toString().slice(0, 200)}`);
        break;
      }
      const page = JSON.parse(res.body.toString()) as { data: { id: string }[]; total: number };
      for (const item of page.data) {
        read++;
        if (list === '/api/tts/generate') continue;
        const detail = await call('GET', `${list}/${item.id}`);
        if (detail.status !== 200) problems.push(`GET ${list}/${item.id}: ${detail.status}`);
        if (list === '/api/splitter') {
          const preview = await call('POST', '/api/splitter/preview', {
            text: '<A>Hi. plain',
            splitterId: item.id,
          });
          if (preview.status >= 500)
            problems.push(`preview with splitter ${item.id}: ${preview.status} ${preview.body.toString()}`);
        }
      }
      if (page.data.length === 0 || offset + 50 >= page.total) break;
    }
  }
  const health = await call('GET', '/healthz');
  if (health.status !== 200) problems.push(`/healthz ${health.status}`);
  return { problems, read };
}

let gcFunction: (() => void) | undefined;

/** Heap and RSS after a full garbage collection (gc exposed at run time, as bench/live-readers does). */
export function memoryAfterGc(): { rss: number; heapUsed: number } {
  if (gcFunction === undefined) {
    v8.setFlagsFromString('--expose-gc');
    gcFunction = vm.runInNewContext('gc') as () => void;
  }
  gcFunction();
  gcFunction();
  const { rss, heapUsed } = process.memoryUsage();
  return { rss, heapUsed };
}
