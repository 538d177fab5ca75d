/**
 * The service's request parser: a request whose body exceeds INLINE_BODY_BYTES is parsed by a
 * worker thread (piscina: one thread, started on first use, retired after an idle minute, at the
 * batch workers' lower priority), so a maximum-size splitter preview or a 100-item task never
 * holds the event loop, nor takes the CPU from it under a flood of them; smaller ones are
 * parsed on the calling thread, where they take well under a millisecond and a thread hop would
 * cost more. A saved splitter the request names is read here (the database is on this side).
 * A new task's language decisions go the same way by the characters they read.
 */
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { AppError } from '../../errors/app-error.js';
import { siblingModuleUrl, workerExecArgv } from '../../common/worker-url.js';
import type { GenerateLimits, SplitterLookup } from './generate-request.js';
import { inlineRequestParser, type RequestParser } from './request-parser.js';
import type { LanguageTask, ParseOutcome, ParseTask } from './request-parse.worker.js';

/** Bodies up to this size are parsed on the calling thread. */
export const INLINE_BODY_BYTES = 16 * 1024;
/**
 * Pieces of up to this many characters together get their languages decided on the calling
 * thread (a few milliseconds at most: a one-shot's sentence takes well under one).
 */
export const INLINE_LANGUAGE_CHARS = 2_000;
/** A parse not done within this (a thread that cannot start, a queue that does not move) → 503. */
const PARSE_DEADLINE_MS = 10_000;
/** Parses waiting for the thread at most; more → 503 (each is bounded work, so this is seconds). */
const MAX_QUEUED_PARSES = 512;

const WORKER_URL = siblingModuleUrl(import.meta.url, 'request-parse.worker');

/** A request parser that sends large requests to a worker thread; `close()` stops the thread. */
export function workerPoolRequestParser(
  limits: GenerateLimits,
  options: { inlineBodyBytes?: number; inlineLanguageChars?: number } = {},
): RequestParser {
  const inline = inlineRequestParser(limits);
  const inlineBodyBytes = options.inlineBodyBytes ?? INLINE_BODY_BYTES;
  const inlineLanguageChars = options.inlineLanguageChars ?? INLINE_LANGUAGE_CHARS;
  let pool: Piscina | undefined;

  /** Runs one task on the thread; a thread that does not keep up → 503. */
  const run = async (task: ParseTask | LanguageTask): Promise<ParseOutcome> => {
    pool ??= new Piscina({
      filename: fileURLToPath(WORKER_URL),
      execArgv: workerExecArgv(WORKER_URL),
      minThreads: 0,
      maxThreads: 1,
      idleTimeout: 60_000,
      maxQueue: MAX_QUEUED_PARSES,
    });
    try {
      return (await pool.run(task, { signal: AbortSignal.timeout(PARSE_DEADLINE_MS) })) as ParseOutcome;
    } catch (err) {
      if (!isBusy(err)) throw err;
      throw new AppError(
        'NO_WORKER_AVAILABLE',
        'the request could not be parsed now (the service is busy); retry shortly',
        { headers: { 'Retry-After': '1' }, cause: err },
      );
    }
  };

  const offThread = async (
    kind: ParseTask['kind'],
    body: unknown,
    lookupSplitter: SplitterLookup,
  ): Promise<ParseOutcome & { ok: true }> => {
    let saved: ParseTask['saved'];
    for (;;) {
      const outcome = await run({ kind, body, limits, ...(saved !== undefined && { saved }) });
      if (outcome.ok) return outcome;
      if ('error' in outcome)
        throw new AppError(outcome.error.code, outcome.error.message, { headers: outcome.error.headers });
      if (saved !== undefined) throw new Error(`the request parser asked twice for a saved splitter`);
      saved = { id: outcome.needsSplitter, config: await lookupSplitter(outcome.needsSplitter) };
    }
  };

  return {
    async generate(body, lookupSplitter, bodyBytes) {
      if (bodyBytes <= inlineBodyBytes) return inline.generate(body, lookupSplitter, bodyBytes);
      const outcome = await offThread('generate', body, lookupSplitter);
      if (!('generate' in outcome)) throw new Error('the request parser answered a preview');
      return outcome.generate;
    },
    async preview(body, lookupSplitter, bodyBytes) {
      if (bodyBytes <= inlineBodyBytes) return inline.preview(body, lookupSplitter, bodyBytes);
      const outcome = await offThread('preview', body, lookupSplitter);
      if (!('preview' in outcome)) throw new Error('the request parser answered a task');
      return outcome.preview;
    },
    async languages(jobs) {
      const chars = jobs.pieces.reduce((n, p) => n + p.text.length, 0);
      if (chars <= inlineLanguageChars) return inline.languages(jobs);
      const outcome = await run({ kind: 'languages', jobs });
      if (!outcome.ok || !('languages' in outcome))
        throw new Error('the request parser answered no languages');
      return outcome.languages;
    },
    async close() {
      await pool?.destroy();
      pool = undefined;
    },
  };
}

/** Piscina's refusals when the thread does not keep up: past the deadline, or the queue full. */
function isBusy(err: unknown): boolean {
  return err instanceof Error && (err.name === 'AbortError' || /queue is at limit/i.test(err.message));
}
