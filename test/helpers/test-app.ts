/**
 * Builds a real app for HTTP tests: a temporary DATA_DIR and a real embedded database, started
 * from a migrated PGlite template (initdb once per test run instead of once per app).
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildApp, type App, type AppOptions } from '../../src/app.js';
import { encodePiece } from '../../src/audio/continuous-encoder.js';
import { loadConfig, type AppConfig } from '../../src/config/config.js';
import { createPgliteTemplate } from '../../src/storage/database.pglite.js';
import { migrations } from '../../src/storage/migrations/index.js';
import type { TaskDetailView } from '../../src/tasks/task-service.js';
import { freePort } from './free-port.js';

let template: Promise<Blob> | undefined;

/** A PGlite data-dir dump with every migration applied, cached on disk per migration set. */
function pgliteTemplate(): Promise<Blob> {
  template ??= (async () => {
    const file = join(tmpdir(), `voicegen-pglite-template-${Object.keys(migrations).join('+')}.tar.gz`);
    const cached = await readFile(file).catch(() => undefined);
    if (cached) return new Blob([cached]);
    const dump = await createPgliteTemplate();
    await writeFile(`${file}.${process.pid}`, Buffer.from(await dump.arrayBuffer()));
    const { rename } = await import('node:fs/promises');
    await rename(`${file}.${process.pid}`, file);
    return dump;
  })();
  return template;
}

export interface TestApp {
  app: App;
  /** Base URL when started with `listen: true`. */
  baseUrl: string;
  /** A bearer key of a fresh account. */
  key: string;
  accountId: string;
  /** Creates another account with its own key. */
  newAccount(name?: string): Promise<{ key: string; accountId: string }>;
  close(): Promise<void>;
}

let counter = 0;

/** Starts an app on a temporary DATA_DIR with one account; `env` overrides config variables. */
export async function startTestApp(
  options: {
    env?: Record<string, string>;
    listen?: boolean;
    dataDir?: string;
    /** Logger option of buildApp, e.g. `{ stream }` (with LOG_LEVEL in env) to capture log lines; off by default. */
    logger?: AppOptions['logger'];
    /** Warm up the embedded database in the background, as the service's entry point does. */
    warmUpDatabase?: boolean;
  } = {},
): Promise<TestApp> {
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), 'voicegen-test-')));
  // A listening app needs its real port in PUBLIC_URL (the URLs it returns), so pick one first.
  const port = options.listen ? await freePort() : 0;
  const config: AppConfig = loadConfig({
    DATA_DIR: dataDir,
    PORT: String(port),
    LOG_LEVEL: 'silent',
    ...options.env,
  });
  const app = await buildApp(config, {
    pgliteTemplate: await pgliteTemplate(),
    logger: options.logger ?? false,
  });
  if (options.warmUpDatabase === true) app.warmUpDatabase();
  let baseUrl = '';
  if (options.listen) {
    await app.http.listen({ host: '127.0.0.1', port });
    baseUrl = `http://127.0.0.1:${port}`;
  }
  const newAccount = async (name = `acct-${process.pid}-${++counter}`) => {
    const account = await app.services.accounts.createAccount(name);
    const { key } = await app.services.accounts.createKey(account.id);
    return { key, accountId: account.id };
  };
  const first = await newAccount();
  return {
    app,
    baseUrl,
    key: first.key,
    accountId: first.accountId,
    newAccount,
    close: async () => {
      await app.close();
      if (options.dataDir === undefined) await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Authorization header for a key. */
export function bearer(key: string): { authorization: string } {
  return { authorization: `Bearer ${key}` };
}

/** Real MP3 for a fake upstream engine: the app's own espeak speech through its own encoder. */
export async function speechMp3(app: App, text: string): Promise<Buffer> {
  const binding = { engine: 'espeak', voice: 'en-us' } as const;
  const pcm = app.services.synthesis
    .engineFor(binding)
    .synthesize({ text, voice: binding, speechRate: 1 }, new AbortController().signal);
  const parts: Uint8Array[] = [];
  for await (const bytes of encodePiece(pcm, app.services.encoders.open())) parts.push(bytes);
  return Buffer.concat(parts);
}

/** Creates a voice through the API (default: a name only, the embedded engine) and returns its id. */
export async function createVoice(
  app: App,
  key: string,
  body: Record<string, unknown> = { name: 'Narrator' },
): Promise<string> {
  const res = await app.http.inject({
    method: 'POST',
    url: '/api/voice',
    headers: bearer(key),
    payload: body,
  });
  if (res.statusCode !== 200) throw new Error(`creating a voice: ${String(res.statusCode)} ${res.body}`);
  return res.json<{ data: { id: string } }>().data.id;
}

/** Creates a generation task through the API from its contents and returns its id. */
export async function createTask(
  app: App,
  key: string,
  contents: Record<string, unknown>[],
): Promise<string> {
  const res = await app.http.inject({
    method: 'POST',
    url: '/api/tts/generate',
    headers: bearer(key),
    payload: { contents },
  });
  if (res.statusCode !== 200) throw new Error(`creating a task: ${String(res.statusCode)} ${res.body}`);
  return res.json<{ data: { id: string } }>().data.id;
}

/**
 * Polls a task (with its stream URL) until `done` holds; throws when it fails unexpectedly or
 * `deadlineMs` passes (a generous bound for a busy machine, not a timing assertion).
 */
export async function waitForTask(
  app: App,
  accountId: string,
  id: string,
  done: (task: TaskDetailView) => boolean = finishedWithAudio,
  deadlineMs = 120_000,
): Promise<TaskDetailView> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const task = await app.services.tasks.get(accountId, id, { stream: 'true' });
    if (done(task)) return task;
    if (task.status === 'failed') throw new Error(`task ${id} failed: ${task.error ?? ''}`);
    if (Date.now() > deadline) throw new Error(`task ${id} is still ${task.status}`);
    await sleep(20);
  }
}

/** Generated with its merged finished audio stored. */
export function finishedWithAudio(task: TaskDetailView): boolean {
  return task.status === 'generated' && task.metadata.audio !== undefined;
}
