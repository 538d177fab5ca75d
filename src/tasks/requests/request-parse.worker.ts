/**
 * Piscina task module of `request-parser.worker-pool.ts`: parses one generate or preview request
 * off the main thread. A saved splitter is read by the main thread (the database is there): when
 * the request names one the task answers which, and is run again with its config.
 */
import { lowerThreadPriority } from '../../common/worker-priority.js';
import { AppError } from '../../errors/app-error.js';
import type { SplitterConfig } from '../../splitter/splitter-config.js';
import type { LanguageDecision } from '../../audio/engines/language-decision.js';
import { decideAll, type LanguageJobs } from './request-parser.js';
import {
  parseGenerateRequest,
  previewSplitterRequest,
  type GenerateLimits,
  type ParsedGenerateRequest,
  type PreviewUtterance,
} from './generate-request.js';

// Large bodies only come here, and parsing them can take a core (a flood of 100,000-character
// tasks): like synthesis, it yields the CPU to the event loop, which answers everyone's requests.
lowerThreadPriority();

/** One request to parse, with the saved splitter it names once the main thread has read it. */
export interface ParseTask {
  kind: 'generate' | 'preview';
  body: unknown;
  limits: GenerateLimits;
  saved?: { id: string; config: SplitterConfig };
}

/** A new task's language decisions to make. */
export interface LanguageTask {
  kind: 'languages';
  jobs: LanguageJobs;
}

/** What a parse answers: the result, the saved splitter it needs first, or the request's error. */
export type ParseOutcome =
  | { ok: true; generate: ParsedGenerateRequest }
  | { ok: true; preview: PreviewUtterance[] }
  | { ok: true; languages: LanguageDecision[] }
  | { ok: false; needsSplitter: string }
  | { ok: false; error: { code: AppError['code']; message: string; headers: Record<string, string> } };

class NeedsSplitter extends Error {
  constructor(readonly id: string) {
    super(`saved splitter ${id} is read by the main thread`);
  }
}

/** Parses `task`; errors other than the request's own (AppError) are thrown as they are. */
export default async function parse(task: ParseTask | LanguageTask): Promise<ParseOutcome> {
  // Decisions refuse with a value, not an error: the main thread names the piece.
  if (task.kind === 'languages') return { ok: true, languages: decideAll(task.jobs) };
  const lookup = (id: string): Promise<SplitterConfig> =>
    task.saved?.id === id ? Promise.resolve(task.saved.config) : Promise.reject(new NeedsSplitter(id));
  try {
    return task.kind === 'generate'
      ? { ok: true, generate: await parseGenerateRequest(task.body, task.limits, lookup) }
      : { ok: true, preview: await previewSplitterRequest(task.body, task.limits, lookup) };
  } catch (err) {
    if (err instanceof NeedsSplitter) return { ok: false, needsSplitter: err.id };
    if (err instanceof AppError)
      return { ok: false, error: { code: err.code, message: err.message, headers: { ...err.headers } } };
    throw err;
  }
}
