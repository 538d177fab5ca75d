/**
 * What a leak would grow, counted for an app running in this process: open file descriptors,
 * TCP sockets, live stream sessions, open MP3 encoder streams, tasks being generated. Fault tests
 * take the counts before, do their damage, and wait until the counts are back (with a deadline).
 */
import { readdir, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { App } from '../../src/app.js';
import { OPEN_BLOB_FILES } from '../../src/storage/blob-store.fs.js';

/** The counts; every field must return to its earlier value once the app is idle again. */
export interface ResourceCounts {
  /**
   * Entries of /proc/self/fd (files, sockets, pipes, eventfds of this whole process), except the
   * embedded database's own files (`DATA_DIR/db`: PGlite keeps a varying set of relation files
   * open, as a PostgreSQL server would), the finished audio the blob store keeps open for reuse
   * (`DATA_DIR/blobs`: counted below) and descriptors closed while they were being listed.
   */
  fileDescriptors: number;
  /**
   * Descriptors on `DATA_DIR/blobs` beyond the blob store's bound of files kept open for reuse
   * (OPEN_BLOB_FILES): always 0 — a read that leaked its descriptor would grow it past the bound.
   */
  blobFilesOverBound: number;
  /** libuv TCP sockets of this process (the test's own clients included). */
  tcpSockets: number;
  /** Live stream sessions of the app. */
  streamSessions: number;
  /** MP3 encoder streams open in the encoder pool's workers. */
  encoderStreams: number;
  /** Tasks the app's runner is generating. */
  activeGenerations: number;
}

/**
 * Starts the app's worker threads of every kind (they start with their first use and then stay),
 * so a baseline taken afterwards holds their descriptors: what a fault leaves behind is then the
 * only difference.
 */
export async function warmWorkers(app: App): Promise<void> {
  for (const interactive of [false, true]) await app.services.encoders.open({ interactive }).finish();
}

/** Counts now. */
export async function resourceCounts(app: App): Promise<ResourceCounts> {
  return {
    fileDescriptors: await openDescriptors([
      join(app.config.dataDir, 'db'),
      join(app.config.dataDir, 'blobs'),
    ]),
    blobFilesOverBound: Math.max(
      0,
      (await descriptorsUnder(join(app.config.dataDir, 'blobs'))) - OPEN_BLOB_FILES,
    ),
    tcpSockets: process.getActiveResourcesInfo().filter((name) => name === 'TCPSocketWrap').length,
    streamSessions: app.services.stream.liveSessions(),
    encoderStreams: app.services.encoders.openStreams,
    activeGenerations: app.services.runner.active,
  };
}

/** Targets of this process's open descriptors (those closed while listed are left out). */
async function descriptorTargets(): Promise<string[]> {
  const targets: string[] = [];
  for (const fd of await readdir('/proc/self/fd')) {
    const target = await readlink(`/proc/self/fd/${fd}`).catch(() => undefined);
    if (target !== undefined) targets.push(target);
  }
  return targets;
}

/** Open descriptors of this process, not counting files under the `except` folders. */
async function openDescriptors(except: string[]): Promise<number> {
  return (await descriptorTargets()).filter((t) => !except.some((dir) => t.startsWith(`${dir}/`))).length;
}

/** Open descriptors of this process on files under `dir`. */
async function descriptorsUnder(dir: string): Promise<number> {
  return (await descriptorTargets()).filter((t) => t.startsWith(`${dir}/`)).length;
}

/** Counts once they hold still: two readings `gapMs` apart are equal (at most `ms`). */
export async function stableCounts(app: App, gapMs = 200, ms = 10_000): Promise<ResourceCounts> {
  const deadline = AbortSignal.timeout(ms);
  let last = await resourceCounts(app);
  for (;;) {
    await sleep(gapMs);
    const now = await resourceCounts(app);
    if (sameCounts(now, last) || deadline.aborted) return now;
    last = now;
  }
}

function sameCounts(a: ResourceCounts, b: ResourceCounts): boolean {
  return (Object.keys(a) as (keyof ResourceCounts)[]).every((k) => a[k] === b[k]);
}

/**
 * Waits until the counts equal `baseline` again (the system settled), at most `ms`; returns the
 * last counts either way, so the caller asserts equality and a failure shows what differs.
 */
export async function settledCounts(
  app: App,
  baseline: ResourceCounts,
  ms = 10_000,
): Promise<ResourceCounts> {
  const deadline = AbortSignal.timeout(ms);
  for (;;) {
    const now = await resourceCounts(app);
    if (sameCounts(now, baseline) || deadline.aborted) return now;
    await sleep(25);
  }
}
