/**
 * What a leak would grow, counted for an app running in this process: open file descriptors,
 * TCP sockets, live stream sessions, open MP3 encoder streams, tasks being generated. Fault tests
 * take the counts before, do their damage, and wait until the counts are back (with a deadline).
 */
import { readdir, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { App } from '../../src/app.js';

/** The counts; every field must return to its earlier value once the app is idle again. */
export interface ResourceCounts {
  /**
   * Entries of /proc/self/fd (files, sockets, pipes, eventfds of this whole process), except the
   * embedded database's own files (`DATA_DIR/db`: PGlite keeps a varying set of relation files
   * open, as a PostgreSQL server would) and descriptors closed while they were being listed.
   */
  fileDescriptors: number;
  /** libuv TCP sockets of this process (the test's own clients included). */
  tcpSockets: number;
  /** Live stream sessions of the app. */
  streamSessions: number;
  /** MP3 encoder streams open in the encoder pool's workers. */
  encoderStreams: number;
  /** Tasks the app's runner is generating. */
  activeGenerations: number;
}

/** Counts now. */
export async function resourceCounts(app: App): Promise<ResourceCounts> {
  return {
    fileDescriptors: await openDescriptors(join(app.config.dataDir, 'db')),
    tcpSockets: process.getActiveResourcesInfo().filter((name) => name === 'TCPSocketWrap').length,
    streamSessions: app.services.stream.liveSessions(),
    encoderStreams: app.services.encoders.openStreams,
    activeGenerations: app.services.runner.active,
  };
}

/** Open descriptors of this process, not counting files under `except`. */
async function openDescriptors(except: string): Promise<number> {
  let count = 0;
  for (const fd of await readdir('/proc/self/fd')) {
    const target = await readlink(`/proc/self/fd/${fd}`).catch(() => undefined);
    if (target !== undefined && !target.startsWith(`${except}/`)) count++;
  }
  return count;
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
