/**
 * Parsing generate and splitter-preview requests (src/tasks/requests/generate-request.ts) as a port: the
 * work is pure but can be large (a 10,000-character text split with a maximum-size splitter
 * config, or 100 content items of 1,000 characters: ~15 ms each under load), so the service does
 * the large ones on a worker thread (`request-parser.worker-pool.ts`) and keeps its event loop for
 * requests and streams; tests and tools parse on the calling
 * thread (`inlineRequestParser`).
 */
import {
  parseGenerateRequest,
  previewSplitterRequest,
  type GenerateLimits,
  type ParsedGenerateRequest,
  type PreviewUtterance,
  type SplitterLookup,
} from './generate-request.js';

/** Parses the two request kinds; `bodyBytes` (the request body's size) says how much work it may be. */
export interface RequestParser {
  generate(body: unknown, lookupSplitter: SplitterLookup, bodyBytes: number): Promise<ParsedGenerateRequest>;
  preview(body: unknown, lookupSplitter: SplitterLookup, bodyBytes: number): Promise<PreviewUtterance[]>;
  /** Stops any thread it started. */
  close(): Promise<void>;
}

/** Parses on the calling thread. */
export function inlineRequestParser(limits: GenerateLimits): RequestParser {
  return {
    generate: (body, lookupSplitter) => parseGenerateRequest(body, limits, lookupSplitter),
    preview: (body, lookupSplitter) => previewSplitterRequest(body, limits, lookupSplitter),
    close: async () => undefined,
  };
}
