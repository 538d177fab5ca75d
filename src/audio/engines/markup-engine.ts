/**
 * Inline markup for every engine (src/text/markup.ts): a piece's text is cut at its pause tags,
 * each stretch of text is one call of the engine (without the tags; for the built-in engines with
 * `<`, `>`, `&` and tag-like spans spelled as words), and each pause is exact silence in the same
 * canonical PCM, in order. So a pause is a gap in the piece's audio by itself: stored pieces, the
 * merged audio, live streams and one-shots all carry it, and every sample is counted like speech.
 */
import { CANONICAL_RATE } from '../pcm.js';
import { silentIndex } from '../voiced-index.js';
import { parseMarkup, speakableText, type SpeakableText } from '../../text/markup.js';
import {
  audioWithMarks,
  type EngineAudio,
  type SpeechEngine,
  type SynthesisRequest,
  type TimingMark,
} from './engine.js';
import { languageAt, type LanguageRun } from './language-decision.js';

/** Silence is handed on in chunks of at most this many samples (one second). */
const SILENCE_CHUNK = CANONICAL_RATE;

/** How an engine's text is prepared: symbols spelled as words, or kept for an engine that reads them. */
export interface MarkupOptions {
  /**
   * Spell `<`, `>`, `&`, `<3` and tag-like spans as words: the built-in engines lose them
   * (espeak-ng reads its input as SSML). A remote endpoint gets them as written (its model reads
   * them, in a language we may not know).
   */
  spellSymbols: boolean;
}

/** One stretch of a piece as the engine gets it (`start`–`end`: where it is written in the piece). */
type Part =
  | { kind: 'pause'; samples: number }
  | { kind: 'text'; request: SynthesisRequest; map: SpeakableText | undefined; start: number; end: number };

/**
 * The parts of `req`, or undefined when its text has no markup at all (the engine gets the request
 * unchanged: the same calls, the same audio as without this layer).
 */
function partsOf(req: SynthesisRequest, options: MarkupOptions): Part[] | undefined {
  const segments = parseMarkup(req.text);
  const fallback = req.language ?? req.voice.voice;
  const parts: Part[] = [];
  let changed = false;
  for (const segment of segments) {
    if (segment.kind === 'pause') {
      parts.push({ kind: 'pause', samples: Math.round((segment.ms * CANONICAL_RATE) / 1000) });
      changed = true;
      continue;
    }
    const map = options.spellSymbols
      ? speakableText(segment.text, (at) => languageAt(req.languages, at, fallback), segment.start)
      : undefined;
    const text = map?.text ?? segment.text;
    if (text !== req.text) changed = true;
    const languages =
      map === undefined
        ? shiftedRuns(req.languages, segment, (at) => at - segment.start)
        : shiftedRuns(req.languages, segment, (at) => spokenOffset(map, at));
    parts.push({
      kind: 'text',
      request: { ...req, text, ...(languages !== undefined && { languages }) },
      map,
      start: segment.start,
      end: segment.end,
    });
  }
  return changed ? parts : undefined;
}

/** The first spoken offset whose written origin is at or after `at`. */
function spokenOffset(map: SpeakableText, at: number): number {
  const k = map.from.findIndex((f) => f >= at);
  return k === -1 ? map.text.length : k;
}

/**
 * `runs` (offsets into the piece) as the runs of the part written at `part.start`–`part.end`
 * (offsets into the part's text): the run in force at its start, then those starting inside it.
 */
function shiftedRuns(
  runs: readonly LanguageRun[] | undefined,
  part: { start: number; end: number },
  toPart: (at: number) => number,
): LanguageRun[] | undefined {
  if (runs === undefined) return undefined;
  const out: LanguageRun[] = [];
  for (const run of runs) {
    if (run.at >= part.end) break;
    const at = run.at <= part.start ? 0 : toPart(run.at);
    if (at === 0) out.length = 0; // a later run in force at the part's start replaces an earlier one
    out.push({ at, language: run.language });
  }
  return out;
}

/** A mark of a part's call on the piece's timeline and text. */
function pieceMark(mark: TimingMark, at: number, part: Extract<Part, { kind: 'text' }>): TimingMark {
  const { map, start } = part;
  if (map === undefined)
    return {
      ...mark,
      sample: mark.sample + at,
      textStart: mark.textStart + start,
      textEnd: mark.textEnd + start,
    };
  const last = map.text.length - 1;
  const textStart = map.from[Math.min(mark.textStart, last)] ?? start;
  const textEnd =
    mark.textEnd > mark.textStart ? (map.to[Math.min(mark.textEnd - 1, last)] ?? textStart) : textStart;
  return { ...mark, sample: mark.sample + at, textStart, textEnd };
}

function* silence(samples: number): Iterable<Int16Array> {
  for (let left = samples; left > 0; left -= SILENCE_CHUNK)
    yield new Int16Array(Math.min(left, SILENCE_CHUNK));
}

/**
 * `engine` reading inline markup: pause tags become silence between calls of the engine, symbols
 * are spelled (MarkupOptions). Its marks are on the piece's timeline and text (a spelled symbol's
 * words point at the symbol). An engine's own MP3 (forwarded unchanged for instruct pieces) cannot
 * take silence of ours between its bytes: it gets the text with its pause tags left out and no
 * pauses, one call, so the forwarded MP3 and the audio made from it stay the same.
 */
export function withMarkup(engine: SpeechEngine, options: MarkupOptions): SpeechEngine {
  async function* marked(req: SynthesisRequest, signal: AbortSignal): AsyncIterable<EngineAudio> {
    const parts = partsOf(req, options);
    if (parts === undefined) {
      yield* audioWithMarks(engine, req, signal);
      return;
    }
    let at = 0;
    let startsAt = req.startsAt ?? 0;
    for (const part of parts) {
      signal.throwIfAborted();
      if (part.kind === 'pause') {
        for (const pcm of silence(part.samples)) yield { pcm, marks: [], voiced: silentIndex(pcm.length) };
        at += part.samples;
      } else {
        const request = { ...part.request, startsAt };
        // The engine's marks count from the start of its call: the part's place in the piece.
        const partAt = at;
        let first = true;
        for await (const chunk of audioWithMarks(engine, request, signal)) {
          const marks = chunk.marks.map((m) => pieceMark(m, partAt, part));
          // The part starts a sentence where the engine marks none there (an engine without
          // marks): so timings and subtitles of a piece cut at its pauses know where each part
          // starts and which written text it says, the tags left out.
          if (first && !chunk.marks.some((m) => m.kind === 'sentence' && m.sample === 0))
            marks.unshift({ kind: 'sentence', sample: partAt, textStart: part.start, textEnd: part.end });
          first = false;
          yield { pcm: chunk.pcm, marks, ...(chunk.voiced !== undefined && { voiced: chunk.voiced }) };
          at += chunk.pcm.length;
        }
      }
      startsAt = (req.startsAt ?? 0) + at / CANONICAL_RATE;
    }
  }
  async function* plain(req: SynthesisRequest, signal: AbortSignal): AsyncIterable<Int16Array> {
    const parts = partsOf(req, options);
    if (parts === undefined) {
      yield* engine.synthesize(req, signal);
      return;
    }
    let at = 0;
    for (const part of parts) {
      signal.throwIfAborted();
      if (part.kind === 'pause') {
        yield* silence(part.samples);
        at += part.samples;
      } else {
        const request = { ...part.request, startsAt: (req.startsAt ?? 0) + at / CANONICAL_RATE };
        for await (const pcm of engine.synthesize(request, signal)) {
          at += pcm.length;
          yield pcm;
        }
      }
    }
  }
  const mp3 = engine.synthesizeMp3;
  return {
    synthesize: plain,
    ...(engine.synthesizeWithMarks !== undefined && { synthesizeWithMarks: marked }),
    ...(mp3 !== undefined && {
      synthesizeMp3: (req: SynthesisRequest, signal: AbortSignal) => {
        const parts = partsOf(req, options);
        const text = parts?.flatMap((p) => (p.kind === 'text' ? [p.request.text.trim()] : [])).join(' ');
        return mp3.call(engine, text === undefined ? req : { ...req, text }, signal);
      },
    }),
  };
}
