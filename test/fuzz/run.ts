/**
 * Runs seeded fuzz cases against an app and records every response in a FuzzTally. The property
 * never fails: violations are collected, so one run reports all of them (the CI test asserts the
 * list is empty; bench/fuzz.ts prints counts). Same seed, same cases.
 */
import fc from 'fast-check';
import type { App } from '../../src/app.js';
import { injectRequest, rawRequest, type FuzzContext } from './arbitraries.js';
import { checkResponse, FuzzTally } from './invariants.js';
import { injectCase, rawCase } from './transport.js';

/** Seed, number of cases and the tally to record into. */
export interface RunOptions {
  seed: number;
  numRuns: number;
  tally: FuzzTally;
  /** Called every `progressEvery` cases (long runs print progress). */
  onProgress?: (done: number) => void;
  progressEvery?: number;
}

/** In-process cases (JSON bodies, audio/stream requests, resource routes) through `inject`. */
export async function runInjectCases(app: App, ctx: FuzzContext, options: RunOptions): Promise<void> {
  let done = 0;
  await fc.assert(
    fc.asyncProperty(injectRequest(ctx), async (request) => {
      let problems: string[];
      try {
        const res = await injectCase(app, request);
        problems = checkResponse(request, res);
        options.tally.record(request, res, problems);
      } catch (err) {
        problems = [`inject threw: ${String(err)}`];
        options.tally.record(request, undefined, problems);
      }
      done++;
      if (options.onProgress && done % (options.progressEvery ?? 10_000) === 0) options.onProgress(done);
      return true;
    }),
    { seed: options.seed, numRuns: options.numRuns, endOnFailure: true },
  );
}

/** Raw-socket cases against the app listening on `port`, `parallel` connections at a time. */
export async function runRawCases(
  port: number,
  ctx: FuzzContext,
  options: RunOptions & { parallel?: number },
): Promise<void> {
  // Sampled in batches of 500 (seed, seed+1, …), so a long run never holds every case in memory.
  const arbitrary = rawRequest(ctx);
  let done = 0;
  for (let batch = 0; done < options.numRuns; batch++) {
    const cases = fc.sample(arbitrary, {
      seed: options.seed + batch,
      numRuns: Math.min(500, options.numRuns - done),
    });
    let next = 0;
    const worker = async () => {
      for (let c = cases[next++]; c !== undefined; c = cases[next++]) {
        const outcome = await rawCase(port, c);
        const problems = outcome.response === undefined ? [] : checkResponse(c.request, outcome.response);
        if (outcome.hung) problems.push('the connection stayed open and silent after the client half-closed');
        options.tally.record(c.request, outcome.response, problems);
        done++;
        if (options.onProgress && done % (options.progressEvery ?? 10_000) === 0) options.onProgress(done);
      }
    };
    await Promise.all(Array.from({ length: options.parallel ?? 8 }, worker));
  }
}
