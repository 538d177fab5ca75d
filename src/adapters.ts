/**
 * The side effects the service runs on, built from config in one place: embedded (PGlite and files
 * under DATA_DIR, in-process coordination) or scale-out (PostgreSQL, an S3-compatible store, Redis
 * for the queue, events, session ownership and rate limits). Whatever was opened is closed again
 * when a later step fails, and everything on close(). The scale-out adapters (and the clients of
 * Redis and S3 they load) live in adapters.scale-out.ts, loaded only by a node that uses them.
 */
import { join } from 'node:path';
import { sql } from 'kysely';
import type { AppConfig } from './config/config.js';
import type { RateLimitStore } from './http/rate-limit.js';
import { FsBlobStore } from './storage/blob-store.fs.js';
import { CachedBlobStore } from './storage/blob-store.cached.js';
import type { BlobStore } from './storage/blob-store.js';
import { openDatabase, type DatabaseHandle } from './storage/database.js';
import { clusterSecret } from './storage/cluster-secret.js';
import type { StreamCluster } from './stream/stream-service.js';
import { MemoryTaskEvents } from './tasks/queue/task-events.memory.js';
import type { TaskEvents } from './tasks/queue/task-events.js';
import { MemoryTaskQueue } from './tasks/queue/task-queue.memory.js';
import type { TaskQueue } from './tasks/queue/task-queue.js';

/** The adapters of every port, chosen from config. */
export interface Adapters {
  database: DatabaseHandle;
  blobs: BlobStore;
  events: TaskEvents;
  queue: TaskQueue;
  /** The queue of the short-task lane (config.shortTasks); undefined when the lane is off. */
  shortQueue: TaskQueue | undefined;
  rateLimitStore: RateLimitStore;
  /** Scale-out: this node's place in the cluster (session ownership, relays); undefined on one node. */
  cluster: StreamCluster | undefined;
  /** The secret (shared through the database) that signs node-to-node stream relay requests. */
  relaySecret: string;
  /** The URL tasks record as their generator: this node's NODE_URL in scale-out, else PUBLIC_URL. */
  nodeUrl: string;
  /** Readiness checks of the dependencies this node cannot serve without (/readyz), by name; each throws when unreachable. */
  readiness: Record<string, (signal: AbortSignal) => Promise<void>>;
  /** Closes every adapter (the owner stops using them first). */
  close(): Promise<void>;
}

/** What opening the adapters may report. */
export interface AdapterOptions {
  /** A PGlite dump to seed a new embedded database (tests). */
  pgliteTemplate?: Blob | undefined;
  /** The database, already being opened by `openDatabaseFor` (entry points start it first, so that
   * it opens while the rest of the service loads); opened here otherwise. */
  database?: Promise<DatabaseHandle> | undefined;
  /** Receives errors of background connections (Redis reconnects, failed publishes). */
  onBackgroundError: (err: Error) => void;
}

/** The blob store config selects: S3-compatible in scale-out, files under DATA_DIR otherwise. */
export async function blobStoreFor(config: AppConfig): Promise<BlobStore & { close?: () => void }> {
  if (config.scaleOut === null) return new FsBlobStore(join(config.dataDir, 'blobs'));
  const { S3BlobStore } = await import('./storage/blob-store.s3.js');
  return new S3BlobStore(config.scaleOut.s3);
}

/**
 * Opens (creating and migrating when needed) the database `config` selects; `inMemory`: an
 * embedded one that lives in memory and is lost on close.
 */
export function openDatabaseFor(
  config: AppConfig,
  { pgliteTemplate, inMemory }: { pgliteTemplate?: Blob | undefined; inMemory?: boolean } = {},
): Promise<DatabaseHandle> {
  return openDatabase({
    dataDir: config.dataDir,
    databaseUrl: config.databaseUrl,
    pgliteTemplate,
    embeddedCacheMb: config.embeddedDbCacheMb,
    embeddedInMemory: inMemory,
  });
}

/** Closes in reverse order of opening, each step at most once, errors of one not stopping the rest. */
export class Closers {
  private readonly steps: (() => Promise<void> | void)[] = [];

  add(step: () => Promise<void> | void): void {
    this.steps.push(step);
  }

  async closeAll(): Promise<void> {
    const errors: unknown[] = [];
    for (const step of this.steps.splice(0).reverse()) {
      try {
        await step();
      } catch (err) {
        errors.push(err);
      }
    }
    if (errors.length > 0) throw new AggregateError(errors, 'some adapters failed to close');
  }
}

/** Opens the adapters `config` selects; on failure closes what it opened and rethrows. */
export async function openAdapters(config: AppConfig, options: AdapterOptions): Promise<Adapters> {
  const closers = new Closers();
  try {
    return await open(config, options, closers);
  } catch (err) {
    await closers.closeAll().catch(() => undefined);
    throw err;
  }
}

async function open(config: AppConfig, options: AdapterOptions, closers: Closers): Promise<Adapters> {
  const database = await (options.database ??
    openDatabaseFor(config, { pgliteTemplate: options.pgliteTemplate }));
  closers.add(() => database.close());
  const opened: OpenedDatabase = {
    database,
    relaySecret: await clusterSecret(database.db, 'stream-relay'),
    close: () => closers.closeAll(),
  };
  if (config.scaleOut === null) return openEmbedded(config, opened, closers);
  const { openScaleOut } = await import('./adapters.scale-out.js');
  return openScaleOut(config, config.scaleOut, options, opened, closers);
}

/** What both kinds of install start from: the open database, the relay secret kept in it, the closer. */
export interface OpenedDatabase {
  database: DatabaseHandle;
  relaySecret: string;
  close(): Promise<void>;
}

/** One node on its DATA_DIR: blobs on disk, the queue, events and rate limits in memory. */
async function openEmbedded(config: AppConfig, opened: OpenedDatabase, closers: Closers): Promise<Adapters> {
  const files = new FsBlobStore(join(config.dataDir, 'blobs'));
  // Hot finished audio from memory (the same node cache as in front of S3).
  const blobs = new CachedBlobStore(files, { budgetBytes: config.blobMemoryCacheBytes });
  closers.add(() => blobs.close());
  // The data dir lock is held (the embedded database is open): no other writer exists.
  await files.sweepPartialWrites();
  return {
    ...opened,
    blobs,
    events: new MemoryTaskEvents(),
    queue: new MemoryTaskQueue(),
    shortQueue: config.shortTasks === null ? undefined : new MemoryTaskQueue(),
    rateLimitStore: { kind: 'memory' },
    cluster: undefined,
    readiness: { database: () => databaseAnswers(opened.database) },
    nodeUrl: config.publicUrl,
  };
}

/** Resolves once the database answered a trivial query. */
export async function databaseAnswers(database: DatabaseHandle): Promise<void> {
  await sql`select 1`.execute(database.db);
}
