/**
 * Metadata-store adapter for the embedded database: PGlite (PostgreSQL in WebAssembly) in
 * DATA_DIR/db, run by a worker thread of its own (src/storage/pglite.worker.ts) so that a statement
 * never holds the main thread, which answers HTTP requests. PGlite is single-process, so the
 * DATA_DIR lock is taken before opening and released after closing; a second process gets a clear
 * error instead of a corrupted database.
 */
import { createReadStream, existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { access, mkdir, readdir, readFile, rename, rm, rmdir } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { MessageChannel, receiveMessageOnPort, type MessagePort, type Worker } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import { Kysely } from 'kysely';
import { once } from 'node:events';
import { forkModule, siblingModuleUrl, startModuleWorker } from '../common/worker-url.js';
import { OWNER_DIR_MODE } from '../common/owner-only.js';
import { acquireDataDirLock } from './data-dir-lock.js';
import { migrateToLatest, type DatabaseHandle } from './database.js';
import { PgliteDialect, type StatementRunner } from './pglite-dialect.js';
import {
  deserializeDatabaseError,
  PGLITE_PARSERS,
  type PgliteRequest,
  type PgliteResponse,
  type PgliteWorkerData,
} from './pglite-protocol.js';
import type { Database } from './schema.js';

/** Where the embedded database lives, and an optional template for a new one. */
export interface PgliteDatabaseOptions {
  dataDir: string;
  /**
   * A data-dir dump (`createPgliteTemplate`) a new database is unpacked from instead of running
   * initdb; without it, the template of the compiled build if there is one.
   */
  template?: Blob | File | undefined;
  /** The page cache (PostgreSQL shared_buffers) in MiB; PostgreSQL touches all of it at start (default 16). */
  cacheMb?: number | undefined;
  /**
   * Keep the database in memory, started from the template, and lose it on close: for a process
   * whose data is thrown away afterwards (the CLI's in-process synthesis), which then writes no
   * database files at all. DATA_DIR is still locked (its blobs are on disk).
   */
  inMemory?: boolean | undefined;
}

/**
 * The embedded database's default page cache in MiB. PostgreSQL's own default (128 MiB) is written
 * at start, so it was resident in every idle service; the service's tables
 * are small and pages not cached here are read from the OS's file cache.
 */
const DEFAULT_CACHE_MB = 16;

type Pending = { resolve: (response: PgliteResponse) => void; reject: (err: Error) => void };

/**
 * How long this thread waits on the spot for a statement's answer before it lets go and takes the
 * answer from its event loop later: a short statement (most are well under a millisecond) then
 * costs no turn of a busy event loop, and a long one holds this thread at most this long.
 */
const INLINE_WAIT_MS = 4;
/**
 * The same inside a transaction, longer: the transaction holds the database's only session, so a
 * turn of the event loop between two of its statements would hold up every other statement too.
 */
const IN_TRANSACTION_INLINE_WAIT_MS = 50;
/**
 * Waiting on the spot in one turn of the event loop after which a new transaction begins only in
 * a later turn (each transaction is still waited for on the spot to its end).
 */
const TURN_WAIT_BUDGET_MS = 10;
/**
 * Waiting on the spot may take at most this share of the main thread's time, saved up to
 * INLINE_WAIT_BURST_MS while it is not used; past that, answers come from the event loop. Under
 * load the worker answers later (statements queue, cores are busy), and waiting on the spot for
 * every statement added their times to the turns of the loop, holding every other request.
 */
const INLINE_WAIT_SHARE = 0.1;
const INLINE_WAIT_BURST_MS = 8;

/**
 * The main thread's side of the database worker. Each statement goes out on a channel as it comes;
 * its answer may be awaited on the spot for a few milliseconds (the worker posts it, then raises a
 * shared flag; see inlineAllowanceMs for when), and otherwise arrives as an ordinary message, so a
 * long statement never holds this thread. If the worker stops, every waiting and later statement
 * fails with that reason.
 */
class PgliteWorkerClient implements StatementRunner {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private stopped: Error | undefined;
  private closing: Promise<void> | undefined;
  /** The close request sent, if any: a clean exit of the worker after it is its answer. */
  private closeId: number | undefined;
  /** Waiting on the spot saved up (INLINE_WAIT_SHARE of the time since `savedAt`, at most the burst). */
  private inlineLeftMs = INLINE_WAIT_BURST_MS;
  private savedAt = performance.now();
  /** Statements sent whose callers have not had their answers yet. */
  private unanswered = 0;
  /** Background work running (inBackground): its transactions' statements are not waited on the spot. */
  private background = 0;
  /** Waited on the spot in this turn of the event loop (reset by the next turn). */
  private turnWaitedMs = 0;
  private turnResetScheduled = false;

  private constructor(
    private readonly worker: Worker,
    /** This thread's end of the statement channel, and the flag the worker raises on each answer. */
    private readonly port: MessagePort,
    private readonly answered: Int32Array,
  ) {
    const dispatch = (response: PgliteResponse) => this.dispatch(response);
    worker.on('message', dispatch);
    port.on('message', dispatch);
    // Keeps the process alive only while an answer is awaited from the event loop (`later`).
    port.unref();
    worker.on('error', (err) => this.stop(new Error('the embedded database stopped', { cause: err })));
    worker.on('exit', (code) => {
      // The worker ends by itself once it has closed the database and posted that answer; its exit
      // can be seen here before the answer, which travels on the other channel.
      const id = this.closeId;
      if (code === 0 && id !== undefined) this.pending.get(id)?.resolve({ id, ok: true, rows: [] });
      this.stop(new Error(`the embedded database stopped (worker exit code ${code})`));
    });
  }

  /** Starts the worker on `data` and resolves once the database is open (rejects with why it is not). */
  static async start(
    options: Pick<PgliteWorkerData, 'dir' | 'template' | 'cacheMb'>,
  ): Promise<PgliteWorkerClient> {
    const channel = new MessageChannel();
    const answered = new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
    const data: PgliteWorkerData = { ...options, port: channel.port2, answered };
    const worker = startModuleWorker(siblingModuleUrl(import.meta.url, 'pglite.worker'), data, [
      channel.port2,
    ]);
    const client = new PgliteWorkerClient(worker, channel.port1, answered);
    try {
      const response = await client.later(0);
      if (!response.ok) throw deserializeDatabaseError(response.error);
    } catch (err) {
      await worker.terminate();
      throw err;
    }
    return client;
  }

  private dispatch(response: PgliteResponse): void {
    const waiting = this.pending.get(response.id);
    this.pending.delete(response.id);
    if (this.pending.size === 0) this.port.unref();
    waiting?.resolve(response);
  }

  /** The answer to `id`, from the event loop. */
  private later(id: number): Promise<PgliteResponse> {
    if (this.stopped !== undefined) return Promise.reject(this.stopped);
    this.port.ref();
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
  }

  private stop(reason: Error): void {
    this.stopped ??= reason;
    this.port.close();
    for (const waiting of this.pending.values()) waiting.reject(this.stopped);
    this.pending.clear();
  }

  /** The answer to `id` if it comes within `ms` (answers to earlier statements found meanwhile are dispatched). */
  private answerWithin(id: number, ms: number): PgliteResponse | undefined {
    const deadline = performance.now() + ms;
    for (;;) {
      const received = receiveMessageOnPort(this.port);
      if (received !== undefined) {
        const response = received.message as PgliteResponse;
        if (response.id === id) return response;
        this.dispatch(response);
        continue;
      }
      const left = deadline - performance.now();
      if (left <= 0) return undefined;
      // The worker posts an answer, then raises the flag: a raise before this wait ends it at once.
      Atomics.wait(this.answered, 0, 0, left);
      Atomics.store(this.answered, 0, 0);
    }
  }

  /**
   * How long a statement may wait on the spot: one inside a transaction always (it holds the only
   * session: a turn of the loop between its statements would hold every other statement too), but
   * one of background work only while other statements wait for its transaction; the
   * one statement the worker has, within what is saved up of the main thread's share for waiting
   * (an answer behind others comes later anyway). Both spend from that share.
   */
  private inlineAllowanceMs(inTransaction: boolean, alone: boolean, othersWaiting: boolean): number {
    const now = performance.now();
    this.inlineLeftMs = Math.min(
      INLINE_WAIT_BURST_MS,
      this.inlineLeftMs + (now - this.savedAt) * INLINE_WAIT_SHARE,
    );
    this.savedAt = now;
    // Background work calls inBackground inside its transaction, which holds the session from
    // BEGIN to its end: meanwhile only that transaction's statements are sent in one. It lets the
    // event loop turn between them unless other statements wait for it to end.
    if (inTransaction) return this.background > 0 && !othersWaiting ? 0 : IN_TRANSACTION_INLINE_WAIT_MS;
    return alone ? Math.min(INLINE_WAIT_MS, this.inlineLeftMs) : 0;
  }

  private async statement(sql: string, params: unknown[], inTransaction: boolean, othersWaiting = false) {
    if (this.stopped !== undefined) throw this.stopped;
    const id = this.nextId++;
    this.port.postMessage({ op: 'query', sql, params, id } satisfies PgliteRequest);
    const alone = this.unanswered++ === 0;
    try {
      const started = performance.now();
      const inline = this.answerWithin(id, this.inlineAllowanceMs(inTransaction, alone, othersWaiting));
      const waited = performance.now() - started;
      this.inlineLeftMs -= waited;
      this.chargeTurn(waited);
      const response = inline ?? (await this.later(id));
      if (!response.ok) throw deserializeDatabaseError(response.error);
      return response;
    } finally {
      this.unanswered--;
    }
  }

  query(sql: string, params: unknown[]) {
    return this.statement(sql, params, false);
  }

  turnSpent(): boolean {
    return this.turnWaitedMs >= TURN_WAIT_BUDGET_MS;
  }

  /** Adds on-the-spot waiting to this turn's account, reset when the event loop turns. */
  private chargeTurn(ms: number): void {
    this.turnWaitedMs += ms;
    if (this.turnResetScheduled) return;
    this.turnResetScheduled = true;
    setImmediate(() => {
      this.turnResetScheduled = false;
      this.turnWaitedMs = 0;
    });
  }

  queryInTransaction(sql: string, params: unknown[], othersWaiting: boolean) {
    return this.statement(sql, params, true, othersWaiting);
  }

  async inBackground<T>(work: () => Promise<T>): Promise<T> {
    this.background++;
    try {
      return await work();
    } finally {
      this.background--;
    }
  }

  /** Closes the database (a clean shutdown of PostgreSQL) and waits for the worker to end. */
  close(): Promise<void> {
    return (this.closing ??= (async () => {
      if (this.stopped === undefined) {
        const exited = once(this.worker, 'exit');
        const id = this.nextId++;
        const answer = this.later(id);
        this.closeId = id;
        this.port.postMessage({ op: 'close', id } satisfies PgliteRequest);
        const response = await answer;
        if (!response.ok) throw deserializeDatabaseError(response.error);
        await exited;
      }
    })());
  }
}

/** How long creating a new database may take (initdb takes 4–7 s on a 2-core machine). */
const INITDB_DEADLINE_MS = 5 * 60_000;

/**
 * The migrated database `npm run build` writes beside the compiled modules (dist/): a new database
 * is unpacked from it. Absent when the service runs from src/ (development, tests), where a new
 * database is made by initdb.
 */
const BUILT_TEMPLATE = new URL('../pglite-template.tar.gz', import.meta.url);

/** The built template as a stream of its bytes, or undefined when there is none. */
async function builtTemplate(): Promise<AsyncIterable<Uint8Array> | undefined> {
  const path = fileURLToPath(BUILT_TEMPLATE);
  try {
    await access(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`cannot read the embedded database template ${path}`, { cause: err });
  }
  return createReadStream(path);
}

/** The compiled build's template as a Blob, or undefined without one. */
async function builtTemplateBlob(): Promise<Blob | undefined> {
  const path = fileURLToPath(BUILT_TEMPLATE);
  return existsSync(path) ? new Blob([await readFile(path)]) : undefined;
}

/**
 * Creates a new database at `dir` in a child process that then exits: unpacked from `template` (a
 * migrated `dumpDataDir` archive) with plain file writes, or without one by initdb and the
 * migrations. Its memory leaves with it: initdb and the migrations done in this process, even in a
 * worker thread, left ~100 MiB resident in the service for its whole life, and the unpacking of
 * the 40 MB archive ~30-50 MiB. It is built in a staging folder beside `dir` and renamed into place
 * once complete, so a process killed while creating leaves no half-made database behind: the next
 * start removes the staging folder and creates it again. The database worker then opens it like
 * any existing database: from a template, PostgreSQL's WebAssembly starts once.
 */
async function createDatabase(dir: string, template: AsyncIterable<Uint8Array> | undefined): Promise<void> {
  const stagingPrefix = `${basename(dir)}.creating-`;
  for (const name of await readdir(dirname(dir))) {
    if (name.startsWith(stagingPrefix)) await rm(join(dirname(dir), name), { recursive: true, force: true });
  }
  const staging = join(
    dirname(dir),
    `${stagingPrefix}${String(process.pid)}-${randomBytes(4).toString('hex')}`,
  );
  try {
    await runInitProcess(staging, template);
    try {
      await rmdir(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
        throw new Error(
          `${dir} exists and holds no database (no PG_VERSION): move it away to start a new one`,
          {
            cause: err,
          },
        );
    }
    await rename(staging, dir);
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/**
 * Creates the database at `dir` in a child process: src/storage/pglite-unpack.process with
 * `template` on its standard input, or src/storage/pglite-init.process (initdb) without one;
 * rejects with its exit and stderr when it fails.
 */
async function runInitProcess(dir: string, template: AsyncIterable<Uint8Array> | undefined): Promise<void> {
  const child = forkModule(
    siblingModuleUrl(
      import.meta.url,
      template === undefined ? 'pglite-init.process' : 'pglite-unpack.process',
    ),
    [dir],
    INITDB_DEADLINE_MS,
    { input: template !== undefined },
  );
  if (template !== undefined && child.stdin !== null) {
    // A child that stops reading (a damaged template) closes the pipe: its exit says why.
    pipeline(Readable.from(template), child.stdin).catch(() => undefined);
  }
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (exitCode, exitSignal) => resolve([exitCode, exitSignal]));
  });
  if (code !== 0) {
    const how = signal === null ? `exit code ${String(code)}` : `signal ${signal}`;
    throw new Error(`creating the embedded database failed (${how}): ${stderr.trim()}`);
  }
}

/** Opens (creating if needed) and migrates DATA_DIR's embedded database, holding the DATA_DIR lock. */
export async function openPgliteDatabase(options: PgliteDatabaseOptions): Promise<DatabaseHandle> {
  const lock = await acquireDataDirLock(options.dataDir);
  let client: PgliteWorkerClient | undefined;
  let db: Kysely<Database>;
  try {
    const cacheMb = options.cacheMb ?? DEFAULT_CACHE_MB;
    if (options.inMemory === true) {
      const template = options.template ?? (await builtTemplateBlob());
      client = await PgliteWorkerClient.start({ dir: undefined, template, cacheMb });
    } else {
      const dir = join(options.dataDir, 'db');
      await mkdir(dir, { recursive: true, mode: OWNER_DIR_MODE });
      // A template only seeds a new database; an existing one is opened as it is.
      if (!existsSync(join(dir, 'PG_VERSION'))) {
        await createDatabase(dir, options.template?.stream() ?? (await builtTemplate()));
      }
      client = await PgliteWorkerClient.start({ dir, cacheMb });
    }
    db = new Kysely<Database>({ dialect: new PgliteDialect(client) });
    await migrateToLatest(db);
  } catch (err) {
    await client?.close().catch(() => undefined);
    await lock.release();
    throw err;
  }
  let closing: Promise<void> | undefined;
  const runner = client;
  return {
    db,
    kind: 'pglite',
    inBackground: (work) => runner.inBackground(work),
    close: () =>
      (closing ??= (async () => {
        try {
          // Kysely's destroy closes the client, i.e. the database and its worker.
          await db.destroy();
        } finally {
          await lock.release();
        }
      })()),
  };
}

/**
 * A data-dir dump of a new in-memory database with every migration applied (no DATA_DIR, no lock):
 * tests seed each fresh embedded database from it in ≈0.5 s instead of paying initdb (4–7 s).
 */
export async function createPgliteTemplate(): Promise<Blob> {
  const pglite = await PGlite.create({ parsers: PGLITE_PARSERS });
  const db = new Kysely<Database>({ dialect: new PgliteDialect(pglite) });
  try {
    await migrateToLatest(db);
    return await pglite.dumpDataDir('gzip');
  } finally {
    await db.destroy();
  }
}
