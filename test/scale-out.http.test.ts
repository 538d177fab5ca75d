// Two voicegen nodes (separate processes) on one PostgreSQL database, one Redis and one
// S3-compatible store, behind nginx as a plain round-robin load balancer. Any node serves any
// session with the same bytes and ETag, and the pipeline runs once cluster-wide; rate limits,
// splitters, voice migrations and key revocations hold across nodes; a node killed mid-build is
// replaced: its task moves to the survivor, a reader retries and gets a complete MP3.
import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { encodePiece } from '../src/audio/continuous-encoder.js';
import { createEncoderPool } from '../src/audio/encoder-pool.js';
import { CANONICAL_RATE } from '../src/audio/pcm.js';
import { ffmpegErrors, probeAudio } from './helpers/audio-check.js';
import { startCluster, type Cluster, type ClusterNode } from './helpers/cluster.js';
import { send, type Reply } from './helpers/http-client.js';

const encoders = createEncoderPool({ size: 1 });
const toneCache = new Map<string, Promise<Buffer>>();

/** An MP3 tone for the fake upstream engine (the test's own encoder). */
function toneMp3(hz: number, seconds: number): Promise<Buffer> {
  const key = `${String(hz)}/${String(seconds)}`;
  let mp3 = toneCache.get(key);
  if (mp3 === undefined) {
    mp3 = (async () => {
      const pcm = new Int16Array(Math.round(seconds * CANONICAL_RATE));
      for (let i = 0; i < pcm.length; i++)
        pcm[i] = Math.round(8000 * Math.sin((2 * Math.PI * hz * i) / CANONICAL_RATE));
      const parts: Uint8Array[] = [];
      for await (const bytes of encodePiece([pcm], encoders.open())) parts.push(bytes);
      return Buffer.concat(parts);
    })();
    toneCache.set(key, mp3);
  }
  return mp3;
}

/** Held upstream answers: `held HZ SECONDS` sends its first half, then waits for release(). */
const held = new Map<string, { release: () => void; released: Promise<void> }>();
function holdFor(input: string): { release: () => void; released: Promise<void> } {
  let entry = held.get(input);
  if (entry === undefined) {
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    entry = { release, released };
    held.set(input, entry);
  }
  return entry;
}
/** Speech request bodies the upstream received, by input. */
const upstreamBodies = new Map<string, Record<string, unknown>>();

/**
 * OpenAI-compatible upstream: the input `tone HZ SECONDS` answers that tone, 4 KiB every 25 ms;
 * `held HZ SECONDS` the same, but only its first half until the test releases it.
 */
async function answerUpstream(input: string, res: ServerResponse): Promise<void> {
  const [kind, hz, seconds] = input.split(' ');
  const mp3 = await toneMp3(Number(hz), Number(seconds));
  res.writeHead(200, { 'content-type': 'audio/mpeg' });
  for (let o = 0; o < mp3.length; o += 4096) {
    if (kind === 'held' && o >= mp3.length >> 1) await holdFor(input).released;
    if (!res.write(mp3.subarray(o, Math.min(mp3.length, o + 4096)))) {
      await new Promise((r) => res.once('drain', r));
    }
    await sleep(25);
  }
  res.end();
}

const upstream = createServer((req, res) => {
  const parts: Buffer[] = [];
  req.on('data', (c: Buffer) => parts.push(c));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as Record<string, unknown> & {
      input: string;
    };
    upstreamBodies.set(body.input, body);
    answerUpstream(body.input, res).catch(() => res.destroy());
  });
});

let cluster: Cluster;
let nodeA: ClusterNode;
let nodeB: ClusterNode;
/** The cluster's database, read directly to find a task's generator and wait for statuses. */
let database: pg.Client;

before(async () => {
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const { port } = upstream.address() as AddressInfo;
  cluster = await startCluster({
    env: {
      RATE_LIMIT_MAX: '60',
      STREAM_RATE_LIMIT_MAX: '100000',
      GENERATION_CONCURRENCY: '1',
      REMOTE_ENGINES: JSON.stringify({ local: { baseUrl: `http://127.0.0.1:${String(port)}` } }),
    },
  });
  [nodeA, nodeB] = cluster.nodes as [ClusterNode, ClusterNode];
  database = new pg.Client({ connectionString: cluster.env.DATABASE_URL });
  await database.connect();
});

after(async () => {
  for (const { release } of held.values()) release();
  await database.end();
  await cluster.close();
  await new Promise((resolve) => upstream.close(resolve));
  await encoders.close();
});

// ---------------------------------------------------------------------------------------------
// API helpers (fetch, JSON)

interface ApiReply<T = unknown> {
  status: number;
  body: T;
  headers: Headers;
}

async function api<T = Record<string, unknown>>(
  base: string,
  path: string,
  options: { method?: string; key?: string; body?: unknown } = {},
): Promise<ApiReply<T>> {
  const headers: Record<string, string> = {};
  if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${base}${path}`, {
    method: options.method ?? (options.body === undefined ? 'GET' : 'POST'),
    headers,
    body: options.body === undefined ? null : JSON.stringify(options.body),
  });
  const text = await response.text();
  return {
    status: response.status,
    body: (text === '' ? {} : JSON.parse(text)) as T,
    headers: response.headers,
  };
}

function admin<T = Record<string, unknown>>(
  path: string,
  body?: unknown,
  base = cluster.url,
): Promise<ApiReply<T>> {
  return api<T>(base, `/admin${path}`, { key: cluster.adminToken, body });
}

let tenants = 0;
/** A new account and key, created through the admin API of the load balancer. */
async function newTenant(): Promise<{ key: string; accountId: string; name: string }> {
  const name = `tenant-${String(++tenants)}`;
  const account = await admin<{ data: { id: string } }>('/accounts', { name });
  assert.equal(account.status, 200, JSON.stringify(account.body));
  const key = await admin<{ data: { key: string } }>(`/accounts/${name}/keys`, {});
  assert.equal(key.status, 200, JSON.stringify(key.body));
  return { key: key.body.data.key, accountId: account.body.data.id, name };
}

async function remoteVoice(key: string, base = cluster.url): Promise<string> {
  const reply = await api<{ data: { id: string } }>(base, '/api/voice', {
    key,
    body: { name: 'Tone', engine: { engine: 'remote', endpoint: 'local', voice: 'alloy' } },
  });
  assert.equal(reply.status, 200, JSON.stringify(reply.body));
  return reply.body.data.id;
}

interface TaskView {
  id: string;
  status: string;
  streamUrl?: string;
  estimatedDuration: number;
  metadata: { audio?: string; contents: { audio?: string }[] };
}

async function createTask(key: string, body: unknown, base = cluster.url): Promise<string> {
  const reply = await api<{ data: { id: string } }>(base, '/api/tts/generate', { key, body });
  assert.equal(reply.status, 200, JSON.stringify(reply.body));
  return reply.body.data.id;
}

async function taskDetail(key: string, id: string): Promise<TaskView> {
  const reply = await api<{ data: TaskView }>(cluster.url, `/api/tts/generate/${id}?stream=true`, { key });
  assert.equal(reply.status, 200, JSON.stringify(reply.body));
  return reply.body.data;
}

/**
 * Waits until the task's status is one of `statuses` (and, for `generated`, its audio is stored),
 * polling the shared database rather than the API so the per-account rate limit is not spent, then
 * returns the task as the API shows it.
 */
async function waitTask(
  key: string,
  id: string,
  statuses: readonly string[],
  deadlineMs = 60_000,
): Promise<TaskView> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const row = (
      await database.query<{ status: string; audio_key: string | null }>(
        'select status, audio_key from tasks where id = $1',
        [id],
      )
    ).rows[0];
    if (
      row !== undefined &&
      statuses.includes(row.status) &&
      (row.status !== 'generated' || row.audio_key !== null)
    ) {
      return taskDetail(key, id);
    }
    if (Date.now() > until)
      assert.fail(`task ${id} still ${String(row?.status)} after ${String(deadlineMs)} ms`);
    await sleep(50);
  }
}

/** The same URL on another origin (a node's own address instead of the load balancer's). */
function on(node: ClusterNode | string, url: string): string {
  const target = new URL(url);
  const origin = new URL(typeof node === 'string' ? node : node.url);
  target.protocol = origin.protocol;
  target.host = origin.host;
  return target.toString();
}

/** A counter of /metrics summed over the nodes. */
async function clusterTotal(metric: string): Promise<number> {
  let total = 0;
  for (const node of cluster.nodes) total += (await node.metrics())[metric] ?? 0;
  return total;
}

/** The node generating task `id` (its worker_url) and the other node. */
async function generatorOf(id: string): Promise<{ node: ClusterNode; other: ClusterNode }> {
  const { rows } = await database.query<{ worker_url: string | null }>(
    'select worker_url from tasks where id = $1',
    [id],
  );
  const url = rows[0]?.worker_url;
  const node = cluster.nodes.find((n) => n.url === url) ?? assert.fail(`no node is ${String(url)}`);
  return { node, other: node === nodeA ? nodeB : nodeA };
}

/** Starts again the nodes a test stopped, so the next test has the whole cluster. */
async function restartStoppedNodes(): Promise<void> {
  for (const node of cluster.nodes) {
    if (node.child.exitCode !== null || node.child.signalCode !== null) await node.restart();
  }
}

/** A random integer in [min, max]. */
function between(min: number, max: number): number {
  return min + Math.floor(Math.random() * (max - min + 1));
}

// ---------------------------------------------------------------------------------------------

describe('two nodes behind nginx (round robin, no sticky sessions)', () => {
  it('serves one live session from both nodes: same bytes and ETag, one pipeline run in the cluster', async () => {
    const { key } = await newTenant();
    const voiceId = await remoteVoice(key);
    const runsBefore = await clusterTotal('voicegen_stream_pipeline_runs');
    const relaysBefore = await clusterTotal('voicegen_stream_relay_runs');
    const id = await createTask(key, {
      contents: [440, 550, 660, 770].map((hz) => ({ type: 'text', text: `tone ${String(hz)} 5`, voiceId })),
    });
    const task = await waitTask(key, id, ['processing']);
    const streamUrl = task.streamUrl ?? assert.fail('no streamUrl');

    // The reference: one full live read (no Range) on node B, from byte 0 to the end.
    const reference = send(on(nodeB, streamUrl));
    // 20 readers spread over both nodes (and 4 more through nginx), with random Ranges, while it is live.
    const readers: Promise<{ reply: Reply; range: string }>[] = [];
    for (let n = 0; n < 24; n++) {
      const node = n < 20 ? (n % 2 === 0 ? nodeA : nodeB).url : cluster.url;
      const start = between(0, 400_000);
      const range =
        n % 4 === 3
          ? `bytes=${String(start)}-`
          : `bytes=${String(start)}-${String(start + between(0, 120_000))}`;
      readers.push(send(on(node, streamUrl), { headers: { range } }).then((reply) => ({ reply, range })));
      await sleep(between(0, 150));
    }
    const full = await reference;
    assert.equal(full.status, 200);
    assert.equal(full.truncated, false);
    assert.equal(await ffmpegErrors(full.body), '');
    const etag = full.headers.etag;
    assert.match(String(etag), /^"[A-Za-z0-9_-]+"$/);

    for (const { reply, range } of await Promise.all(readers)) {
      assert.equal(reply.truncated, false, range);
      assert.equal(reply.headers.etag, etag, `ETag of ${range}`);
      if (reply.status === 200) {
        assert.ok(full.body.equals(reply.body), `200 body of ${range} differs`);
        continue;
      }
      assert.equal(reply.status, 206, `${range}: ${reply.body.toString()}`);
      const match = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(String(reply.headers['content-range']));
      assert.ok(match, `Content-Range ${String(reply.headers['content-range'])}`);
      const [from, to] = [Number(match[1]), Number(match[2])];
      assert.ok(full.body.subarray(from, to + 1).equals(reply.body), `206 body of ${range} differs`);
    }
    assert.equal(
      (await clusterTotal('voicegen_stream_pipeline_runs')) - runsBefore,
      1,
      'the pipeline runs once in the cluster',
    );
    assert.equal(
      (await clusterTotal('voicegen_stream_relay_runs')) - relaysBefore,
      1,
      'the other node relays the session once for all its readers',
    );

    // Finished: both nodes redirect to a URL that works on every node, served from the blob store.
    const done = await waitTask(key, id, ['generated']);
    const audioUrl = done.metadata.audio ?? '';
    for (const node of [nodeA, nodeB]) {
      const redirect = await send(on(node, streamUrl));
      assert.equal(redirect.status, 302);
      assert.equal(redirect.headers.location, audioUrl);
    }
    const [fromA, fromB] = await Promise.all([send(on(nodeA, audioUrl)), send(on(nodeB, audioUrl))]);
    assert.equal(fromA.status, 200);
    assert.ok(fromA.body.equals(fromB.body));
    assert.equal(fromA.headers.etag, fromB.headers.etag);
    assert.equal(await ffmpegErrors(fromA.body), '');
    const ranged = await send(on(nodeB, audioUrl), { headers: { range: 'bytes=1000-1999' } });
    assert.equal(ranged.status, 206);
    assert.ok(ranged.body.equals(fromA.body.subarray(1000, 2000)));
  });

  it('lets the load balancer keep finished audio: ranges, HEAD and conditionals from its copy, errors from a node', async () => {
    const { key } = await newTenant();
    const voiceId = await remoteVoice(key);
    const id = await createTask(key, { contents: [{ text: 'tone 523 1', voiceId }] });
    const audioUrl = (await waitTask(key, id, ['generated'])).metadata.audio ?? '';
    assert.ok(audioUrl.startsWith(cluster.url), audioUrl);
    const full = await send(on(nodeA, audioUrl));
    assert.equal(full.status, 200);
    const etag = String(full.headers.etag);
    const header = (reply: Reply, name: string) => String(reply.headers[name]);
    const nodeId = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
    const nginxId = /^[0-9a-f]{32}$/;

    // The first request fills the copy through a node, whose request id it carries.
    const first = await send(audioUrl, { headers: { range: 'bytes=1000-1999' } });
    assert.equal(first.status, 206);
    assert.equal(header(first, 'x-cache-status'), 'MISS');
    assert.match(header(first, 'x-service-app-request-id'), nodeId);
    assert.ok(first.body.equals(full.body.subarray(1000, 2000)));
    // Then nginx answers from the copy, with its own request id and no stale rate-limit counts.
    const again = await send(audioUrl, { headers: { range: 'bytes=1000-1999' } });
    assert.equal(again.status, 206);
    assert.equal(header(again, 'x-cache-status'), 'HIT');
    assert.match(header(again, 'x-service-app-request-id'), nginxId);
    assert.equal(again.headers['x-ratelimit-remaining'], undefined);
    assert.equal(header(again, 'content-range'), `bytes 1000-1999/${String(full.body.length)}`);
    assert.equal(header(again, 'etag'), etag);
    assert.ok(again.body.equals(first.body));
    const head = await send(audioUrl, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(header(head, 'content-length'), String(full.body.length));
    assert.equal(header(head, 'x-cache-status'), 'HIT');
    const whole = await send(audioUrl, { headers: { range: 'bytes=0-9', 'if-range': '"other"' } });
    assert.equal(whole.status, 200);
    assert.ok(whole.body.equals(full.body));
    const part = await send(audioUrl, { headers: { range: 'bytes=0-9', 'if-range': etag } });
    assert.equal(part.status, 206);
    assert.ok(part.body.equals(full.body.subarray(0, 10)));
    assert.equal((await send(audioUrl, { headers: { 'if-none-match': etag } })).status, 304);

    // Parameters a node ignores answer from the same copy (junk cannot fill the cache); a repeated
    // token never does: a node refuses it.
    const junk = await send(`${audioUrl}&junk=1`, { headers: { range: 'bytes=1000-1999' } });
    assert.equal(header(junk, 'x-cache-status'), 'HIT');
    assert.ok(junk.body.equals(first.body));
    const token = new URL(audioUrl).searchParams.get('auth') ?? '';
    const twice = await send(`${audioUrl}&auth=${token}`);
    assert.equal(twice.status, 401);
    assert.notEqual(header(twice, 'x-cache-status'), 'HIT');
    // A copy only answers the token a node checked: a name nginx does not read as `auth` (a node
    // decodes it) is answered by a node and never kept, so no copy answers a query without a token.
    const bare = audioUrl.replace(/\?.*$/, '');
    const encoded = await send(`${bare}?%61uth=${token}`);
    assert.equal(encoded.status, 200);
    assert.equal(header(encoded, 'x-cache-status'), 'BYPASS');
    const tokenless = await send(`${bare}?junk=1`);
    assert.equal(tokenless.status, 401);
    assert.equal(header(tokenless, 'x-cache-status'), 'BYPASS');

    // nginx's own errors from the copy answer the service's error body (no `requestId`: not of the
    // reportable tier) and one request id header.
    const errorOf = (reply: Reply) => {
      const body = JSON.parse(reply.body.toString()) as { status: number; code: string; requestId?: string };
      assert.equal(body.status, reply.status);
      assert.equal(body.requestId, undefined);
      assert.match(header(reply, 'x-service-app-request-id'), /^[0-9a-f-]{32,36}$/);
      assert.match(header(reply, 'content-type'), /^application\/json/);
      return body.code;
    };
    const past = await send(audioUrl, { headers: { range: `bytes=${String(full.body.length + 5)}-` } });
    assert.equal(past.status, 416);
    assert.equal(errorOf(past), 'RANGE_NOT_SATISFIABLE');
    assert.equal(header(past, 'content-range'), `bytes */${String(full.body.length)}`);
    const mismatch = await send(audioUrl, { headers: { 'if-match': '"other"' } });
    assert.equal(mismatch.status, 412);
    assert.equal(errorOf(mismatch), 'PRECONDITION_FAILED');
    // A wrong token is never answered from the copy: a node says no, every time.
    const forged = audioUrl.replace(/auth=[^&]+/, 'auth=forged');
    for (let n = 0; n < 2; n++) {
      const denied = await send(forged);
      assert.equal(denied.status, 403);
      assert.equal(errorOf(denied), 'AUTH_FORBIDDEN');
      assert.match(header(denied, 'x-service-app-request-id'), nodeId);
    }
    // The access log names the path and how it was answered, never the token.
    const log = await cluster.accessLog();
    assert.ok(token.length > 0 && !log.includes(token), 'no auth token in the access log');
    assert.match(
      log,
      new RegExp(`"GET /api/tts/generate/${id}/audio\\.mp3 HTTP/1\\.1" 206 1000 \\S+ cache=HIT`),
    );

    // A deleted task's audio stops being served once the copy's ten seconds are over.
    assert.equal((await api(cluster.url, `/api/tts/generate/${id}`, { method: 'DELETE', key })).status, 200);
    const until = Date.now() + 30_000;
    for (;;) {
      const reply = await send(audioUrl, { headers: { range: 'bytes=0-9' } });
      if (reply.status === 404) {
        assert.match(errorOf(reply), /NOT_FOUND$/);
        break;
      }
      assert.equal(reply.status, 206);
      if (Date.now() > until) assert.fail("the deleted task's audio was still served after 30 s");
      await sleep(500);
    }
  });

  it('counts the rate limit across nodes', async () => {
    const { key } = await newTenant();
    for (let n = 0; n < 60; n++) {
      const reply = await api((n % 2 === 0 ? nodeA : nodeB).url, '/api/account/info', { key });
      assert.equal(reply.status, 200, `request ${String(n + 1)}`);
    }
    for (const node of [nodeA, nodeB]) {
      const reply = await api<{ code: string }>(node.url, '/api/account/info', { key });
      assert.equal(reply.status, 429);
      assert.equal(reply.body.code, 'RATE_LIMIT_EXCEEDED');
      assert.ok(Number(reply.headers.get('retry-after')) >= 1);
    }
  });

  it('uses a splitter saved through one node in a generate on the other', async () => {
    const { key } = await newTenant();
    const voiceId = await remoteVoice(key, nodeA.url);
    const splitter = await api<{ data: { id: string } }>(nodeA.url, '/api/splitter', {
      key,
      body: { name: 'dialogue', config: { '<A>': { voiceId, speechRate: 1 }, fallbackConfig: { voiceId } } },
    });
    assert.equal(splitter.status, 200, JSON.stringify(splitter.body));
    const id = await createTask(
      key,
      { text: 'tone 330 1<A>tone 440 1', splitterId: splitter.body.data.id },
      nodeB.url,
    );
    const done = await waitTask(key, id, ['generated', 'failed']);
    assert.equal(done.status, 'generated');
    assert.equal(done.metadata.contents.length, 2);
  });

  it('lets exactly one of migrateV3 raced on both nodes succeed', async () => {
    const { key, name } = await newTenant();
    const imported = await admin<{ data: { id: string } }>(`/accounts/${name}/voices/import`, {
      name: 'legacy',
      version: 'v2.0',
    });
    assert.equal(imported.status, 200, JSON.stringify(imported.body));
    const replies = await Promise.all(
      Array.from({ length: 10 }, (_, n) =>
        api<{ status: number; code?: string }>(
          (n % 2 === 0 ? nodeA : nodeB).url,
          `/api/voice/${imported.body.data.id}/migrateV3`,
          {
            key,
            method: 'POST',
          },
        ),
      ),
    );
    assert.equal(replies.filter((r) => r.status === 200).length, 1);
    for (const reply of replies.filter((r) => r.status !== 200))
      assert.equal(reply.body.code, 'VOICE_MIGRATE_NOT_NEEDED');
  });

  it('refuses a key revoked on one node on the other within a second', async () => {
    const { name } = await newTenant();
    const created = await admin<{ data: { key: string; id: string } }>(
      `/accounts/${name}/keys`,
      {},
      nodeA.url,
    );
    const { key, id } = created.body.data;
    assert.equal((await api(nodeB.url, '/api/account/info', { key })).status, 200);
    assert.equal((await admin(`/keys/${id}/revoke`, {}, nodeA.url)).status, 200);
    const until = Date.now() + 1000;
    let status = 0;
    do {
      status = (await api(nodeB.url, '/api/account/info', { key })).status;
    } while (status !== 401 && Date.now() < until);
    assert.equal(status, 401);
  });

  it("ends a rotated stream token on the other node within a second and behind the load balancer within its copy's 10 s", async () => {
    const { key } = await newTenant();
    const voiceId = await remoteVoice(key);
    const id = await createTask(key, { contents: [{ text: 'tone 440 1', voiceId }] });
    const task = await waitTask(key, id, ['generated']);
    const oldAudio = String(task.metadata.audio);
    // Node B remembers the finished task; the load balancer keeps a copy of its audio.
    assert.equal((await fetch(on(nodeB, oldAudio))).status, 200);
    assert.equal((await fetch(oldAudio)).status, 200);
    const rotated = await api<{ data: TaskView }>(nodeA.url, `/api/tts/generate/${id}/rotate-token`, {
      method: 'POST',
      key,
    });
    assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
    const rotatedAt = Date.now();
    const newAudio = String(rotated.body.data.metadata.audio);
    assert.notEqual(newAudio, oldAudio);

    // Node B hears the announcement (or its 500 ms memory ends): the old token is refused there.
    let status = 0;
    do status = (await fetch(on(nodeB, oldAudio))).status;
    while (status !== 403 && Date.now() < rotatedAt + 1000);
    assert.equal(status, 403);
    const oldStream = await fetch(on(nodeB, String(task.streamUrl)), { redirect: 'manual' });
    assert.equal(oldStream.status, 403);
    assert.equal((await fetch(on(nodeB, newAudio))).status, 200);

    // The load balancer's copy of the old URL lasts at most its 10 s, then a node refuses it.
    for (;;) {
      status = (await fetch(oldAudio)).status;
      if (status === 403 || Date.now() > rotatedAt + 15_000) break;
      await sleep(250);
    }
    assert.equal(status, 403);
    assert.ok(Date.now() - rotatedAt < 12_000, `the old URL was served ${String(Date.now() - rotatedAt)} ms`);
    assert.equal((await fetch(newAudio)).status, 200);
  });

  it('answers one-shot direct MP3 on either node, whichever node synthesises it', async () => {
    const { key } = await newTenant();
    const voiceId = await remoteVoice(key);
    for (const node of [nodeA, nodeB, nodeA, nodeB]) {
      const response = await fetch(`${node.url}/api/tts/simple-generate`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ text: 'tone 500 2', voiceId, direct_stream: true }),
      });
      if (response.status !== 200) {
        const logs = cluster.nodes.map((n) => `--- ${n.name}\n${n.output().slice(-3000)}`).join('\n');
        assert.fail(`${String(response.status)} ${await response.text()} on ${node.name}\n${logs}`);
      }
      assert.equal(response.headers.get('content-type'), 'audio/mpeg');
      const mp3 = Buffer.from(await response.arrayBuffer());
      assert.equal(await ffmpegErrors(mp3), '');
      assert.ok(Math.abs((await probeAudio(mp3)).durationSeconds - 2) < 0.1);
    }
  });

  it('answers /v1 speech as WAV on either node', async () => {
    const { key } = await newTenant();
    const voiceId = await remoteVoice(key);
    for (const node of [nodeA, nodeB, nodeA, nodeB]) {
      const response = await fetch(`${node.url}/v1/audio/speech`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tts-1', input: 'tone 500 2', voice: voiceId, response_format: 'wav' }),
      });
      if (response.status !== 200)
        assert.fail(`${String(response.status)} ${await response.text()} on ${node.name}`);
      assert.equal(response.headers.get('content-type'), 'audio/wav');
      const wav = Buffer.from(await response.arrayBuffer());
      assert.equal(await ffmpegErrors(wav), '');
      const info = await probeAudio(wav);
      assert.equal(info.codec, 'pcm_s16le');
      assert.equal(info.sampleRate, 24_000);
      const seconds = (wav.length - 44) / 2 / 24_000;
      assert.ok(Math.abs(seconds - 2) < 0.1, `${String(seconds)} s on ${node.name}`);
    }
  });

  it("forwards an instruct piece's upstream MP3 unchanged on either node, relayed from its generator", async () => {
    const { key } = await newTenant();
    const voiceId = await remoteVoice(key);
    const relaysBefore = await clusterTotal('voicegen_stream_relay_runs');
    const input = 'held 480 6';
    const id = await createTask(key, {
      contents: [{ type: 'text', text: input, voiceId, instruct_mode: true }],
    });
    const task = await waitTask(key, id, ['processing']);
    const url = (task.streamUrl ?? assert.fail('no streamUrl')).replace('/stream.mp3?', '/0/stream.mp3?');
    const { node: owner, other } = await generatorOf(id);
    // Live on both nodes while the upstream holds the second half: the other node relays the owner's build.
    const readers = [send(on(other, url)), send(on(owner, url)), send(on(other, url))];
    const expected = await toneMp3(480, 6);
    const early = await send(on(other, url), { headers: { range: 'bytes=0-999' } });
    assert.equal(early.status, 206, early.body.toString());
    assert.equal(early.headers['content-range'], 'bytes 0-999/*', 'live: the upstream still holds the rest');
    assert.ok(early.body.equals(expected.subarray(0, 1000)));
    holdFor(input).release();
    const replies = await Promise.all(readers);
    for (const reply of replies) {
      assert.equal(reply.status, 200);
      assert.equal(reply.truncated, false);
      assert.equal(reply.headers.etag, early.headers.etag, 'one build, the same ETag on both nodes');
      assert.ok(reply.body.equals(expected), 'the upstream bytes, unchanged');
    }
    assert.equal(upstreamBodies.get(input)?.sample_rate, 24000);
    assert.equal(
      (await clusterTotal('voicegen_stream_relay_runs')) - relaysBefore,
      1,
      'the other node relays the session once for all its readers',
    );
    // Finished: the stored per-piece audio is the same bytes, served by every node.
    const done = await waitTask(key, id, ['generated']);
    const stored = done.metadata.contents[0]?.audio ?? assert.fail('no piece audio');
    for (const node of [nodeA, nodeB]) assert.ok((await send(on(node, stored))).body.equals(expected));
  });

  it('hands the task of a node stopped with SIGTERM to the other node', async () => {
    const { key } = await newTenant();
    const voiceId = await remoteVoice(key);
    const id = await createTask(key, {
      contents: [310, 410, 510].map((hz) => ({ type: 'text', text: `tone ${String(hz)} 4`, voiceId })),
    });
    await waitTask(key, id, ['processing']);
    try {
      const { node: stopping, other: survivor } = await generatorOf(id);
      await sleep(1000);
      await stopping.kill('SIGTERM');
      assert.equal(stopping.child.exitCode, 0, 'a clean shutdown');
      const done = await waitTask(key, id, ['generated', 'failed']);
      assert.equal(done.status, 'generated');
      assert.equal((await generatorOf(id)).node, survivor);
      const finished = await send(on(survivor, done.metadata.audio ?? ''));
      assert.equal(await ffmpegErrors(finished.body), '');
      assert.ok(Math.abs((await probeAudio(finished.body)).durationSeconds - done.estimatedDuration) < 0.2);
    } finally {
      await restartStoppedNodes();
    }
  });

  it('survives SIGKILL of the node generating a task: the task moves, a reader retries and gets a complete MP3', async () => {
    const { key } = await newTenant();
    const voiceId = await remoteVoice(key);
    const id = await createTask(key, {
      contents: [300, 400, 500, 600].map((hz) => ({ type: 'text', text: `tone ${String(hz)} 4`, voiceId })),
    });
    const task = await waitTask(key, id, ['processing']);
    const streamUrl = task.streamUrl ?? assert.fail('no streamUrl');
    try {
      const { node: owner, other: survivor } = await generatorOf(id);

      // A live reader on the survivor (a relay of the owner's session); kill the owner mid-build.
      const first = send(on(survivor, streamUrl));
      await sleep(1500);
      await owner.kill('SIGKILL');
      const cut = await first;
      assert.equal(cut.status, 200);
      assert.equal(cut.truncated, true, 'the live stream is cut when its owner dies');

      // The reader retries on the survivor until it gets a complete stream (503 + Retry-After meanwhile).
      const until = Date.now() + 60_000;
      let complete: Reply | undefined;
      while (complete === undefined) {
        assert.ok(Date.now() < until, 'no complete stream within 60 s');
        const reply = await send(on(survivor, streamUrl));
        if (reply.status === 302) {
          complete = await send(on(survivor, String(reply.headers.location)));
        } else if (reply.status === 200 && !reply.truncated) {
          complete = reply;
        } else {
          assert.ok([200, 503].includes(reply.status), `${String(reply.status)} ${reply.body.toString()}`);
          await sleep(
            reply.status === 503 ? Math.min(1000, 1000 * Number(reply.headers['retry-after'] ?? 1)) : 200,
          );
        }
      }
      assert.equal(complete.status, 200);
      assert.notEqual(complete.headers.etag, cut.headers.etag, 'a rebuilt session has a new ETag');
      assert.equal(await ffmpegErrors(complete.body), '');

      // The task was taken over by the survivor, is not left processing, and holds no piece twice.
      const done = await waitTask(key, id, ['generated', 'failed']);
      assert.equal(done.status, 'generated');
      assert.equal((await generatorOf(id)).node, survivor);
      const pieces = await database.query<{ n: string }>(
        'select count(*) as n from task_contents where task_id = $1',
        [id],
      );
      assert.equal(Number(pieces.rows[0]?.n), 4);
      const finished = await send(on(survivor, done.metadata.audio ?? ''));
      const probe = await probeAudio(finished.body);
      assert.ok(
        Math.abs(probe.durationSeconds - done.estimatedDuration) < 0.2,
        `${String(probe.durationSeconds)} vs ${String(done.estimatedDuration)}`,
      );
      assert.ok(probe.durationSeconds < 4 * 4 + 4 * 0.5 + 0.5, 'no piece is in the finished audio twice');
    } finally {
      await restartStoppedNodes();
    }
  });
});
