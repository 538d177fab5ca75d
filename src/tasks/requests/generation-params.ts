/**
 * The hosted API's generation parameters: the value sets existing clients send, one zod schema per field,
 * and how they are normalised for our engines. Pure: no I/O. Used strictly by task creation (a bad value is
 * a 400 naming the field) and leniently by one-shot synthesis (`lenientItem` drops what it cannot use).
 */
import { randomInt } from 'node:crypto';
import { z } from 'zod';
import { storableString } from '../../errors/validation.js';

/** The languages the hosted API names (besides `auto`), as our canonical codes. */
export const LANGUAGES = ['zh', 'en-us', 'ja', 'ko', 'fr-fr', 'pt', 'de', 'es', 'yue'] as const;
/** A canonical language code. */
export type Language = (typeof LANGUAGES)[number];

/** Primary language subtags (and a few whole tags) clients send, mapped to the canonical code. */
const LANGUAGE_BY_TAG: Readonly<Record<string, Language>> = {
  zh: 'zh',
  cmn: 'zh',
  'zh-hk': 'yue',
  'zh-mo': 'yue',
  yue: 'yue',
  en: 'en-us',
  ja: 'ja',
  jp: 'ja',
  ko: 'ko',
  kr: 'ko',
  fr: 'fr-fr',
  pt: 'pt',
  de: 'de',
  es: 'es',
};

const languageNames = new Intl.DisplayNames(['en'], { type: 'language', fallback: 'none' });

/**
 * The canonical code of a language tag as clients send it (`en`, `EN_us`, `ja-JP`, `fr-FR`,
 * `zh-Hans-CN`, `auto`): one of the hosted API's codes for its languages, else the tag itself in
 * lowercase when it names a language at all (`ar`, `ru-RU`: whether the voice's engine speaks it
 * is decided with the voice), or undefined (`xx`, `klingon`).
 */
export function normalizeLanguage(tag: string): string | undefined {
  const t = tag.trim().toLowerCase().replace(/_/g, '-');
  if (t === 'auto') return 'auto';
  if (!/^[a-z]{2,3}(-[a-z0-9]{2,8})*$/.test(t)) return undefined;
  if ((LANGUAGES as readonly string[]).includes(t)) return t;
  const [primary = '', region] = t.split('-');
  const hosted =
    LANGUAGE_BY_TAG[region === undefined ? t : `${primary}-${region}`] ?? LANGUAGE_BY_TAG[primary];
  if (hosted !== undefined) return hosted;
  try {
    return languageNames.of(primary) === undefined ? undefined : t;
  } catch {
    return undefined;
  }
}

/** The style of a preset key (`v3_balance_pro` → `balance`): what our engines are asked for. */
export type PresetStyle = 'creative' | 'balance' | 'stable';

/** A synthesis preset as `GET /api/tts/presets` lists it. */
export interface Preset {
  key: string;
  style: PresetStyle;
  i18n_name: Record<'en' | 'zh', string>;
  i18n_description: Record<'en' | 'zh', string>;
  config: {
    temperature: number;
    top_k: number;
    top_p: number;
    min_p: number;
    frequency_penalty: number;
    presence_penalty: number;
    repetition_penalty: number;
    volume: number;
  };
}

const STYLES: Readonly<Record<PresetStyle, Omit<Preset, 'key' | 'style'>>> = {
  creative: {
    i18n_name: { en: 'Creative', zh: '创意' },
    i18n_description: { en: 'More varied, expressive delivery', zh: '更多变化与表现力' },
    config: {
      temperature: 1,
      top_k: 80,
      top_p: 0.95,
      min_p: 0,
      frequency_penalty: 0,
      presence_penalty: 0,
      repetition_penalty: 1.1,
      volume: 1,
    },
  },
  balance: {
    i18n_name: { en: 'Balanced', zh: '均衡' },
    i18n_description: { en: 'The default: natural and steady', zh: '默认：自然且稳定' },
    config: {
      temperature: 0.8,
      top_k: 50,
      top_p: 0.9,
      min_p: 0,
      frequency_penalty: 0,
      presence_penalty: 0,
      repetition_penalty: 1.1,
      volume: 1,
    },
  },
  stable: {
    i18n_name: { en: 'Stable', zh: '稳定' },
    i18n_description: { en: 'Most consistent from run to run', zh: '多次生成最一致' },
    config: {
      temperature: 0.5,
      top_k: 20,
      top_p: 0.8,
      min_p: 0.05,
      frequency_penalty: 0,
      presence_penalty: 0,
      repetition_penalty: 1.2,
      volume: 1,
    },
  },
};

/**
 * Every preset key we accept: the three styles, and the hosted API's model groups `v2_*`/`v3_*`
 * with their `_pro` (professional-clone) variants. Each maps to its style.
 */
export const PRESETS: readonly Preset[] = (['creative', 'balance', 'stable'] as const).flatMap((style) =>
  ['', 'v2_', 'v3_'].flatMap((group) =>
    (group === '' ? [''] : ['', '_pro']).map((variant) => ({
      key: `${group}${style}${variant}`,
      style,
      ...STYLES[style],
    })),
  ),
);

const PRESET_KEYS = PRESETS.map((p) => p.key) as [string, ...string[]];

/** The style of an accepted preset key. */
export function presetStyle(key: string): PresetStyle | undefined {
  return PRESETS.find((p) => p.key === key)?.style;
}

/** A draw for `seed: -1` or `null`: random, in the int32 range the hosted API uses. */
export function randomSeed(): number {
  return randomInt(0, 2 ** 31 - 1);
}

/**
 * One schema per generation field of a content item (the hosted value sets). `text` and
 * `voiceId` are the task's own; the rest are the switches clients send.
 */
export const generationFieldSchemas = {
  promptId: storableString().max(200),
  preset: z.enum(PRESET_KEYS),
  language: z
    .string()
    .max(35)
    .refine((tag) => normalizeLanguage(tag) !== undefined, {
      message: `must be auto or a language tag such as ${LANGUAGES.join(', ')}, ar, ru (short and regional codes such as en, ja-JP, fr-FR are accepted)`,
    })
    .describe(
      "`auto` decides per sentence with the voice's engine language as the prior: short or ambiguous sentences keep it, another script (Arabic, Cyrillic, Han…) or a clear paragraph switches to the engine's voice for that language. A language (or a detected script) no voice of the voice's engine speaks is 400 UNSUPPORTED_LANGUAGE; remote engines are never refused.",
    ),
  speechRate: z.number().min(0.5).max(2),
  /** int32; -1 and null mean random (resolved when the task is created). */
  seed: z.number().int().min(-1).max(2_147_483_647).nullable(),
  interval: z.number().min(0).max(10),
  /** [anger, happiness, neutral, sadness, contextual], each 0–10; all 0 = follow the sample. */
  emo_switch: z.array(z.number().int().min(0).max(10)).length(5, 'must hold exactly 5 numbers'),
  reference_mode: z.enum(['similarity', 'balanced', 'expressive']),
  vivid: z.boolean(),
  break_clone: z.boolean(),
  flash: z.boolean(),
  srt: z.boolean(),
  infinite_mode: z.boolean(),
  instruct_mode: z.boolean(),
} as const;

/** Fields whose query-string form (`GET /api/tts/simple-generate.mp3`) is a number. */
export const NUMBER_FIELDS: ReadonlySet<string> = new Set(['speechRate', 'seed', 'interval']);
/** Fields whose query-string form is a boolean: `true`/`false`/`1`/`0`. */
export const BOOLEAN_FIELDS: ReadonlySet<string> = new Set([
  'vivid',
  'break_clone',
  'flash',
  'srt',
  'stream',
  'direct_stream',
  'infinite_mode',
  'instruct_mode',
]);

/**
 * Simple-generate's leniency (the sheet: "it drops what it cannot use"): a generation field whose
 * value its schema refuses is dropped, as is an all-zero `emo_switch` and a language we cannot
 * map. Only an `emo_switch` of the wrong length stays, to be refused (400). `text`, `voiceId` and
 * unknown keys are left for task creation.
 */
export function lenientItem(item: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...item };
  for (const [field, schema] of Object.entries(generationFieldSchemas)) {
    const value = out[field];
    if (value === undefined) continue;
    if (field === 'emo_switch') {
      if (Array.isArray(value) && value.length === 5 && value.every((v) => v === 0)) delete out[field];
      else if (Array.isArray(value) && value.length !== 5) continue; // refused by task creation
    }
    if (!(schema as z.ZodType).safeParse(value).success) delete out[field];
  }
  return out;
}
