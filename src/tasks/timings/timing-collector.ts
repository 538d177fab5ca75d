/**
 * Turns one engine call's audio and timing marks into timed sentences and words, on the piece's
 * own timeline (canonical samples from its first sample), as the audio arrives.
 *
 * A mark says where a sentence or word starts; it ends where the next one starts. Silence at
 * either edge is left out: a span runs from its first to its last voiced sample, so an engine's
 * pause before or after a sentence lies between sentences, where subtitles show a gap and players
 * find silence. Audio
 * before the first sentence mark (an engine that gives none: the whole piece) is one sentence
 * holding the text up to that mark.
 */
import type { EngineAudio, TimingMark } from '../../audio/engines/engine.js';
import { isVoiced, type VoicedIndex } from '../../audio/voiced-index.js';

export { VOICED_LEVEL } from '../../audio/voiced-index.js';

/** A word's span in samples and its text range (UTF-16 offsets into the piece's text). */
export interface WordTiming {
  start: number;
  end: number;
  textStart: number;
  textEnd: number;
}

/** A sentence's span in samples and text range, with its words (in order; may be none). */
export interface SentenceTiming {
  /** Its place among the piece's sentences, from 0. */
  seq: number;
  start: number;
  end: number;
  textStart: number;
  textEnd: number;
  words: WordTiming[];
}

interface OpenSpan {
  start: number;
  /** Its first voiced sample, once one came. */
  voiced?: number;
  textStart: number;
  textEnd: number;
}

/** Collects the timings of one engine call; feed every chunk to `add`, then call `finish`. */
export class TimingCollector {
  /** Samples seen so far. */
  private position = 0;
  /** Index of the last voiced sample seen, or -1. */
  private lastVoiced = -1;
  private sentence: (OpenSpan & { implicit: boolean; words: WordTiming[] }) | undefined;
  private word: OpenSpan | undefined;
  private seq = 0;
  private done: SentenceTiming[] = [];

  /** `textLength`: UTF-16 length of the piece's text (what a sentence without marks holds). */
  constructor(private readonly textLength: number) {
    this.sentence = { start: 0, textStart: 0, textEnd: textLength, implicit: true, words: [] };
  }

  /** Takes the next chunk; answers the sentences it completed. */
  add(chunk: EngineAudio): SentenceTiming[] {
    const { pcm, marks } = chunk;
    const base = this.position;
    const index = chunk.voiced === undefined ? undefined : new IndexCursor(chunk.voiced);
    let scanned = 0;
    for (const mark of marks) {
      const at = Math.min(Math.max(mark.sample - base, scanned), pcm.length);
      this.look(pcm, index, scanned, at, base);
      scanned = at;
      this.mark(mark, base + at);
    }
    this.look(pcm, index, scanned, pcm.length, base);
    this.position = base + pcm.length;
    return this.take();
  }

  /** Ends the call: answers its last sentence (if it holds anything). */
  finish(): SentenceTiming[] {
    this.closeSentence(this.position);
    return this.take();
  }

  private take(): SentenceTiming[] {
    const out = this.done;
    this.done = [];
    return out;
  }

  /**
   * Takes in samples `from`–`to` of the chunk: the first voiced one opens the spans still waiting
   * for their voice, the last one moves where spans end. Read off the chunk's index when it has
   * both positions (a few lookups), else scanned sample by sample.
   */
  private look(
    pcm: Int16Array,
    index: IndexCursor | undefined,
    from: number,
    to: number,
    base: number,
  ): void {
    const opening = [this.sentence, this.word].filter(
      (span) => span !== undefined && span.voiced === undefined,
    );
    const start = index?.find(from);
    const end = index?.find(to);
    if (index !== undefined && start !== undefined && end !== undefined) {
      if (from >= to) return;
      const first = index.next(start);
      if (first !== -1 && first < to)
        for (const span of opening) if (span !== undefined) span.voiced = base + first;
      const last = index.prev(end);
      if (last >= from) this.lastVoiced = base + last;
      return;
    }
    if (opening.length > 0) {
      for (let i = from; i < to; i++) {
        if (isVoiced(pcm[i] ?? 0)) {
          for (const span of opening) if (span !== undefined) span.voiced = base + i;
          break;
        }
      }
    }
    for (let i = to - 1; i >= from; i--) {
      if (isVoiced(pcm[i] ?? 0)) {
        this.lastVoiced = base + i;
        return;
      }
    }
  }

  private mark(mark: TimingMark, at: number): void {
    if (mark.kind === 'sentence') {
      const current = this.sentence;
      // What came before the first sentence mark: a sentence only if it holds any voice.
      if (current?.implicit === true) current.textEnd = Math.min(current.textEnd, mark.textStart);
      this.closeSentence(at);
      const textEnd = mark.textEnd > mark.textStart ? mark.textEnd : this.textLength;
      this.sentence = { start: at, textStart: mark.textStart, textEnd, implicit: false, words: [] };
      return;
    }
    this.closeWord(at);
    this.word = { start: at, textStart: mark.textStart, textEnd: mark.textEnd };
  }

  /** The end of a span that started at `start` and runs until `next`: its last voiced sample + 1. */
  private voicedEnd(start: number, next: number): number {
    const last = Math.min(this.lastVoiced + 1, next);
    return last > start ? last : start;
  }

  private closeWord(next: number): void {
    const word = this.word;
    this.word = undefined;
    if (word === undefined || this.sentence === undefined) return;
    const start = word.voiced ?? word.start;
    this.sentence.words.push({
      start,
      end: this.voicedEnd(start, next),
      textStart: word.textStart,
      textEnd: word.textEnd,
    });
  }

  private closeSentence(next: number): void {
    this.closeWord(next);
    const sentence = this.sentence;
    this.sentence = undefined;
    if (sentence === undefined) return;
    const start = sentence.voiced ?? sentence.start;
    const end = this.voicedEnd(start, next);
    if (sentence.implicit && (sentence.voiced === undefined || sentence.textEnd <= sentence.textStart))
      return;
    this.done.push({
      seq: this.seq++,
      start,
      end,
      textStart: sentence.textStart,
      textEnd: sentence.textEnd,
      words: sentence.words,
    });
  }
}

/** Reads a chunk's VoicedIndex at the positions the collector asks for, which only move forward. */
class IndexCursor {
  private k = 0;

  constructor(private readonly index: VoicedIndex) {}

  /** Where `position` is in the index, or undefined when the index does not hold it. */
  find(position: number): number | undefined {
    const { at } = this.index;
    while (this.k < at.length && at[this.k]! < position) this.k++;
    return this.k < at.length && at[this.k] === position ? this.k : undefined;
  }

  next(k: number): number {
    return this.index.next[k]!;
  }

  prev(k: number): number {
    return this.index.prev[k]!;
  }
}
