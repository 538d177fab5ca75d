/**
 * OpenAI's stock voice names, which clients send by default (Open WebUI falls back to them, the
 * SDK examples use them), each mapped to a voice of the built-in engines. OPENAI_VOICES overrides
 * any of them (or adds names) with a voice spec of the operator's choice.
 */

/** The voice names OpenAI's speech API offers. */
export const OPENAI_STOCK_VOICES = [
  'alloy',
  'ash',
  'ballad',
  'coral',
  'echo',
  'fable',
  'nova',
  'onyx',
  'sage',
  'shimmer',
  'verse',
] as const;

/**
 * Defaults: Flite's English voices first (more intelligible than espeak-ng's), then espeak-ng
 * variants for variety of timbre; feminine names get feminine variants where there is one.
 */
const DEFAULTS: Readonly<Record<(typeof OPENAI_STOCK_VOICES)[number], string>> = {
  alloy: 'flite:kal16',
  ash: 'flite:rms',
  ballad: 'flite:awb',
  coral: 'flite:slt',
  echo: 'espeak:en-us+m3',
  fable: 'espeak:en-gb+m1',
  nova: 'espeak:en-us+f3',
  onyx: 'espeak:en-us+m7',
  sage: 'espeak:en-gb+f3',
  shimmer: 'espeak:en-us+f4',
  verse: 'espeak:en-us+m1',
};

/** Voice name → voice spec: the defaults with the operator's overrides and additions. */
export function stockVoiceMap(overrides: Readonly<Record<string, string>>): ReadonlyMap<string, string> {
  return new Map(Object.entries({ ...DEFAULTS, ...overrides }));
}
