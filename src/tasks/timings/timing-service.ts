/**
 * A task's subtitles and timestamps, placed on the timeline of the audio we serve.
 *
 * Stored timings count canonical samples from the first sample of their piece. A player decodes
 * the MP3 we serve; sample 0 of that decode (libavcodec; the live stream has no LAME tag, and the
 * stored files are the same bytes) is t = 0. Before the first sample of the PCM come the
 * encoder's priming samples and the decoder's own delay: ENCODER_DELAY_SAMPLES in all, measured
 * with both LAME builds. The full-task audio holds every piece and, between them, its silence
 * (the piece's `interval`, rounded to samples as the encoder rounds it); a content's own MP3
 * holds that piece alone. Engines resample to the canonical rate before the marks are counted,
 * so no further correction applies.
 *
 * Readable while the task is generated: pieces are generated in order and each sentence is
 * stored once its audio is written, so what a reader gets is a prefix of the final list.
 */
import { CANONICAL_RATE } from '../../audio/pcm.js';
import { AppError, errors } from '../../errors/app-error.js';
import { secretsEqual } from '../../common/secret-compare.js';
import type { TaskContentRow, TaskRow } from '../../storage/schema.js';
import type { PieceParams } from '../requests/generate-request.js';
import type { TaskStore } from '../task-store.js';
import { buildCues, toSrt, toVtt, type TimedSentence } from './cues.js';
import type { TimingStore } from './timing-store.js';

/**
 * Samples between the first PCM sample given to the encoder and where it lands in libavcodec's
 * decode of our untagged MP3: LAME's 576 priming samples and the decoder's 529.
 */
export const ENCODER_DELAY_SAMPLES = 1105;

/** A word of timestamps.json. */
export interface TimestampWord {
  content: number;
  /** Index of its sentence in `sentences`. */
  sentence: number;
  start: number;
  end: number;
  text: string;
}

/** A sentence of timestamps.json. */
export interface TimestampSentence {
  content: number;
  voiceId: string;
  /** The splitter marker that started its content; null outside splitter mode. */
  speaker: string | null;
  start: number;
  end: number;
  text: string;
  words: Omit<TimestampWord, 'content' | 'sentence'>[];
}

/** The body of timestamps.json. */
export interface Timestamps {
  taskId: string;
  /** The content these times are of (its own MP3), or null for the full-task audio. */
  content: number | null;
  status: TaskRow['status'];
  /** True once the task is generated: nothing will be added. */
  complete: boolean;
  sentences: TimestampSentence[];
  words: TimestampWord[];
}

/** Who asks: the `auth` query parameter (the task's stream token) or a bearer key. */
export interface TimingCredentials {
  auth: unknown;
  bearer: string | undefined;
}

/** Resolves an API key to its account; throws AUTH_UNAUTHORIZED for a missing or unknown key. */
export interface KeyCheck {
  authenticate(key: string | undefined): Promise<{ id: string }>;
}

// Canonical decimal only, as the per-content audio URLs take it: `01` is not content 1.
const CONTENT_INDEX = /^(?:0|[1-9][0-9]{0,8})$/;

function parseContentIndex(segment: string): number | null {
  return CONTENT_INDEX.test(segment) ? Number(segment) : null;
}

export class TimingService {
  constructor(
    private readonly tasks: TaskStore,
    private readonly timings: TimingStore,
    private readonly accounts: KeyCheck,
  ) {}

  /** timestamps.json of task `taskId`, or of its content `contentIndex` (a path segment). */
  async timestamps(
    taskId: string,
    contentIndex: string | undefined,
    credentials: TimingCredentials,
  ): Promise<Timestamps> {
    const task = await this.authorize(taskId, credentials);
    const pieces = await this.tasks.pieces(task.id);
    let content: number | null = null;
    if (contentIndex !== undefined) {
      const idx = parseContentIndex(contentIndex);
      if (idx === null || !pieces.some((p) => p.idx === idx))
        throw new AppError('RESOURCE_NOT_FOUND', `task ${task.id} has no content ${contentIndex}`);
      content = idx;
    }
    const stored = await this.timings.list(task.id, content ?? undefined);
    const byIdx = new Map(pieces.map((p) => [p.idx, p]));
    const starts = content === null ? pieceStarts(pieces) : new Map([[content, 0]]);
    const sentences: TimestampSentence[] = [];
    const words: TimestampWord[] = [];
    for (const s of stored) {
      const piece = byIdx.get(s.contentIdx);
      const start = starts.get(s.contentIdx);
      // A piece whose place is not known yet (one before it is unfinished): the prefix ends here.
      if (piece === undefined || start === undefined) break;
      const at = (sample: number): number => seconds(start + sample);
      const index = sentences.length;
      const sentenceWords = s.words.map((w) => ({
        start: at(w.start),
        end: at(Math.max(w.start, w.end)),
        text: piece.text.slice(w.textStart, w.textEnd),
      }));
      sentences.push({
        content: s.contentIdx,
        voiceId: piece.voice_id,
        speaker: piece.speaker,
        start: at(s.start),
        end: at(s.end),
        text: piece.text.slice(s.textStart, s.textEnd).trim(),
        words: sentenceWords,
      });
      for (const w of sentenceWords) words.push({ content: s.contentIdx, sentence: index, ...w });
    }
    return {
      taskId: task.id,
      content,
      status: task.status,
      complete: task.status === 'generated',
      sentences,
      words,
    };
  }

  /** subtitles.srt or subtitles.vtt of the task or one content; same authorisation. */
  async subtitles(
    format: 'srt' | 'vtt',
    taskId: string,
    contentIndex: string | undefined,
    credentials: TimingCredentials,
  ): Promise<{ body: string; complete: boolean }> {
    const stamps = await this.timestamps(taskId, contentIndex, credentials);
    const cues = buildCues(stamps.sentences.map(timedSentence));
    return { body: format === 'srt' ? toSrt(cues) : toVtt(cues), complete: stamps.complete };
  }

  /** 401 without a credential → 404 unknown task → 403 a token or key not of this task. */
  private async authorize(taskId: string, credentials: TimingCredentials): Promise<TaskRow> {
    const { auth, bearer } = credentials;
    if (auth !== undefined && typeof auth !== 'string')
      throw errors.unauthorized('the auth query parameter must be given once');
    const token = auth === '' ? undefined : auth;
    if (token === undefined && bearer === undefined)
      throw errors.unauthorized('the auth query parameter or an API key is required');
    // A key is checked first: a wrong key is a 401 whatever the task.
    const account = token === undefined ? await this.accounts.authenticate(bearer) : undefined;
    const task = await this.tasks.get(taskId);
    if (task === undefined) throw errors.notFound('GENERATE_NOT_FOUND', `task ${taskId}`);
    if (account !== undefined) {
      if (account.id !== task.account_id) throw errors.notFound('GENERATE_NOT_FOUND', `task ${taskId}`);
      return task;
    }
    if (!secretsEqual(token ?? '', task.auth_token))
      throw errors.forbidden('the auth token is not valid for this task');
    return task;
  }
}

/** Seconds of the decoded audio at canonical sample `sample` of the PCM, to the millisecond. */
function seconds(sample: number): number {
  return Math.round(((sample + ENCODER_DELAY_SAMPLES) / CANONICAL_RATE) * 1000) / 1000;
}

/**
 * Where each piece starts in the full-task PCM, as far as it is known: every piece before it
 * generated (its samples recorded), plus the silence after each of those.
 */
function pieceStarts(pieces: readonly TaskContentRow[]): Map<number, number> {
  const starts = new Map<number, number>();
  let at = 0;
  for (const piece of [...pieces].sort((a, b) => a.idx - b.idx)) {
    starts.set(piece.idx, at);
    if (piece.status !== 'generated' || piece.samples === null) break;
    const interval = (JSON.parse(piece.params) as PieceParams).interval;
    at += Number(piece.samples) + Math.round(interval * CANONICAL_RATE);
  }
  return starts;
}

function timedSentence(s: TimestampSentence): TimedSentence {
  // Word offsets into the sentence's text, for the cue builder's breaks.
  let from = 0;
  const words = s.words.map((w) => {
    const found = s.text.indexOf(w.text, from);
    const textStart = found === -1 ? from : found;
    from = textStart + w.text.length;
    return { start: w.start, end: w.end, textStart, textEnd: from };
  });
  return { start: s.start, end: s.end, text: s.text, speaker: displayName(s.speaker), words };
}

/** A splitter marker as a speaker's name: `<Ann>` or `[Ann]` is Ann. */
function displayName(marker: string | null): string | undefined {
  if (marker === null) return undefined;
  const name = marker
    .replace(/^[<[{(]\s*/, '')
    .replace(/\s*[>\]})]$/, '')
    .trim();
  return name === '' ? marker : name;
}
