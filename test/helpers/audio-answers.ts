// Finished-audio answers read over real HTTP, for comparing the paths that answer them.
import assert from 'node:assert/strict';
import { request as httpRequest, type Agent, type IncomingHttpHeaders } from 'node:http';
import { createTask, createVoice, waitForTask, type TestApp } from './test-app.js';

export interface Answer {
  status: number;
  /** Header names in the order they were sent, lower-cased. */
  names: string[];
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** GET `path`; on a kept-alive connection of `agent`, else on a connection of its own. */
export function get(
  base: string,
  path: string,
  headers: Record<string, string> = {},
  agent: Agent | false = false,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}${path}`, { headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          names: res.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase()),
          headers: res.headers,
          body: Buffer.concat(chunks),
        }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

/** The `code` of an error answer's body. */
export const errorCode = (answer: Answer): unknown =>
  (JSON.parse(answer.body.toString()) as { code?: unknown }).code;

/** The same request in a spelling only the routes answer (`auth` percent-encoded). */
export const routed = (path: string) => path.replace('?auth=', '?%61uth=');

/** Headers that differ between any two answers. */
export const VOLATILE = new Set([
  'date',
  'x-service-app-request-id',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
]);

/**
 * Checks that `direct`'s access line among `lines` is the one the routes wrote for `viaRoutes`
 * (same fields, the token redacted, the same level, pid and host), waiting up to a second for it.
 */
export async function assertAccessLineAsRoutes(
  lines: string[],
  direct: Answer,
  viaRoutes: Answer,
  path: string,
): Promise<void> {
  const parsed = () => lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  const line = (answer: Answer) =>
    parsed().find((p) => p.reqId === answer.headers['x-service-app-request-id']);
  for (let i = 0; i < 50 && (line(direct) === undefined || line(viaRoutes) === undefined); i++)
    await new Promise((resolve) => setTimeout(resolve, 20));
  const mine = line(direct);
  const theirs = line(viaRoutes);
  assert.ok(mine !== undefined && theirs !== undefined, lines.join(''));
  assert.deepEqual(Object.keys(mine), Object.keys(theirs));
  assert.deepEqual(mine.req, {
    method: 'GET',
    url: `${path.slice(0, path.indexOf('?'))}?auth=[redacted]`,
    ip: '127.0.0.1',
  });
  assert.deepEqual(mine.res, { statusCode: direct.status });
  assert.equal(mine.msg, 'request completed');
  assert.equal(typeof mine.responseTime, 'number');
  for (const key of ['level', 'pid', 'hostname']) assert.equal(mine[key], theirs[key]);
  const token = new URL(path, 'http://x').searchParams.get('auth') ?? '';
  assert.ok(!lines.some((l) => l.includes(token)), 'no line holds the token');
}

/** A finished task of one content saying `text`: its id and its audio's path with its `auth`. */
export async function finishedAudio(t: TestApp, text: string): Promise<{ id: string; path: string }> {
  const voiceId = await createVoice(t.app, t.key);
  const id = await createTask(t.app, t.key, [{ text, voiceId }]);
  const task = await waitForTask(t.app, t.accountId, id);
  const url = new URL(String(task.metadata.audio));
  return { id, path: `${url.pathname}${url.search}` };
}
