/**
 * Serves a stored, finished blob (task or piece audio) with the conditional requests of RFC 9110
 * (If-Match/If-Unmodified-Since → 412, If-None-Match/If-Modified-Since → 304), Range, If-Range,
 * HEAD, 206 and 416, planned by the same pure range planner as the live stream.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { errors } from '../errors/app-error.js';
import type { BlobStore } from '../storage/blob-store.js';
import {
  bodyWindow,
  planHeaders,
  planRange,
  preconditionFailed,
  rangeNotSatisfiable,
} from '../stream/range-plan.js';
import { plannedRequestHeaders } from './reply-plan.js';

/** Finished audio never changes under its ETag; a day in a private cache, revalidated after. */
const CACHE_CONTROL = 'private, max-age=86400';

/** Sends the blob at `key` (404 RESOURCE_NOT_FOUND when it is gone) as planned from the request's headers. */
export async function sendBlob(
  request: FastifyRequest,
  reply: FastifyReply,
  blobs: BlobStore,
  key: string,
  contentType: string,
  /** Content-Disposition the client asked for (already validated), if any. */
  contentDisposition?: string,
): Promise<FastifyReply> {
  // A hot blob is one buffer in memory: its metadata and bytes without I/O.
  const held = blobs.held?.(key);
  const info = held?.info ?? (await blobs.stat(key));
  if (!info) throw errors.notFound('RESOURCE_NOT_FOUND', 'audio');
  const plan = planRange({
    method: request.method === 'HEAD' ? 'HEAD' : 'GET',
    ...plannedRequestHeaders(request.headers),
    etag: info.etag,
    lastModified: info.modifiedAt,
    produced: info.size,
    finalSize: info.size,
  });
  if (plan.kind === 'wait' || plan.kind === 'live') throw new Error('a finished blob never waits');
  if (plan.kind === 'unsatisfiable') throw rangeNotSatisfiable(plan);
  if (plan.kind === 'precondition-failed') throw preconditionFailed();
  if (plan.kind === 'not-modified') {
    // RFC 9110 §15.4.5: no body; the validator and Cache-Control a 200 would carry.
    return reply.status(304).headers(planHeaders(plan)).header('Cache-Control', CACHE_CONTROL).send();
  }
  void reply
    .status(plan.status)
    .headers(planHeaders(plan))
    .header('Content-Type', contentType)
    .header('Last-Modified', info.modifiedAt.toUTCString())
    .header('Cache-Control', CACHE_CONTROL);
  if (contentDisposition !== undefined) void reply.header('Content-Disposition', contentDisposition);
  const window = bodyWindow(plan);
  if (request.method === 'HEAD' || window === null || window.endExclusive === window.start)
    return reply.send();
  const range = { start: window.start, end: (window.endExclusive ?? info.size) - 1 };
  // Sent as one buffer, no stream to set up.
  if (held !== undefined) return reply.send(held.bytes.subarray(range.start, range.end + 1));
  const body = blobs.read(key, range);
  // Stop reading when the client goes away.
  reply.raw.once('close', () => body.destroy());
  return reply.send(body);
}
