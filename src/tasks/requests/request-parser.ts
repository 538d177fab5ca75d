/**
 * Parsing generate and splitter-preview requests (src/tasks/requests/generate-request.ts) as a port: the
 * work is pure but can be large (a 10,000-character text split with a maximum-size splitter
 * config, or 100 content items of 1,000 characters: ~15 ms each under load), so the service does
 * the large ones on a worker thread (`request-parser.worker-pool.ts`) and keeps its event loop for
 * requests and streams; tests and tools parse on the calling
 * thread (`inlineRequestParser`).
 */
import {
  decideLanguages,
  type LanguageDecision,
  type VoiceLanguages,
} from '../../audio/engines/language-decision.js';
import {
  parseGenerateRequest,
  previewSplitterRequest,
  type GenerateLimits,
  type ParsedGenerateRequest,
  type PreviewUtterance,
  type SplitterLookup,
} from './generate-request.js';

/** The language decisions of a new task's pieces: each piece's text and `language`, and its voice's languages. */
export interface LanguageJobs {
  voices: VoiceLanguages[];
  /** `voice`: an index into `voices`. */
  pieces: { text: string; language: string | undefined; voice: number }[];
}

/** Decides every piece of `jobs` (in order), on the calling thread. */
export function decideAll(jobs: LanguageJobs): LanguageDecision[] {
  return jobs.pieces.map((p) => {
    const voice = jobs.voices[p.voice];
    if (voice === undefined) throw new Error(`language job names voice ${p.voice}, which it does not hold`);
    return decideLanguages(p.text, p.language, voice);
  });
}

/** Parses the two request kinds; `bodyBytes` (the request body's size) says how much work it may be. */
export interface RequestParser {
  generate(body: unknown, lookupSplitter: SplitterLookup, bodyBytes: number): Promise<ParsedGenerateRequest>;
  preview(body: unknown, lookupSplitter: SplitterLookup, bodyBytes: number): Promise<PreviewUtterance[]>;
  /**
   * The languages of a new task's pieces (detection reads every sentence: a long text's decisions
   * may take tens of milliseconds, so large ones are made off the event loop too).
   */
  languages(jobs: LanguageJobs): Promise<LanguageDecision[]>;
  /** Stops any thread it started. */
  close(): Promise<void>;
}

/** Parses on the calling thread. */
export function inlineRequestParser(limits: GenerateLimits): RequestParser {
  return {
    generate: (body, lookupSplitter) => parseGenerateRequest(body, limits, lookupSplitter),
    preview: (body, lookupSplitter) => previewSplitterRequest(body, limits, lookupSplitter),
    languages: async (jobs) => decideAll(jobs),
    close: async () => undefined,
  };
}
