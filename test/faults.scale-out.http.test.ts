// The fault and fuzz suites against the scale-out adapters: one scale-out app
// (in process, listening) on its OWN disposable servers — a private PostgreSQL cluster (initdb +
// pg_ctl, really restarted), a private redis-server and a private s3rver, each on a free port —
// so the shared test servers other test files use are never disturbed. Redis killed (idle, while a
// task generates) and started again on the same port; PostgreSQL restarted under requests and a
// generating task; the S3 store stopped while finished audio is stored and while it is read.
// Invariants: every answer is a documented status with the spec body (503 with Retry-After, never
// a 500 or a hang), nothing is lost or left processing, and the node recovers without a restart.
// Then the fuzz suite's seeded generators and invariants against the same app.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import pg from 'pg';
import fc from 'fast-check';
import { injectRequest, type FuzzContext } from './fuzz/arbitraries.js';
import { checkStoredData, createFuzzContext, FUZZ_ENV } from './fuzz/context.js';
import { checkResponse, FuzzTally, type FuzzRequest } from './fuzz/invariants.js';
import { runInjectCases, runRawCases } from './fuzz/run.js';
import { injectCase } from './fuzz/transport.js';
import { ffmpegErrors } from './helpers/audio-check.js';
import { freePort } from './helpers/free-port.js';
import { send } from './helpers/http-client.js';
import { speechMp3, startTestApp, type TestApp } from './helpers/test-app.js';

/** Fixed seed: CI runs the same cases every time. */
const SEED = 20_110_311;
/** Every wait of the test ends by this much. */
const WAIT_MS = 30_000;
/** An answer must come within this (a hang is a failure, not a slow pass). */
const ANSWER_MS = 20_000;
const TASK_LEASE_MS = 2000;
/** Fuzz cases on the healthy scale-out app (in process, raw sockets) and with Redis down. */
const FUZZ_INJECT_CASES = 300;
const FUZZ_RAW_CASES = 100;
const FUZZ_OUTAGE_CASES = 40;

// ---------------------------------------------------------------------------------------------
// Private servers

/** True when something accepts TCP connections on 127.0.0.1:`port`. */
function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function waitPort(port: number, open: boolean, what: string): Promise<void> {
  const until = Date.now() + WAIT_MS;
  while ((await portOpen(port)) !== open) {
    if (Date.now() > until)
      throw new Error(`${what} did not ${open ? 'open' : 'close'} port ${String(port)}`);
    await sleep(50);
  }
}

/** A child process the test owns, killed at the end whatever happens. */
class OwnedProcess {
  private child: ChildProcess | undefined;
  private output = '';

  constructor(
    private readonly name: string,
    private readonly command: string,
    private readonly args: readonly string[],
    readonly port: number,
  ) {}

  async start(): Promise<void> {
    const child = spawn(this.command, this.args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk: Buffer) => {
      this.output = (this.output + chunk.toString()).slice(-4000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    this.child = child;
    await waitPort(this.port, true, this.name).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${this.output}`);
    });
  }

  /** Starts it again if a test left it stopped. */
  async ensureRunning(): Promise<void> {
    if (this.child === undefined) await this.start();
  }

  /** SIGKILL (a crash: no shutdown work) and waits until the port is closed. */
  async kill(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
    await waitPort(this.port, false, this.name);
  }
}

/**
 * A private PostgreSQL cluster: initdb into a temporary directory, pg_ctl start/restart/stop. As
 * root, the commands run as the `postgres` user (initdb refuses root), as scripts/test-servers.sh.
 */
class PrivatePostgres {
  readonly url: string;
  private readonly bin: string;
  private readonly dataDir: string;

  constructor(
    root: string,
    readonly port: number,
  ) {
    const versions = spawnSync('sh', ['-c', 'ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1'], {
      encoding: 'utf8',
    });
    this.bin = versions.stdout.trim();
    if (this.bin === '') throw new Error('no PostgreSQL in /usr/lib/postgresql (apt-get install postgresql)');
    this.dataDir = join(root, 'pg');
    this.url = `postgres://postgres@127.0.0.1:${String(port)}/postgres`;
  }

  /** Runs a PostgreSQL tool without blocking the event loop (the app under test shares it). */
  private async run(tool: string, args: readonly string[]): Promise<void> {
    const asRoot = process.getuid?.() === 0;
    const command = asRoot ? 'runuser' : join(this.bin, tool);
    const argv = asRoot ? ['-u', 'postgres', '--', join(this.bin, tool), ...args] : [...args];
    const child = spawn(command, argv, { stdio: ['ignore', 'pipe', 'pipe'], timeout: WAIT_MS });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];
    if (code !== 0) throw new Error(`${tool} ${args.join(' ')}: ${output}`);
  }

  private get options(): string {
    return `-p ${String(this.port)} -k '' -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50`;
  }

  async init(): Promise<void> {
    await mkdir(this.dataDir);
    if (process.getuid?.() === 0) {
      await chmod(join(this.dataDir, '..'), 0o755);
      spawnSync('chown', ['postgres', this.dataDir]);
    }
    await this.run('initdb', ['-D', this.dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8']);
    await this.run('pg_ctl', [
      '-D',
      this.dataDir,
      '-l',
      join(this.dataDir, 'server.log'),
      '-w',
      '-o',
      this.options,
      'start',
    ]);
  }

  /** A fast restart: PostgreSQL ends every session (clients see their connections terminated). */
  async restart(): Promise<void> {
    await this.run('pg_ctl', ['-D', this.dataDir, '-m', 'fast', '-w', '-o', this.options, 'restart']);
  }

  async stop(): Promise<void> {
    await this.run('pg_ctl', ['-D', this.dataDir, '-m', 'immediate', '-w', 'stop']);
  }
}

// ---------------------------------------------------------------------------------------------
// The upstream engine: answers a fixed MP3, each call waiting for the current gate first.

let upstreamMp3: Buffer = Buffer.alloc(0);
let gate: Promise<void> = Promise.resolve();
let openGate: () => void = () => undefined;

/** Holds every engine call from now on until `release()`. */
function holdEngine(): { release: () => void } {
  gate = new Promise<void>((resolve) => {
    openGate = resolve;
  });
  return { release: () => openGate() };
}

const upstream: Server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    void gate.then(() => {
      res.writeHead(200, { 'content-type': 'audio/mpeg' });
      res.end(upstreamMp3);
    });
  });
});

// ---------------------------------------------------------------------------------------------

let root: string;
let postgres: PrivatePostgres;
let redis: OwnedProcess;
let s3: OwnedProcess;
let t: TestApp;
let db: pg.Pool;
let voiceId: string;
let fuzz: FuzzContext;

before(async () => {
  root = await mkdtemp(join(tmpdir(), 'voicegen-faults-'));
  postgres = new PrivatePostgres(root, await freePort());
  await postgres.init();
  const redisPort = await freePort();
  redis = new OwnedProcess(
    'redis-server',
    'redis-server',
    // Append-only file fsynced on every write: a killed Redis comes back with its data, as a
    // production Redis holding a BullMQ queue must be run.
    [
      '--port',
      String(redisPort),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'yes',
      '--appendfsync',
      'always',
      '--dir',
      root,
    ],
    redisPort,
  );
  await redis.start();
  const s3Port = await freePort();
  await mkdir(join(root, 's3'));
  s3 = new OwnedProcess(
    's3rver',
    process.execPath,
    ['scripts/s3-test-server.mjs', String(s3Port), join(root, 's3')],
    s3Port,
  );
  await s3.start();
  const bucket = 'voicegen-faults';
  const client = new S3Client({
    endpoint: `http://127.0.0.1:${String(s3Port)}`,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
  });
  await client.send(new CreateBucketCommand({ Bucket: bucket }));
  client.destroy();

  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamPort = (upstream.address() as { port: number }).port;
  t = await startTestApp({
    listen: true,
    env: {
      ...FUZZ_ENV,
      DATABASE_URL: postgres.url,
      REDIS_URL: `redis://127.0.0.1:${String(redisPort)}`,
      REDIS_PREFIX: 'faults:',
      S3_ENDPOINT: `http://127.0.0.1:${String(s3Port)}`,
      S3_BUCKET: bucket,
      S3_REGION: 'us-east-1',
      S3_ACCESS_KEY_ID: 'S3RVER',
      S3_SECRET_ACCESS_KEY: 'S3RVER',
      S3_FORCE_PATH_STYLE: 'true',
      TASK_LEASE_MS: String(TASK_LEASE_MS),
      SESSION_LEASE_MS: String(TASK_LEASE_MS),
      SYNTHESIS_THREADS: '1',
      ENCODER_THREADS: '1',
      REMOTE_ENGINES: JSON.stringify({ local: { baseUrl: `http://127.0.0.1:${String(upstreamPort)}` } }),
    },
  });
  upstreamMp3 = await speechMp3(t.app, 'One two three.');
  db = new pg.Pool({ connectionString: postgres.url, max: 2 });
  db.on('error', () => undefined);
  db.on('connect', (client) => client.on('error', () => undefined));
  const voice = await call('POST', '/api/voice', {
    name: 'Upstream',
    engine: { engine: 'remote', endpoint: 'local', voice: 'alloy' },
  });
  assert.equal(voice.status, 200, voice.text);
  voiceId = (JSON.parse(voice.text) as { data: { id: string } }).data.id;
  fuzz = await createFuzzContext(t.app, { key: t.key, accountId: t.accountId }, await t.newAccount());
});

after(async () => {
  openGate();
  // The app closes against running servers (a test that failed may have left one down).
  await redis?.ensureRunning();
  await s3?.ensureRunning();
  await t?.close();
  await db?.end();
  await redis?.kill();
  await s3?.kill();
  await postgres?.stop().catch(() => undefined);
  upstream.closeAllConnections();
  await new Promise((resolve) => upstream.close(resolve));
  if (root !== undefined) await rm(root, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// Helpers

interface Answer {
  status: number;
  text: string;
  headers: Record<string, string | string[] | undefined>;
}

/** One API request with the test account's key, over the network, bounded by ANSWER_MS. */
async function call(method: string, path: string, body?: unknown, key = t.key): Promise<Answer> {
  const response = await fetch(`${t.baseUrl}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? null : JSON.stringify(body),
    signal: AbortSignal.timeout(ANSWER_MS),
  });
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    headers[name] = value;
  });
  return { status: response.status, text: await response.text(), headers };
}

/** The fuzz suite's invariants on one answer (documented status, spec body, Retry-After on 503). */
function assertInvariants(method: string, path: string, answer: Answer): void {
  const request: FuzzRequest = { label: 'faults', method, url: path, headers: {} };
  const problems = checkResponse(request, {
    status: answer.status,
    headers: answer.headers,
    body: Buffer.from(answer.text),
  });
  assert.deepEqual(problems, [], `${method} ${path} → ${String(answer.status)} ${answer.text}`);
}

/** A generate request of `pieces` contents on the upstream voice. */
async function createTask(pieces = 1): Promise<string> {
  const answer = await call('POST', '/api/tts/generate', {
    contents: Array.from({ length: pieces }, (_, n) => ({
      type: 'text',
      text: `piece ${String(n)}`,
      voiceId,
    })),
  });
  assert.equal(answer.status, 200, answer.text);
  return (JSON.parse(answer.text) as { data: { id: string } }).data.id;
}

/** Polls the task's row (directly in PostgreSQL) until its status is one of `statuses`. */
async function waitStatus(id: string, statuses: readonly string[], deadlineMs = WAIT_MS): Promise<string> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const row = await db
      .query<{ status: string; audio_key: string | null }>(
        'select status, audio_key from tasks where id = $1',
        [id],
      )
      .then((r) => r.rows[0])
      .catch(() => undefined);
    if (
      row !== undefined &&
      statuses.includes(row.status) &&
      (row.status !== 'generated' || row.audio_key !== null)
    )
      return row.status;
    if (Date.now() > until)
      assert.fail(`task ${id} is ${String(row?.status)} after ${String(deadlineMs)} ms`);
    await sleep(50);
  }
}

/** Repeats GET `path` until it answers `status` (the node recovered), failing after WAIT_MS. */
async function waitRecovered(path: string, status = 200): Promise<void> {
  const until = Date.now() + WAIT_MS;
  let last: Answer | undefined;
  while (Date.now() < until) {
    last = await call('GET', path).catch(() => undefined);
    if (last?.status === status) return;
    await sleep(200);
  }
  assert.fail(
    `${path} did not answer ${String(status)} again: ${String(last?.status)} ${String(last?.text)}`,
  );
}

/** The audio URL of a generated task and its auth token. */
async function finishedAudio(id: string): Promise<string> {
  const detail = await call('GET', `/api/tts/generate/${id}`);
  assert.equal(detail.status, 200, detail.text);
  const audio = (JSON.parse(detail.text) as { data: { metadata: { audio?: string } } }).data.metadata.audio;
  assert.ok(audio !== undefined, detail.text);
  return audio;
}

/** Tasks that are not finished (a fault must not leave one behind). */
async function unfinishedTasks(): Promise<string[]> {
  const { rows } = await db.query<{ id: string; status: string }>(
    "select id, status from tasks where status in ('pending', 'processing')",
  );
  return rows.map((r) => `${r.id} ${r.status}`);
}

// ---------------------------------------------------------------------------------------------

describe('scale-out faults: Redis down', () => {
  it('idle: answers are 200 or 503 with Retry-After and the spec body, never 500 or a hang; recovers when Redis returns', async () => {
    const id = await createTask();
    await waitStatus(id, ['generated']);
    const audio = await finishedAudio(id);
    const audioPath = new URL(audio).pathname + new URL(audio).search;

    await redis.kill();
    try {
      const probes: [string, string, unknown?][] = [
        ['GET', '/healthz'],
        ['GET', '/api/account/info'],
        ['GET', `/api/tts/generate/${id}`],
        ['GET', '/api/tts/generate?page=1'],
        ['GET', audioPath],
        ['POST', '/api/tts/generate', { contents: [{ type: 'text', text: 'x', voiceId }] }],
      ];
      for (const [method, path, body] of probes) {
        const answer = await call(method, path, body);
        assertInvariants(method, path, answer);
      }
      // Alive, but not ready: /readyz names the dependency that does not answer.
      assert.equal((await call('GET', '/healthz')).status, 200);
      const ready = await call('GET', '/readyz');
      assertInvariants('GET', '/readyz', ready);
      assert.equal(ready.status, 503);
      assert.match(ready.text, /not ready: redis unreachable/);
    } finally {
      await redis.start();
    }
    await waitRecovered('/api/account/info');
    assert.equal((await call('GET', '/readyz')).status, 200, 'ready again once Redis is back');
    const after = await createTask();
    assert.equal(await waitStatus(after, ['generated', 'failed']), 'generated');
    assert.deepEqual(await unfinishedTasks(), []);
  });

  it('while a task generates: the running and the queued task both end generated after Redis returns, none left behind', async () => {
    const hold = holdEngine();
    let running = '';
    let queued = '';
    try {
      running = await createTask(2);
      await waitStatus(running, ['processing']);
      queued = await createTask(1); // behind the one generation slot
      await redis.kill();
      // Longer than a lease: the node's watchdog gives the running delivery up meanwhile.
      await sleep(TASK_LEASE_MS * 2);
      const answer = await call('GET', `/api/tts/generate/${running}`);
      assertInvariants('GET', 'task detail', answer);
      assert.equal(answer.status, 503);
    } finally {
      await redis.start();
      hold.release();
    }
    assert.equal(await waitStatus(running, ['generated', 'failed']), 'generated');
    assert.equal(await waitStatus(queued, ['generated', 'failed']), 'generated');
    assert.deepEqual(await unfinishedTasks(), []);
    const pieces = await db.query<{ n: string }>(
      "select count(*) as n from task_contents where task_id = $1 and status = 'generated'",
      [running],
    );
    assert.equal(Number(pieces.rows[0]?.n), 2);
  });
});

describe('scale-out faults: PostgreSQL restart', () => {
  it('requests during a restart answer 200 or 503 STORAGE_UNAVAILABLE; the pool reconnects without a node restart', async (test) => {
    const id = await createTask();
    await waitStatus(id, ['generated']);
    const paths = ['/api/account/info', `/api/tts/generate/${id}`, '/api/tts/generate?page=1', '/api/voice'];
    // Every pooled connection is open (a burst), then the server ends them all.
    await Promise.all(paths.flatMap((path) => [call('GET', path), call('GET', path)]));
    const burst = Promise.all(
      Array.from({ length: 24 }, async (_, n) => {
        await sleep(n * 15);
        const path = paths[n % paths.length] ?? '';
        return { path, answer: await call('GET', path) };
      }),
    );
    await postgres.restart();
    const statuses: number[] = [];
    for (const { path, answer } of await burst) {
      assertInvariants('GET', path, answer);
      statuses.push(answer.status);
      if (answer.status !== 200)
        assert.equal((JSON.parse(answer.text) as { code: string }).code, 'STORAGE_UNAVAILABLE');
    }
    // Right after the restart: connections the server ended are replaced, at most one 503 each.
    const after: number[] = [];
    for (let n = 0; n < 12; n++) after.push((await call('GET', '/api/account/info')).status);
    assert.ok(
      after.slice(-2).every((s) => s === 200),
      `after the restart: ${after.join(' ')}`,
    );
    await waitRecovered('/api/account/info');
    test.diagnostic(`during the restart: ${statuses.join(' ')}; after: ${after.join(' ')}`);
  });

  it('a task generating and a task queued across a restart both end generated', async () => {
    const hold = holdEngine();
    let running = '';
    let queued = '';
    try {
      running = await createTask(2);
      await waitStatus(running, ['processing']);
      queued = await createTask(1);
      await postgres.restart();
    } finally {
      hold.release();
    }
    const first = await waitStatus(running, ['generated', 'failed']);
    const second = await waitStatus(queued, ['generated', 'failed']);
    const errors = await db.query<{ id: string; error: string | null }>(
      'select id, error from tasks where id = any($1)',
      [[running, queued]],
    );
    assert.deepEqual([first, second], ['generated', 'generated'], JSON.stringify(errors.rows));
    assert.deepEqual(await unfinishedTasks(), []);
  });
});

describe('scale-out faults: S3 store down', () => {
  it('finished audio while the store is down: 503 STORAGE_UNAVAILABLE with Retry-After; the same bytes when it returns', async () => {
    const id = await createTask();
    await waitStatus(id, ['generated']);
    const audio = await finishedAudio(id);
    const before = await send(audio);
    assert.equal(before.status, 200);
    await s3.kill();
    try {
      for (const headers of [{}, { range: 'bytes=0-99' }] as Record<string, string>[]) {
        const answer = await send(audio, { headers });
        const text = answer.body.toString();
        assertInvariants('GET', 'finished audio', { status: answer.status, text, headers: answer.headers });
        assert.equal(answer.status, 503, text);
        assert.equal((JSON.parse(text) as { code: string }).code, 'STORAGE_UNAVAILABLE');
      }
      const head = await send(audio, { method: 'HEAD' });
      assert.equal(head.status, 503);
      assert.ok(head.headers['retry-after'] !== undefined);
    } finally {
      await s3.start();
    }
    const again = await send(audio);
    assert.equal(again.status, 200);
    assert.ok(again.body.equals(before.body), 'the same bytes after the store returns');
  });

  it('a task storing its audio while the store is down ends clearly (generated, or failed with a message), never with a broken blob', async () => {
    const hold = holdEngine();
    let id = '';
    try {
      id = await createTask(2);
      await waitStatus(id, ['processing']);
      await s3.kill();
      hold.release();
      await sleep(TASK_LEASE_MS);
    } finally {
      hold.release();
      await s3.start();
    }
    const status = await waitStatus(id, ['generated', 'failed']);
    const detail = await call('GET', `/api/tts/generate/${id}`);
    if (status === 'generated') {
      const audio = await send(await finishedAudio(id));
      assert.equal(audio.status, 200);
      assert.equal(await ffmpegErrors(audio.body), '', 'the stored audio is a whole MP3');
    } else {
      const error = (JSON.parse(detail.text) as { data: { error?: string } }).data.error ?? '';
      assert.doesNotMatch(error, /127\.0\.0\.1|ECONNREFUSED|bucket/, 'no endpoint detail for tenants');
    }
    assert.deepEqual(await unfinishedTasks(), []);
  });
});

describe('fuzz suite against the scale-out app', () => {
  const assertClean = (family: string, tally: FuzzTally) => {
    const shown = tally.violations.slice(0, 10).map((v) => FuzzTally.describe(v));
    assert.equal(
      tally.violations.length,
      0,
      `${family}: ${String(tally.violations.length)} violations\n${shown.join('\n')}`,
    );
  };

  it(`${String(FUZZ_INJECT_CASES)} in-process and ${String(FUZZ_RAW_CASES)} raw-socket cases hold every invariant; nothing invalid stored`, async (test) => {
    const injected = new FuzzTally();
    await runInjectCases(t.app, fuzz, { seed: SEED, numRuns: FUZZ_INJECT_CASES, tally: injected });
    assertClean('inject', injected);
    const raw = new FuzzTally();
    await runRawCases(Number(new URL(t.baseUrl).port), fuzz, {
      seed: SEED,
      numRuns: FUZZ_RAW_CASES,
      tally: raw,
      parallel: 4,
    });
    assertClean('raw', raw);
    test.diagnostic(
      `inject: ${String(injected.cases)} cases, ${String(injected.serverErrors)} 5xx; raw: ${String(raw.cases)} cases`,
    );
    const stored = await checkStoredData(t.app, fuzz);
    assert.deepEqual(stored.problems, []);
    assert.ok(stored.read > 0);
  });

  it(`${String(FUZZ_OUTAGE_CASES)} cases with Redis down: documented answers only (503 + Retry-After where Redis is needed)`, async (test) => {
    const cases = fc.sample(injectRequest(fuzz), { seed: SEED + 1, numRuns: FUZZ_OUTAGE_CASES });
    const tally = new FuzzTally();
    await redis.kill();
    try {
      // In parallel: each answer that needs Redis takes the client's retries (seconds) to come.
      let next = 0;
      const worker = async () => {
        for (let request = cases[next++]; request !== undefined; request = cases[next++]) {
          const res = await injectCase(t.app, request);
          // A HEAD has no body to carry the code: its 503 must still say when to retry.
          const problems = checkResponse(request, res).filter(
            (p) => !(p === '5xx 503 on HEAD' && res.headers['retry-after'] !== undefined),
          );
          tally.record(request, res, problems);
        }
      };
      await Promise.all(Array.from({ length: 10 }, worker));
    } finally {
      await redis.start();
    }
    assertClean('inject with Redis down', tally);
    test.diagnostic(
      `${String(tally.cases)} cases: ${[...tally.statuses.entries()].map(([s, n]) => `${String(s)}×${String(n)}`).join(' ')}`,
    );
    assert.ok((tally.statuses.get(503) ?? 0) > 0, 'some answers needed Redis');
    await waitRecovered('/api/account/info');
    const id = await createTask();
    assert.equal(await waitStatus(id, ['generated', 'failed']), 'generated');
  });
});
