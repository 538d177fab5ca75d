/**
 * Subtitle cues from timed sentences, and their SRT and WebVTT text. Pure: no I/O.
 *
 * Readability rules (the usual broadcast ones): a cue shows at most two lines of at most
 * 42 characters and lasts at most 7 s; it lasts at least 0.7 s unless the speech is shorter and
 * nothing follows soon enough. Every sentence starts a new cue and no cue holds text of two
 * sentences; a long sentence is broken between words (never inside one). On dialogue (more than
 * one speaker), each cue names its speaker: WebVTT's `<v Name>` voice span, `Name: ` in SRT.
 */

/** Characters per subtitle line, at most. */
export const CUE_LINE_CHARS = 42;
/** Lines per cue, at most. */
export const CUE_LINES = 2;
/** Longest a cue may last, in seconds. */
export const CUE_MAX_SECONDS = 7;
/** Shortest a cue lasts, in seconds, unless the speech is shorter and the next cue starts earlier. */
export const CUE_MIN_SECONDS = 0.7;

/** A word's span, its text given as UTF-16 offsets into its sentence's text. */
export interface TimedWord {
  start: number;
  end: number;
  textStart: number;
  textEnd: number;
}

/** A sentence on the audio's timeline (seconds), with the words the engine timed (may be none). */
export interface TimedSentence {
  start: number;
  end: number;
  text: string;
  /** Who speaks it (dialogue), shown on its cues when the cues have more than one speaker. */
  speaker?: string | undefined;
  words: readonly TimedWord[];
}

/** One subtitle cue. */
export interface Cue {
  start: number;
  end: number;
  lines: string[];
  /** Set on dialogue cues only. */
  speaker?: string;
}

interface Token {
  text: string;
  /** Seconds at which the token is spoken. */
  at: number;
  /** Seconds at which the next token is spoken, or its sentence ends. */
  end: number;
}

/** The cues of `sentences` (in time order), following the readability rules above. */
export function buildCues(sentences: readonly TimedSentence[]): Cue[] {
  const speakers = new Set(sentences.map((s) => s.speaker).filter((s) => s !== undefined && s !== ''));
  const dialogue = speakers.size > 1;
  const cues: Cue[] = [];
  for (const sentence of sentences) {
    const speaker = dialogue && sentence.speaker ? sentence.speaker : undefined;
    const prefix = speaker === undefined ? 0 : speaker.length + 2;
    const tokens = tokensOf(sentence);
    let chunk: Token[] = [];
    const close = (): void => {
      if (chunk.length === 0) return;
      const cue: Cue = {
        start: chunk[0]?.at ?? sentence.start,
        end: chunk.at(-1)?.end ?? sentence.end,
        lines: wrap(
          chunk.map((t) => t.text),
          prefix,
        ),
      };
      if (speaker !== undefined) cue.speaker = speaker;
      cues.push(cue);
      chunk = [];
    };
    for (const token of tokens) {
      const first = chunk[0];
      const fits =
        wrap(
          [...chunk, token].map((t) => t.text),
          prefix,
        ).length <= CUE_LINES;
      if (first !== undefined && (!fits || token.end - first.at > CUE_MAX_SECONDS)) close();
      chunk.push(token);
    }
    close();
  }
  return settleDurations(cues);
}

/** Stretches short cues to CUE_MIN_SECONDS where the next cue leaves room; cuts cues at CUE_MAX_SECONDS. */
function settleDurations(cues: Cue[]): Cue[] {
  for (const [i, cue] of cues.entries()) {
    const next = cues[i + 1];
    const limit = next === undefined ? Infinity : next.start;
    if (cue.end - cue.start < CUE_MIN_SECONDS)
      cue.end = Math.max(cue.end, Math.min(cue.start + CUE_MIN_SECONDS, limit));
    if (cue.end - cue.start > CUE_MAX_SECONDS) cue.end = cue.start + CUE_MAX_SECONDS;
  }
  return cues;
}

/** The sentence's words as shown (split at white space), each with the time it is spoken. */
function tokensOf(sentence: TimedSentence): Token[] {
  const tokens: Token[] = [];
  const { text, start, end, words } = sentence;
  const span = Math.max(0, end - start);
  // Without the engine's word times, a word's time follows its place in the text.
  const at = (offset: number): number => {
    let timed: TimedWord | undefined;
    for (const w of words) if (w.textStart <= offset) timed = w;
    if (timed !== undefined) return Math.min(Math.max(timed.start, start), end);
    return text.length === 0 ? start : start + (span * offset) / text.length;
  };
  for (const match of text.matchAll(/\S+/g)) tokens.push({ text: match[0], at: at(match.index), end });
  for (const [i, token] of tokens.entries()) token.end = Math.max(token.at, tokens[i + 1]?.at ?? end);
  return tokens;
}

/** Words wrapped into lines of at most CUE_LINE_CHARS (a longer word stands alone on its line). */
function wrap(words: readonly string[], prefix: number): string[] {
  const lines: string[] = [];
  let line = '';
  let width = prefix;
  for (const word of words) {
    if (line !== '' && width + 1 + word.length > CUE_LINE_CHARS) {
      lines.push(line);
      line = '';
      width = 0;
    }
    width += (line === '' ? 0 : 1) + word.length;
    line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') lines.push(line);
  return lines;
}

/** `HH:MM:SS,mmm` (SRT) or `HH:MM:SS.mmm` (WebVTT). */
function clock(seconds: number, separator: ',' | '.'): string {
  const ms = Math.max(0, Math.round(seconds * 1000));
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor(ms / 60_000) % 60;
  const s = Math.floor(ms / 1000) % 60;
  const pad = (n: number, w = 2): string => String(n).padStart(w, '0');
  return `${pad(h)}:${pad(m)}:${pad(s)}${separator}${pad(ms % 1000, 3)}`;
}

/** SRT: numbered from 1, blank line after each cue, CRLF-free (players take LF). */
export function toSrt(cues: readonly Cue[]): string {
  return cues
    .map((cue, i) => {
      const lines = [...cue.lines];
      if (cue.speaker !== undefined) lines[0] = `${cue.speaker}: ${lines[0] ?? ''}`;
      return `${i + 1}\n${clock(cue.start, ',')} --> ${clock(cue.end, ',')}\n${lines.join('\n')}\n`;
    })
    .join('\n');
}

/** WebVTT: the header, then numbered cues; text escaped, speakers as `<v Name>` spans. */
export function toVtt(cues: readonly Cue[]): string {
  const body = cues.map((cue, i) => {
    const text = cue.lines.map(escapeVtt).join('\n');
    const voiced = cue.speaker === undefined ? text : `<v ${escapeVttAnnotation(cue.speaker)}>${text}`;
    return `${i + 1}\n${clock(cue.start, '.')} --> ${clock(cue.end, '.')}\n${voiced}\n`;
  });
  return ['WEBVTT\n', ...body].join('\n');
}

/** Cue text may not hold `<` or `&` as such, nor the `-->` of a timing line. */
function escapeVtt(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}

/** A voice span's annotation ends at `>`: escaped like text. */
function escapeVttAnnotation(text: string): string {
  return escapeVtt(text);
}
