/**
 * The Wyoming `info` event: one TTS program (this service) whose voices are the voice catalogue's
 * engine voices, named by their voice spec (`espeak:gmw/en-US`, `flite:kal16`), and the voices of
 * the account the server runs as, named by their id. A spec voice's speakers are the values of its
 * engine's choice setting (espeak-ng's variants): `synthesize` with a speaker speaks `spec+speaker`.
 */
import type { EngineRegistry } from '../audio/engines/engine-registry.js';
import type { EngineInfo, EngineVoice } from '../audio/engines/provider.js';
import type { Voice, VoiceService } from '../voices/voice-service.js';

export interface Attribution {
  name: string;
  url: string;
}

export interface TtsVoiceInfo {
  name: string;
  description: string;
  attribution: Attribution;
  installed: boolean;
  version: string | null;
  languages: string[];
  speakers: { name: string }[] | null;
}

export interface TtsProgramInfo {
  name: string;
  description: string;
  attribution: Attribution;
  installed: boolean;
  version: string;
  supports_synthesize_streaming: boolean;
  voices: TtsVoiceInfo[];
}

/** Who made each built-in engine (an operator's remote endpoint and neural models are named as such). */
const ENGINE_ATTRIBUTION: Record<string, Attribution> = {
  flite: { name: 'CMU Flite', url: 'http://www.festvox.org/flite/' },
  espeak: { name: 'eSpeak NG', url: 'https://github.com/espeak-ng/espeak-ng' },
  neural: { name: 'sherpa-onnx', url: 'https://github.com/k2-fsa/sherpa-onnx' },
};

function attributionOf(engine: EngineInfo | undefined, engineId: string): Attribution {
  const provider = engine?.provider ?? engineId;
  // A remote endpoint is shown by its configured name only, never its URL (it may carry secrets).
  return ENGINE_ATTRIBUTION[provider] ?? { name: engineId, url: '' };
}

/**
 * A language tag as Home Assistant's Wyoming voices carry it (`en_US`, as wyoming-piper's voices):
 * the language, and a region when the tag has one; other tags are passed on lower-cased.
 */
export function wyomingLanguage(tag: string): string {
  const [language = '', region] = tag.split(/[-_]/);
  if (region !== undefined && /^([A-Za-z]{2}|\d{3})$/.test(region))
    return `${language.toLowerCase()}_${region.toUpperCase()}`;
  return region === undefined ? language.toLowerCase() : tag.toLowerCase();
}

function uniqueLanguages(tags: readonly string[]): string[] {
  return [...new Set(tags.map(wyomingLanguage))];
}

/** The speakers of a catalogue voice: its engine's choice setting (espeak-ng's variants), if any. */
export function choiceOf(engine: EngineInfo | undefined): { id: string; name: string }[] | undefined {
  return engine?.options.find((option) => option.values !== undefined)?.values;
}

function engineVoice(voice: EngineVoice, engine: EngineInfo | undefined): TtsVoiceInfo {
  const speakers = choiceOf(engine);
  return {
    name: `${voice.engine}:${voice.id}`,
    description: `${voice.name} (${voice.engine})`,
    attribution: attributionOf(engine, voice.engine),
    installed: true,
    version: null,
    languages: uniqueLanguages(voice.languages),
    speakers: speakers === undefined ? null : speakers.map((s) => ({ name: s.id })),
  };
}

async function accountVoice(
  voice: Voice,
  engines: ReadonlyMap<string, EngineInfo>,
  synthesis: EngineRegistry,
): Promise<TtsVoiceInfo> {
  let languages: string[] = [];
  if (voice.language !== 'auto') languages = [voice.language];
  else {
    // An `auto` voice speaks its engine's own language unless the text says otherwise.
    const spoken = await synthesis.languagesFor(voice.engine).catch(() => undefined);
    if (spoken?.own !== undefined) languages = [spoken.own];
    else if (spoken !== undefined && spoken.speaks !== 'any') languages = [...spoken.speaks];
  }
  const engineId = engineIdOf(voice.engine);
  return {
    name: voice.id,
    description: voice.name,
    attribution: attributionOf(engines.get(engineId) ?? engines.get(voice.engine.engine), engineId),
    installed: true,
    version: null,
    languages: uniqueLanguages(languages.length > 0 ? languages : ['en']),
    speakers: null,
  };
}

/** The catalogue engine of a binding: a remote endpoint's name, a neural model's folder, else the provider. */
export function engineIdOf(binding: Voice['engine']): string {
  if (binding.engine === 'remote') return binding.endpoint;
  if (binding.engine === 'neural') return binding.model;
  return binding.engine;
}

/** Every ready voice of the account, page by page (the list is bounded by ACCOUNT_MAX_VOICES). */
export async function allAccountVoices(voices: VoiceService, accountId: string): Promise<Voice[]> {
  const out: Voice[] = [];
  for (let offset = 0; ; offset += 50) {
    const page = await voices.list(accountId, { limit: 50, offset });
    out.push(...page.items);
    if (page.items.length < 50 || out.length >= page.total) return out;
  }
}

/** The `info` event's data: this service as one TTS program with its voices. */
export async function describeService(
  synthesis: EngineRegistry,
  voices: VoiceService,
  accountId: string,
  version: string,
): Promise<Record<string, unknown>> {
  const engines = new Map((await synthesis.engines()).map((e) => [e.id, e]));
  // Home Assistant speaks a language with the first voice listed for it: the service's default
  // English voice comes first, as it does for the API.
  const english = (await synthesis.defaultBinding('en').catch(() => undefined)) as
    Record<string, unknown> | undefined;
  const isDefault = (v: EngineVoice): boolean =>
    english !== undefined && v.engine === english.engine && v.id === english.voice;
  const catalogue = (await synthesis.voices()).sort((a, b) => Number(isDefault(b)) - Number(isDefault(a)));
  const own = (await allAccountVoices(voices, accountId)).filter((v) => v.status !== 'creating');
  const program: TtsProgramInfo = {
    name: 'voicegen',
    description: 'voicegen: self-hosted speech synthesis (Flite, espeak-ng, neural models, remote engines)',
    attribution: { name: 'voicegen', url: '' },
    installed: true,
    version,
    supports_synthesize_streaming: true,
    voices: [
      ...(await Promise.all(own.map((v) => accountVoice(v, engines, synthesis)))),
      ...catalogue.map((v) => engineVoice(v, engines.get(v.engine))),
    ],
  };
  return { asr: [], tts: [program], handle: [], intent: [], wake: [], mic: [], snd: [] };
}
