/**
 * The side effects the service runs on, built from config in one place: embedded (PGlite and files
 * under DATA_DIR, in-process coordination) or scale-out (PostgreSQL, an S3-compatible store, Redis
 * for the queue, events, session ownership and rate limits). Whatever was opened is closed again
 * when a later step fails, and everything on close().
 */
import { join } from 'node:path';
import { sql } from 'kysely';
import { Redis } from 'ioredis';
import { untilAborted } from './common/call-deadline.js';
import type { AppConfig, ScaleOutConfig } from './config/config.js';
import type { RateLimitStore } from './http/rate-limit.js';
import { FsBlobStore } from './storage/blob-store.fs.js';
import { CachedBlobStore } from './storage/blob-store.cached.js';
import { S3BlobStore } from './storage/blob-store.s3.js';
import type { BlobStore } from './storage/blob-store.js';
import { openDatabase, type DatabaseHandle } from './storage/database.js';
import { createHttpSessionRelay } from './stream/session-relay.http.js';
import { clusterSecret } from './storage/cluster-secret.js';
import { RedisSessionOwnership } from './stream/session-ownership.redis.js';
import type { StreamCluster } from './stream/stream-service.js';
import { MemoryTaskEvents } from './tasks/queue/task-events.memory.js';
import { RedisTaskEvents } from './tasks/queue/task-events.redis.js';
import type { TaskEvents } from './tasks/queue/task-events.js';
import { BullmqTaskQueue } from './tasks/queue/task-queue.bullmq.js';
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
  /** Receives errors of background connections (Redis reconnects, failed publishes). */
  onBackgroundError: (err: Error) => void;
}

/** The blob store config selects: S3-compatible in scale-out, files under DATA_DIR otherwise. */
export function blobStoreFor(config: AppConfig): BlobStore & { close?: () => void } {
  return config.scaleOut === null
    ? new FsBlobStore(join(config.dataDir, 'blobs'))
    : new S3BlobStore(config.scaleOut.s3);
}

/** Closes in reverse order of opening, each step at most once, errors of one not stopping the rest. */
class Closers {
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
  const database = await openDatabase({
    dataDir: config.dataDir,
    databaseUrl: config.databaseUrl,
    pgliteTemplate: options.pgliteTemplate,
    embeddedCacheMb: config.embeddedDbCacheMb,
  });
  closers.add(() => database.close());
  const opened: OpenedDatabase = {
    database,
    relaySecret: await clusterSecret(database.db, 'stream-relay'),
    close: () => closers.closeAll(),
  };
  return config.scaleOut === null
    ? openEmbedded(config, opened, closers)
    : openScaleOut(config, config.scaleOut, options, opened, closers);
}

/** What both kinds of install start from: the open database, the relay secret kept in it, the closer. */
interface OpenedDatabase {
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

/** A node of a cluster: blobs in S3; the queue, events, session ownership and rate limits in Redis. */
async function openScaleOut(
  config: AppConfig,
  scaleOut: ScaleOutConfig,
  options: AdapterOptions,
  opened: OpenedDatabase,
  closers: Closers,
): Promise<Adapters> {
  const bucket = new S3BlobStore(scaleOut.s3);
  // Finished audio is read many times: metadata and hot blobs from memory, not two bucket round trips each.
  const blobs = new CachedBlobStore(bucket, { budgetBytes: config.blobMemoryCacheBytes });
  closers.add(() => blobs.close());
  await bucket.checkAccess();

  const redis = await connectRedis(scaleOut, options, closers);
  const events = await RedisTaskEvents.create({
    connection: redis,
    prefix: scaleOut.redisPrefix,
    onError: options.onBackgroundError,
  });
  closers.add(() => events.close());
  const ownership = new RedisSessionOwnership({
    connection: redis,
    prefix: scaleOut.redisPrefix,
    ttlMs: config.leases.sessionMs,
  });
  closers.add(() => ownership.close());
  const queue = openQueue(config, scaleOut, options, closers);
  const shortQueue =
    config.shortTasks === null
      ? undefined
      : openQueue(config, scaleOut, options, closers, 'generation-short');

  const retryAfterSeconds = Math.ceil(config.leases.taskMs / 1000);
  return {
    ...opened,
    blobs,
    events,
    queue,
    shortQueue,
    rateLimitStore: { kind: 'redis', client: redis, keyPrefix: scaleOut.redisPrefix },
    cluster: {
      nodeUrl: scaleOut.nodeUrl,
      ownership,
      relay: createHttpSessionRelay({
        headersTimeoutMs: 30_000,
        retryAfterSeconds,
        secret: opened.relaySecret,
      }),
      retryAfterSeconds,
    },
    nodeUrl: scaleOut.nodeUrl,
    readiness: {
      database: () => databaseAnswers(opened.database),
      redis: async (signal) => {
        await untilAborted(redis.ping(), signal);
      },
      s3: (signal) => bucket.checkAccess(signal),
    },
  };
}

/** The node's Redis connection, connected (a start error naming the server when it is not reachable). */
async function connectRedis(
  scaleOut: ScaleOutConfig,
  options: AdapterOptions,
  closers: Closers,
): Promise<Redis> {
  const redis = new Redis(scaleOut.redisUrl, {
    lazyConnect: true,
    connectTimeout: 5000,
    maxRetriesPerRequest: 2,
    connectionName: `${scaleOut.redisPrefix}node`,
  });
  redis.on('error', (err: Error) => options.onBackgroundError(err));
  closers.add(async () => {
    await redis.quit().catch(() => redis.disconnect());
  });
  try {
    await redis.connect();
  } catch (err) {
    throw new Error(`Redis at ${redactedUrl(scaleOut.redisUrl)} is not reachable`, { cause: err });
  }
  return redis;
}

/** A generation queue in Redis: the main one, or a lane of its own by `queueName`. */
function openQueue(
  config: AppConfig,
  scaleOut: ScaleOutConfig,
  options: AdapterOptions,
  closers: Closers,
  queueName?: string,
): BullmqTaskQueue {
  const queue = new BullmqTaskQueue({
    redisUrl: scaleOut.redisUrl,
    prefix: scaleOut.redisPrefix,
    leaseMs: config.leases.taskMs,
    onError: options.onBackgroundError,
    ...(queueName !== undefined && { queueName }),
  });
  closers.add(() => queue.close());
  return queue;
}

/** Resolves once the database answered a trivial query. */
async function databaseAnswers(database: DatabaseHandle): Promise<void> {
  await sql`select 1`.execute(database.db);
}

/** A Redis URL without its password, for messages. */
function redactedUrl(url: string): string {
  return url.replace(/\/\/([^@/]*)@/, '//[credentials]@');
}
