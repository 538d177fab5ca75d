/**
 * The body of `POST /v1/audio/speech` as OpenAI defines it, validated into what the service does
 * with it. Unknown fields are ignored, as OpenAI-compatible servers do (clients send extras).
 */
import { AppError, errors } from '../errors/app-error.js';
import { AUDIO_FORMATS, REFUSED_FORMATS, type AudioFormat } from '../audio/formats/registry.js';

/** OpenAI's own model names; every one is accepted and speaks with the voice asked for. */
export const OPENAI_MODELS = ['tts-1', 'tts-1-hd', 'gpt-4o-mini-tts'] as const;

/** OpenAI's speed range (a tempo factor: 2.0 = twice as fast). */
export const SPEED_MIN = 0.25;
export const SPEED_MAX = 4;
/** Our speechRate range (a duration factor: 2.0 = twice as long), what every engine takes. */
const RATE_MIN = 0.5;
const RATE_MAX = 2;

export interface SpeechRequest {
  model: string;
  input: string;
  voice: string;
  format: AudioFormat;
  /** OpenAI's speed as asked (0.25–4). */
  speed: number;
  /** Our speechRate for it: 1 / speed, clamped to what the engines support (0.5–2). */
  speechRate: number;
  instructions?: string;
  streamFormat: 'audio' | 'sse';
}

/** Formats a client can name, for error messages. */
export function supportedFormats(): string {
  return [...AUDIO_FORMATS.keys()].join(', ');
}

function stringField(body: Record<string, unknown>, field: string, required: boolean): string | undefined {
  const value = body[field];
  if (value === undefined || value === null) {
    if (required) throw errors.missingField(field);
    return undefined;
  }
  if (typeof value !== 'string') throw errors.invalidValue(`${field} must be a string`);
  return value;
}

/**
 * Validates the body. `models` are the names `model` may take (OpenAI's and the engines');
 * `inputMaxChars` bounds `input` in characters (code points, as OpenAI counts them).
 */
export function parseSpeechRequest(
  body: unknown,
  options: { models: readonly string[]; inputMaxChars: number },
): SpeechRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new AppError('VALIDATION_INVALID_FORMAT', 'request body must be a JSON object');
  const b = body as Record<string, unknown>;

  const model = stringField(b, 'model', false) ?? 'tts-1';
  if (!options.models.includes(model))
    throw errors.invalidValue(`model "${model}" is not available; models: ${options.models.join(', ')}`);

  const input = stringField(b, 'input', true) ?? '';
  if (input.trim() === '') throw new AppError('TTS_TEXT_EMPTY', 'input is empty');
  if ([...input].length > options.inputMaxChars) throw errors.tooLong('input', options.inputMaxChars);

  const voice = (stringField(b, 'voice', true) ?? '').trim();
  if (voice === '') throw errors.missingField('voice');
  if (voice.length > 200) throw errors.tooLong('voice', 200);

  const formatName = stringField(b, 'response_format', false) ?? 'mp3';
  const refused = REFUSED_FORMATS.get(formatName);
  if (refused !== undefined)
    throw errors.invalidValue(
      `response_format "${formatName}": ${refused}; supported: ${supportedFormats()}`,
    );
  const format = AUDIO_FORMATS.get(formatName);
  if (format === undefined)
    throw errors.invalidValue(
      `response_format "${formatName}" is not supported; supported: ${supportedFormats()}`,
    );

  const rawSpeed = b.speed ?? 1;
  if (
    typeof rawSpeed !== 'number' ||
    !Number.isFinite(rawSpeed) ||
    rawSpeed < SPEED_MIN ||
    rawSpeed > SPEED_MAX
  )
    throw errors.invalidValue(`speed must be a number from ${SPEED_MIN} to ${SPEED_MAX}`);
  const speechRate = Math.min(RATE_MAX, Math.max(RATE_MIN, 1 / rawSpeed));

  const instructions = stringField(b, 'instructions', false);
  if (instructions !== undefined && [...instructions].length > options.inputMaxChars)
    throw errors.tooLong('instructions', options.inputMaxChars);

  const streamFormat = stringField(b, 'stream_format', false) ?? 'audio';
  if (streamFormat !== 'audio' && streamFormat !== 'sse')
    throw errors.invalidValue('stream_format must be "audio" or "sse"');

  return {
    model,
    input,
    voice,
    format,
    speed: rawSpeed,
    speechRate,
    ...(instructions !== undefined && instructions.trim() !== '' && { instructions }),
    streamFormat,
  };
}
