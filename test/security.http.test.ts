// Security review, one test per item: tenant isolation on every route (found from the
// app's own route table, so a new route is covered the day it is added), one constant-time secret
// compare, 128-bit stream tokens, no SSRF through voice bindings, no path traversal, no header
// injection, size limits. Log redaction has its own suite (test/log-redaction.http.test.ts).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { secretDigest, secretMatches, secretsEqual } from '../src/common/secret-compare.js';
import { REQUEST_ID_HEADER } from '../src/http/server.js';
import {
  bearer,
  createTask,
  createVoice,
  startTestApp,
  waitForTask,
  type TestApp,
} from './helpers/test-app.js';

interface Owned {
  key: string;
  accountId: string;
  taskId: string;
  authToken: string;
  voiceId: string;
  splitterId: string;
}

let t: TestApp;
let a: Owned;
let b: Owned;

async function setUpAccount(key: string, accountId: string): Promise<Owned> {
  const voiceId = await createVoice(t.app, key);
  const splitter = await t.app.http.inject({
    method: 'POST',
    url: '/api/splitter',
    headers: bearer(key),
    payload: { name: 'dialogue', config: { fallbackConfig: { voiceId } } },
  });
  assert.equal(splitter.statusCode, 200, splitter.body);
  const splitterId = splitter.json<{ data: { id: string } }>().data.id;
  const taskId = await createTask(t.app, key, [
    { type: 'text', text: 'One.', voiceId },
    { type: 'text', text: 'Two.', voiceId },
  ]);
  const task = await waitForTask(t.app, accountId, taskId);
  const authToken = new URL(task.streamUrl ?? assert.fail('no streamUrl')).searchParams.get('auth');
  return { key, accountId, taskId, authToken: authToken ?? '', voiceId, splitterId };
}

before(async () => {
  t = await startTestApp();
  a = await setUpAccount(t.key, t.accountId);
  const other = await t.newAccount();
  b = await setUpAccount(other.key, other.accountId);
});

after(async () => t.close());

/** Every (method, path) the app serves, from Fastify's own route tree. */
function routeTable(): { method: string; path: string }[] {
  const tree = t.app.http.printRoutes({ commonPrefix: false });
  const stack: string[] = [];
  const routes: { method: string; path: string }[] = [];
  for (const line of tree.split('\n')) {
    const m = /^([│ ]*)[├└]── (\S+)(?: \(([^)]*)\))?/.exec(line);
    if (!m) continue;
    const depth = (m[1] ?? '').length / 4;
    stack.length = depth;
    stack.push(m[2] ?? '');
    const path = stack.join('');
    for (const method of (m[3] ?? '').split(',').map((s) => s.trim()))
      if (method !== '') routes.push({ method, path });
  }
  return routes;
}

/** The path of `route` with every parameter filled from `ids` (`:contentIndex` → 0). */
function fill(path: string, ids: Record<string, string>): string {
  return path.replace(/:(\w+)/g, (_, name: string) => ids[name] ?? '0');
}

function errorCode(res: LightMyRequestResponse): string | undefined {
  if (res.body === '') return undefined;
  return res.json<{ code?: string }>().code;
}

describe('tenant isolation on every route', () => {
  it('finds the routes (the parser sees the whole tree)', () => {
    const paths = new Set(routeTable().map((r) => r.path));
    for (const expected of [
      '/api/tts/generate/:id',
      '/api/tts/generate/:id/stream.mp3',
      '/api/voice/:id',
      '/api/splitter/:id',
      '/admin/accounts',
    ])
      assert.ok(paths.has(expected), `${expected} in ${[...paths].join(' ')}`);
  });

  it("another account's bearer key never reaches a resource: same answer as for an unknown id, never 2xx, nothing changed", async () => {
    const tokenRoute = (path: string) => /\.mp3$|\/stream$/.test(path);
    let checked = 0;
    for (const { method, path } of routeTable()) {
      if (!path.startsWith('/api/') || !path.includes(':id') || tokenRoute(path)) continue;
      const idOf = path.startsWith('/api/tts/generate')
        ? (o: Owned) => o.taskId
        : path.startsWith('/api/splitter')
          ? (o: Owned) => o.splitterId
          : (o: Owned) => o.voiceId;
      const send = (id: string) =>
        t.app.http.inject({
          method: method as 'GET',
          url: fill(path, { id }),
          headers: bearer(b.key),
          ...(method === 'POST' || method === 'PUT' ? { payload: {} } : {}),
        });
      const foreign = await send(idOf(a));
      const unknown = await send(randomUUID());
      const where = `${method} ${path}`;
      assert.ok(foreign.statusCode >= 400, `${where}: ${String(foreign.statusCode)}`);
      assert.ok(foreign.statusCode < 500, `${where}: ${String(foreign.statusCode)} ${foreign.body}`);
      assert.equal(foreign.statusCode, unknown.statusCode, `${where}: existence must not leak`);
      assert.equal(errorCode(foreign), errorCode(unknown), where);
      assert.ok(foreign.headers[REQUEST_ID_HEADER.toLowerCase()] !== undefined, where);
      checked++;
    }
    assert.ok(checked >= 15, `only ${String(checked)} routes checked`);
    // Nothing of A changed (DELETE and POST were among the attempts).
    for (const url of [
      `/api/tts/generate/${a.taskId}`,
      `/api/voice/${a.voiceId}`,
      `/api/splitter/${a.splitterId}`,
    ]) {
      const res = await t.app.http.inject({ url, headers: bearer(a.key) });
      assert.equal(res.statusCode, 200, `${url} ${res.body}`);
    }
  });

  it("a task's stream token opens that task only: every token route answers 403 to another task's token", async () => {
    let checked = 0;
    for (const { method, path } of routeTable()) {
      if (!path.startsWith('/api/tts/generate/:id/') || !/\.mp3$|\/stream$/.test(path)) continue;
      const url = `${fill(path, { id: a.taskId })}?auth=${b.authToken}`;
      const res = await t.app.http.inject({ method: method as 'GET', url, headers: bearer(a.key) });
      assert.equal(res.statusCode, 403, `${method} ${path}: ${res.body}`);
      if (method === 'GET') assert.equal(errorCode(res), 'AUTH_FORBIDDEN');
      checked++;
    }
    assert.ok(checked >= 10, `only ${String(checked)} token routes checked`);
  });

  it("lists hold only the caller's own resources, and generate refuses another account's voice and splitter", async () => {
    for (const url of ['/api/tts/generate', '/api/voice', '/api/splitter']) {
      const res = await t.app.http.inject({ url, headers: bearer(b.key) });
      assert.equal(res.statusCode, 200);
      for (const id of [a.taskId, a.voiceId, a.splitterId]) assert.ok(!res.body.includes(id), `${url}`);
    }
    const withVoice = await t.app.http.inject({
      method: 'POST',
      url: '/api/tts/generate',
      headers: bearer(b.key),
      payload: { contents: [{ type: 'text', text: 'Hi.', voiceId: a.voiceId }] },
    });
    assert.ok(withVoice.statusCode >= 400 && withVoice.statusCode < 500, withVoice.body);
    const withSplitter = await t.app.http.inject({
      method: 'POST',
      url: '/api/tts/generate',
      headers: bearer(b.key),
      payload: { text: 'Hi.', splitterId: a.splitterId },
    });
    assert.equal(withSplitter.statusCode, 404, withSplitter.body);
  });

  it('a tenant key never opens the admin API', async () => {
    for (const { method, path } of routeTable()) {
      if (!path.startsWith('/admin/')) continue;
      const res = await t.app.http.inject({
        method: method as 'GET',
        url: fill(path, { account: a.accountId, keyId: randomUUID() }),
        headers: bearer(a.key),
        ...(method === 'POST' ? { payload: {} } : {}),
      });
      assert.ok([401, 403].includes(res.statusCode), `${method} ${path}: ${String(res.statusCode)}`);
    }
  });
});

describe('credentials', () => {
  it('one constant-time compare: timingSafeEqual is used in src/common/secret-compare.ts only', async () => {
    const offenders: string[] = [];
    const walk = async (dir: string): Promise<void> => {
      for (const entry of await readdir(dir, { withFileTypes: true })) {
        const file = join(dir, entry.name);
        if (entry.isDirectory()) await walk(file);
        else if (file.endsWith('.ts') && !file.endsWith('.test.ts')) {
          const text = await readFile(file, 'utf8');
          if (text.includes('timingSafeEqual') && !file.endsWith(join('common', 'secret-compare.ts')))
            offenders.push(file);
          // Secrets are never compared with === (token, key hash, admin token); presence checks are fine.
          if (/\b(auth_?[tT]oken|key_?[hH]ash|adminToken)\s*[!=]==(?!\s*(?:undefined|null)\b)/.test(text))
            offenders.push(`${file} (===)`);
        }
      }
    };
    await walk(join(import.meta.dirname, '..', 'src'));
    assert.deepEqual(offenders, []);
  });

  it('compares secrets of any length without throwing and without a length shortcut', () => {
    assert.equal(secretsEqual('abc', 'abc'), true);
    assert.equal(secretsEqual('abc', 'abcd'), false);
    assert.equal(secretsEqual('', 'x'.repeat(10_000)), false);
    assert.equal(secretsEqual('ä', 'a'), false);
    // Against a kept digest: the same answers.
    const kept = secretDigest('abc');
    assert.equal(secretMatches('abc', kept), true);
    assert.equal(secretMatches('abcd', kept), false);
    assert.equal(secretMatches('', kept), false);
    assert.equal(secretMatches('ab', secretDigest('ä')), false);
  });

  it('stream tokens are 128-bit random hex, distinct per task', async () => {
    const tokens = new Set<string>();
    for (let n = 0; n < 20; n++) {
      const created = await t.app.http.inject({
        method: 'POST',
        url: '/api/tts/generate',
        headers: bearer(a.key),
        payload: { contents: [{ type: 'text', text: `Token ${String(n)}.`, voiceId: a.voiceId }] },
      });
      const id = created.json<{ data: { id: string } }>().data.id;
      const view = await t.app.services.tasks.streamView(id);
      assert.match(view.authToken, /^[0-9a-f]{32}$/);
      tokens.add(view.authToken);
    }
    assert.equal(tokens.size, 20);
  });
});

describe('no SSRF, traversal or header injection', () => {
  it('a voice binding can only name an operator-configured engine endpoint, never a URL', async () => {
    let hits = 0;
    const bait = createServer((_req, res) => {
      hits++;
      res.end();
    });
    await new Promise<void>((resolve) => bait.listen(0, '127.0.0.1', resolve));
    const { port } = bait.address() as AddressInfo;
    try {
      for (const endpoint of [
        `http://127.0.0.1:${String(port)}/`,
        'http://169.254.169.254/latest/meta-data',
        'file:///etc/passwd',
        'local',
      ]) {
        const res = await t.app.http.inject({
          method: 'POST',
          url: '/api/voice',
          headers: bearer(a.key),
          payload: { name: 'x', engine: { engine: 'remote', endpoint, voice: 'alloy' } },
        });
        assert.equal(res.statusCode, 400, `${endpoint}: ${res.body}`);
        assert.equal(errorCode(res), 'VALIDATION_INVALID_VALUE');
      }
    } finally {
      await new Promise((resolve) => bait.close(resolve));
    }
    assert.equal(hits, 0);
  });

  it('ids with traversal sequences name nothing: 404, never a file', async () => {
    for (const id of ['..', '..%2F..%2Fetc%2Fpasswd', '%2e%2e', '..%5C..%5Cwindows', 'a%00b']) {
      for (const url of [
        `/api/tts/generate/${id}/audio.mp3?auth=${a.authToken}`,
        `/api/tts/generate/${id}/0/audio.mp3?auth=${a.authToken}`,
        `/api/tts/generate/${id}`,
        `/api/voice/${id}`,
        `/api/splitter/${id}`,
      ]) {
        const res = await t.app.http.inject({ url, headers: bearer(a.key) });
        assert.ok([400, 404].includes(res.statusCode), `${url}: ${String(res.statusCode)}`);
        assert.ok(!res.body.includes('root:'), url);
        assert.equal(res.headers['content-type']?.toString().startsWith('audio/'), false, url);
      }
    }
  });

  it('no header injection: CR/LF in i or response-content-disposition is a 400, never a header', async () => {
    const base = `/api/tts/generate/${a.taskId}`;
    for (const query of [
      `i=${encodeURIComponent('a\r\nSet-Cookie: x=1')}`,
      `response-content-disposition=${encodeURIComponent('attachment\r\nSet-Cookie: x=1')}`,
      `response-content-disposition=${encodeURIComponent('attachment; filename="a\nb.mp3"')}`,
    ]) {
      for (const path of [`${base}/stream.mp3`, `${base}/audio.mp3`, `${base}/0/audio.mp3`]) {
        const res = await t.app.http.inject({ url: `${path}?auth=${a.authToken}&${query}` });
        if (path.endsWith('/audio.mp3') && query.startsWith('i=')) continue; // `i` is a stream parameter
        assert.equal(res.statusCode, 400, `${path}?${query}: ${String(res.statusCode)}`);
        assert.equal(res.headers['set-cookie'], undefined);
      }
    }
    // A non-ASCII file name is carried in RFC 8187 form, never raw.
    const res = await t.app.http.inject({
      url: `${base}/audio.mp3?auth=${a.authToken}&response-content-disposition=${encodeURIComponent('attachment; filename="dialogue-é.mp3"')}`,
    });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-disposition']), /^[\x20-\x7e]+$/);
  });
});

describe('size limits', () => {
  it('bodies, texts, contents and names beyond their limits are clear 4xx with the spec body', async () => {
    const { limits } = t.app.config;
    const cases: { url: string; payload: unknown; status: number; code: string }[] = [
      {
        url: '/api/tts/generate',
        payload: {
          contents: [{ type: 'text', text: 'x'.repeat(limits.textLength + 1), voiceId: a.voiceId }],
        },
        status: 400,
        code: 'VALIDATION_TOO_LONG',
      },
      {
        url: '/api/tts/generate',
        payload: {
          contents: Array.from({ length: limits.contents + 1 }, () => ({
            type: 'text',
            text: 'x',
            voiceId: a.voiceId,
          })),
        },
        status: 400,
        code: 'TTS_CONTENTS_INVALID',
      },
      { url: '/api/voice', payload: { name: 'n'.repeat(10_000) }, status: 400, code: 'VALIDATION_TOO_LONG' },
      {
        url: '/api/splitter',
        payload: {
          name: 's'.repeat(limits.splitterName + 1),
          config: { fallbackConfig: { voiceId: a.voiceId } },
        },
        status: 400,
        code: 'VALIDATION_TOO_LONG',
      },
      {
        url: '/api/tts/generate',
        payload: { contents: [{ type: 'text', text: 'x'.repeat(limits.bodyBytes), voiceId: a.voiceId }] },
        status: 413,
        code: 'UPLOAD_TOO_LARGE',
      },
    ];
    for (const c of cases) {
      const res = await t.app.http.inject({
        method: 'POST',
        url: c.url,
        headers: bearer(a.key),
        payload: c.payload as object,
      });
      const where = `${c.url} ${c.code}`;
      assert.equal(res.statusCode, c.status, `${where}: ${res.body.slice(0, 300)}`);
      const body = res.json<{ status: number; code: string; message: string }>();
      assert.equal(body.status, c.status, where);
      assert.ok(body.message.length > 0, where);
      assert.ok(res.headers[REQUEST_ID_HEADER.toLowerCase()] !== undefined, where);
    }
  });
});
