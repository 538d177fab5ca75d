/**
 * The adapters of a node of a cluster: blobs in an S3-compatible bucket; the queue, events, session
 * ownership and rate limits in Redis. Loaded by adapters.ts only when config selects scale-out, so
 * a node on its DATA_DIR never loads the Redis and S3 clients.
 */
import { Redis } from 'ioredis';
import {
  databaseAnswers,
  type AdapterOptions,
  type Adapters,
  type Closers,
  type OpenedDatabase,
} from './adapters.js';
import { untilAborted } from './common/call-deadline.js';
import type { AppConfig, ScaleOutConfig } from './config/config.js';
import { CachedBlobStore } from './storage/blob-store.cached.js';
import { S3BlobStore } from './storage/blob-store.s3.js';
import { createHttpSessionRelay } from './stream/session-relay.http.js';
import { RedisSessionOwnership } from './stream/session-ownership.redis.js';
import { RedisTaskEvents } from './tasks/queue/task-events.redis.js';
import { BullmqTaskQueue } from './tasks/queue/task-queue.bullmq.js';

/** A node of a cluster: blobs in S3; the queue, events, session ownership and rate limits in Redis. */
export async function openScaleOut(
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

/** A Redis URL without its password, for messages. */
function redactedUrl(url: string): string {
  return url.replace(/\/\/([^@/]*)@/, '//[credentials]@');
}
