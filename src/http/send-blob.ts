/**
 * Serves a stored, finished blob (task or piece audio) with Range, If-Range, HEAD, 206 and 416,
 * planned by the same pure range planner as the live stream.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { errors } from '../errors/app-error.js';
import type { BlobStore } from '../storage/blob-store.js';
import { bodyWindow, planHeaders, planRange, rangeNotSatisfiable } from '../stream/range-plan.js';

export async function sendBlob(
  request: FastifyRequest,
  reply: FastifyReply,
  blobs: BlobStore,
  key: string,
  contentType: string,
  /** Content-Disposition the client asked for (already validated), if any. */
  contentDisposition?: string,
): Promise<FastifyReply> {
  const info = await blobs.stat(key);
  if (!info) throw errors.notFound('RESOURCE_NOT_FOUND', 'audio');
  const plan = planRange({
    method: request.method === 'HEAD' ? 'HEAD' : 'GET',
    rangeHeader: request.headers.range,
    ifRangeHeader: typeof request.headers['if-range'] === 'string' ? request.headers['if-range'] : undefined,
    etag: info.etag,
    produced: info.size,
    finalSize: info.size,
  });
  if (plan.kind === 'wait' || plan.kind === 'live') throw new Error('a finished blob never waits');
  if (plan.kind === 'unsatisfiable') throw rangeNotSatisfiable(plan);
  void reply
    .status(plan.status)
    .headers(planHeaders(plan))
    .header('Content-Type', contentType)
    .header('Last-Modified', info.modifiedAt.toUTCString())
    .header('Cache-Control', 'private, max-age=86400');
  if (contentDisposition !== undefined) void reply.header('Content-Disposition', contentDisposition);
  const window = bodyWindow(plan);
  if (request.method === 'HEAD' || window === null || window.endExclusive === window.start)
    return reply.send();
  const body = blobs.read(key, { start: window.start, end: (window.endExclusive ?? info.size) - 1 });
  // Stop reading when the client goes away.
  reply.raw.once('close', () => body.destroy());
  return reply.send(body);
}
