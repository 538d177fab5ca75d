/**
 * Parses a generate request into the
 * pieces to synthesise: `{contents}` directly, or `{text, splitter|splitterId}` through the
 * splitter, whose utterances are validated exactly like content items.
 */
import { z } from 'zod';
import { AppError, errors } from '../../errors/app-error.js';
import {
  CONTROL_CHARACTER_MESSAGE,
  controlCharacterIndex,
  parseInput,
  storableString,
} from '../../errors/validation.js';
import type { SplitterConfig } from '../../splitter/splitter-config.js';
import { checkSplitterConfigBounds, validateSplitterConfig } from '../../splitter/splitter-config.js';
import { splitText } from '../../splitter/split-text.js';
import type { LanguageRun } from '../../audio/engines/language-decision.js';
import { generationFieldSchemas, normalizeLanguage, randomSeed } from './generation-params.js';

/**
 * One content item as accepted: the hosted API's value sets (src/tasks/requests/generation-params.ts), known
 * keys validated, unknown keys dropped (as the hosted API does). Stored strings refuse control
 * characters; zod 4 numbers refuse ±Infinity (JSON's 1e309), so no
 * non-finite number reaches a piece. `language` is normalised to our canonical code
 * (`auto`, and what the voice's engine can speak, are decided with the voice when the task is
 * created: src/audio/engines/language-decision.ts); `seed` -1 or null draws a seed.
 */
const f = generationFieldSchemas;
export const contentItemSchema = z.object({
  type: z.string().optional(),
  text: storableString(),
  voiceId: storableString().min(1).max(200),
  promptId: f.promptId.optional(),
  preset: f.preset.optional(),
  language: f.language.transform((tag) => normalizeLanguage(tag)).optional(),
  speechRate: f.speechRate.default(1),
  seed: f.seed.transform((seed) => (seed === null || seed === -1 ? randomSeed() : seed)).optional(),
  interval: f.interval.default(0.5),
  emo_switch: f.emo_switch.optional(),
  reference_mode: f.reference_mode.optional(),
  vivid: f.vivid.optional(),
  break_clone: f.break_clone.optional(),
  flash: f.flash.optional(),
  srt: f.srt.optional(),
  infinite_mode: f.infinite_mode.optional(),
  instruct_mode: f.instruct_mode.optional(),
});

export type ContentItem = z.output<typeof contentItemSchema>;

/** Generation parameters of one piece, as stored with it. */
export type PieceParams = Omit<ContentItem, 'type' | 'text' | 'voiceId' | 'language'> & {
  /**
   * The language to speak the whole piece in: a canonical code, or absent = the voice's own. As
   * parsed it may be `auto`, which task creation replaces with what it decided.
   */
  language?: string;
  /** Set instead when the piece's sentences are in different languages (decided for `auto`). */
  languages?: LanguageRun[];
};

export interface PieceInput {
  text: string;
  voiceId: string;
  params: PieceParams;
  /** The splitter marker that started the piece (its speaker on subtitles); absent outside splitter mode. */
  speaker?: string;
}

export interface ParsedGenerateRequest {
  type: 'contents' | 'splitter';
  pieces: PieceInput[];
  /** What the task echoes of the request in its metadata. */
  echo: Record<string, unknown>;
}

export interface GenerateLimits {
  textLength: number;
  contents: number;
  /** Most markers a splitter-mode text may hold (SPLITTER_MAX_MARKERS). */
  splitterMarkers: number;
}

/** Loads a saved splitter's config for the caller (404 / 500 METADATA_INVALID come from there). */
export type SplitterLookup = (splitterId: string) => Promise<SplitterConfig>;

function parseItem(raw: unknown, where: string, limits: GenerateLimits): PieceInput {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new AppError('TTS_CONTENTS_INVALID', `${where} must be an object`);
  }
  const obj = raw as Record<string, unknown>;
  if (obj.type !== undefined && obj.type !== 'text') {
    throw new AppError(
      'TTS_CONTENTS_INVALID',
      `${where}.type must be "text" (got ${JSON.stringify(obj.type)})`,
    );
  }
  if (obj.text === undefined) throw errors.missingField(`${where}.text`);
  if (typeof obj.text === 'string' && obj.text.trim() === '') {
    throw new AppError('TTS_TEXT_EMPTY', `${where}.text is empty`);
  }
  if (typeof obj.text === 'string' && obj.text.length > limits.textLength)
    throw errors.tooLong(`${where}.text`, limits.textLength);
  // Strict, as the hosted API's async endpoint: a bad value is TTS_CONTENTS_INVALID naming the field.
  const item = parseInput(contentItemSchema, raw, 'TTS_CONTENTS_INVALID', where);
  const { type: _type, text, voiceId, language, ...rest } = item;
  const params: PieceParams = language === undefined ? rest : { ...rest, language };
  return { text: text.trim(), voiceId, params };
}

function parseSplitterText(body: Record<string, unknown>, limits: GenerateLimits): string {
  if (body.text === undefined || body.text === null) throw errors.missingField('text');
  if (typeof body.text !== 'string') throw errors.invalidValue('text must be a string');
  if (body.text.trim() === '') throw new AppError('TTS_TEXT_EMPTY', 'text is empty');
  if (body.text.length > limits.textLength) throw errors.tooLong('text', limits.textLength);
  if (controlCharacterIndex(body.text) !== -1) throw errors.invalidValue(`text ${CONTROL_CHARACTER_MESSAGE}`);
  return body.text;
}

/**
 * Splits `text` with `config` into content pieces, each with the marker that started it; explains an
 * empty result. The config's bounds are checked here, for inline and saved configs alike, and the
 * split stops at the first marker past the limit: the work of one request is bounded.
 */
function splitterPieces(
  text: string,
  config: SplitterConfig,
  limits: GenerateLimits,
): { piece: PieceInput; marker: string | null }[] {
  checkSplitterConfigBounds(config);
  const utterances = splitText(text, config, { maxMarkers: limits.splitterMarkers });
  if (utterances.length === 0) {
    throw new AppError(
      'TTS_TEXT_EMPTY',
      config.fallbackConfig === undefined
        ? 'splitting the text produced no utterance: text outside markers is dropped without fallbackConfig, and no marker is followed by text'
        : 'splitting the text produced no utterance: the text holds only markers',
    );
  }
  if (utterances.length > limits.contents) {
    throw new AppError(
      'TTS_CONTENTS_INVALID',
      `the text splits into ${utterances.length} utterances; at most ${limits.contents} are allowed`,
    );
  }
  return utterances.map((u, i) => {
    if (typeof u.params.voiceId !== 'string') {
      throw new AppError(
        'TTS_SPLITTER_INVALID',
        `utterance ${i} (${JSON.stringify(u.text.slice(0, 40))}, marker ${JSON.stringify(u.marker)}) has no voiceId: give its marker a voiceId or add fallbackConfig`,
      );
    }
    return {
      piece: parseItem({ ...u.params, type: 'text', text: u.text }, `utterances[${i}]`, limits),
      marker: u.marker,
    };
  });
}

/** Splits `text` with `config` into content pieces; explains an empty result. */
export function piecesFromSplitter(
  text: string,
  config: SplitterConfig,
  limits: GenerateLimits,
): PieceInput[] {
  return splitterPieces(text, config, limits).map(({ piece, marker }) =>
    marker === null ? piece : { ...piece, speaker: marker },
  );
}

function requestObject(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new AppError('VALIDATION_INVALID_FORMAT', 'request body must be a JSON object');
  }
  return body as Record<string, unknown>;
}

/** Which request shape the body uses; mixing shapes → VALIDATION_CONFLICT. */
function requestShape(b: Record<string, unknown>): 'contents' | 'splitter' {
  const has = (k: string) => b[k] !== undefined && b[k] !== null;
  if (has('splitter') && has('splitterId'))
    throw errors.conflict('splitter and splitterId are mutually exclusive');
  if (has('contents') && (has('splitter') || has('splitterId'))) {
    throw errors.conflict(
      'contents cannot be combined with splitter or splitterId (splitter mode takes text)',
    );
  }
  if (has('splitter') || has('splitterId')) return 'splitter';
  if (has('text'))
    throw errors.conflict('text needs splitter or splitterId; use contents for plain generation');
  return 'contents';
}

/** Splitter mode's text and configuration (inline and validated, or saved and loaded), and its echo. */
async function splitterInput(
  b: Record<string, unknown>,
  limits: GenerateLimits,
  lookupSplitter: SplitterLookup,
): Promise<{ text: string; config: SplitterConfig; echo: Record<string, unknown> }> {
  const text = parseSplitterText(b, limits);
  if (b.splitter !== undefined && b.splitter !== null) {
    const config = validateSplitterConfig(b.splitter);
    return { text, config, echo: { text, splitter: config } };
  }
  if (typeof b.splitterId !== 'string' || b.splitterId === '')
    throw errors.invalidValue('splitterId must be a string');
  if (controlCharacterIndex(b.splitterId) !== -1)
    throw errors.invalidValue(`splitterId ${CONTROL_CHARACTER_MESSAGE}`);
  return { text, config: await lookupSplitter(b.splitterId), echo: { text, splitterId: b.splitterId } };
}

/** One utterance as the preview shows it: the content piece generation would create, and its marker. */
export interface PreviewUtterance {
  index: number;
  text: string;
  voiceId: string;
  speechRate: number;
  marker: string | null;
  params: PieceParams;
}

/**
 * Splitter mode without a task (`POST /api/splitter/preview`): the same shape checks, validation
 * and splitting as generation, returning the utterances instead of queueing them.
 */
export async function previewSplitterRequest(
  body: unknown,
  limits: GenerateLimits,
  lookupSplitter: SplitterLookup,
): Promise<PreviewUtterance[]> {
  const b = requestObject(body);
  if (requestShape(b) !== 'splitter') throw errors.missingField('splitter or splitterId');
  const { text, config } = await splitterInput(b, limits, lookupSplitter);
  return splitterPieces(text, config, limits).map(({ piece, marker }, index) => ({
    index,
    text: piece.text,
    voiceId: piece.voiceId,
    speechRate: piece.params.speechRate,
    marker,
    params: piece.params,
  }));
}

/** Validates the request shape and returns its pieces. */
export async function parseGenerateRequest(
  body: unknown,
  limits: GenerateLimits,
  lookupSplitter: SplitterLookup,
): Promise<ParsedGenerateRequest> {
  const b = requestObject(body);
  if (requestShape(b) === 'splitter') {
    const { text, config, echo } = await splitterInput(b, limits, lookupSplitter);
    return { type: 'splitter', pieces: piecesFromSplitter(text, config, limits), echo };
  }
  const has = (k: string) => b[k] !== undefined && b[k] !== null;
  if (!has('contents')) throw errors.missingField('contents');
  if (!Array.isArray(b.contents)) throw new AppError('TTS_CONTENTS_INVALID', 'contents must be an array');
  if (b.contents.length === 0) throw new AppError('TTS_CONTENTS_INVALID', 'contents must not be empty');
  if (b.contents.length > limits.contents) {
    throw new AppError(
      'TTS_CONTENTS_INVALID',
      `contents has ${b.contents.length} items; at most ${limits.contents} are allowed`,
    );
  }
  const pieces = b.contents.map((item, i) => parseItem(item, `contents[${i}]`, limits));
  return { type: 'contents', pieces, echo: {} };
}
