/**
 * The embedded espeak-ng engine as a provider: its bindings, its 140-odd voices and 100-odd
 * variants (read from the wasm build itself, so every variant it has is accepted), and the engine.
 */
import type { BatchSynthesisHost } from '../batch-process.js';
import { z } from 'zod';
import {
  createEspeakEngine,
  espeakVoiceLanguage,
  listEspeakVoices,
  validateEspeakBinding,
  type EspeakEngine,
} from './espeak.engine.js';
import type { EspeakCatalogue } from './espeak-protocol.js';
import type { EngineInfo, EngineProvider, EngineVoice, ProviderInstance } from './provider.js';

export const espeakBindingSchema = z.object({
  engine: z.literal('espeak'),
  voice: z.string().regex(/^[A-Za-z0-9_/-]{1,32}$/, 'must be an espeak-ng voice name such as en-us'),
  // Variant names are file names, some with spaces ('Mr serious'); '+' would end the voice spec.
  variant: z
    .string()
    .regex(/^[A-Za-z0-9_][A-Za-z0-9 _.-]{0,63}$/, 'must be an espeak-ng variant such as f3')
    .optional(),
  pitch: z.number().int().min(0).max(99).optional(),
});

export type EspeakBinding = z.infer<typeof espeakBindingSchema>;

/** espeak-ng's output rate. */
const ESPEAK_SAMPLE_RATE = 22_050;

const QUALITY =
  'formant synthesis: robotic but clear at any rate; first audio about 15 ms into a sentence, far faster than real time';

/** espeak-ng voice names for language tags whose default voice is not the tag itself. */
const DEFAULT_VOICE: Readonly<Record<string, string>> = {
  en: 'en-us',
  zh: 'cmn',
  'zh-cn': 'cmn',
  'zh-tw': 'cmn',
  pt: 'pt-br',
};

/** The voice for a new voice of `language`: the tag's default, the tag, then its primary subtag's. */
function defaultVoice(language: string, catalogue: EspeakCatalogue): string | undefined {
  const known = new Set(
    catalogue.voices.flatMap((v) => [v.id.toLowerCase(), ...v.languages.map((l) => l.code.toLowerCase())]),
  );
  const tag = language.toLowerCase().replace('_', '-');
  const primary = tag.split('-')[0] ?? '';
  return [DEFAULT_VOICE[tag], tag, DEFAULT_VOICE[primary], primary].find(
    (v): v is string => v !== undefined && known.has(v),
  );
}

function voicesOf(catalogue: EspeakCatalogue): EngineVoice[] {
  return catalogue.voices.map((v) => ({
    id: v.id,
    name: v.name,
    engine: 'espeak',
    languages: [...v.languages].sort((a, b) => a.priority - b.priority).map((l) => l.code),
    sampleRate: ESPEAK_SAMPLE_RATE,
    quality: QUALITY,
    binding: { engine: 'espeak', voice: v.id },
  }));
}

function infoOf(catalogue: EspeakCatalogue): EngineInfo {
  return {
    id: 'espeak',
    provider: 'espeak',
    available: true,
    description: 'espeak-ng (built in, WebAssembly)',
    marks: ['sentence', 'word'],
    openVoices: false,
    binding: { engine: 'espeak' },
    options: [
      {
        field: 'variant',
        description: 'A voice variant: another timbre, pitch range or effect on the same voice',
        values: catalogue.variantInfo.map((v) => ({
          id: v.id,
          name: v.name,
          ...(v.gender !== undefined && { gender: v.gender }),
        })),
      },
      { field: 'pitch', description: 'Base pitch (espeak-ng default 50)', min: 0, max: 99 },
    ],
  };
}

function createInstance(
  threads: number | undefined,
  batchHost: BatchSynthesisHost | undefined,
): ProviderInstance<EspeakBinding> {
  let engine: EspeakEngine | undefined;
  return {
    async engines() {
      try {
        return [infoOf(await listEspeakVoices())];
      } catch (err) {
        const reason = `espeak-ng did not load (${err instanceof Error ? err.message : String(err)})`;
        return [{ ...infoOf({ voices: [], variants: [], variantInfo: [] }), available: false, reason }];
      }
    },
    voices: async () => voicesOf(await listEspeakVoices()),
    async validate(binding) {
      await validateEspeakBinding(binding);
    },
    async defaultBinding(language) {
      const voice = defaultVoice(language, await listEspeakVoices());
      return voice === undefined ? undefined : { engine: 'espeak', voice };
    },
    engineId: () => 'espeak',
    async languages(binding) {
      const catalogue = await listEspeakVoices();
      return {
        engine: 'espeak',
        own: espeakVoiceLanguage(binding, catalogue),
        speaks: [...new Set(catalogue.voices.flatMap((v) => v.languages.map((l) => l.code)))],
      };
    },
    engineFor() {
      engine ??= createEspeakEngine({
        ...(threads !== undefined && { threads }),
        ...(batchHost !== undefined && { batchHost }),
      });
      return engine;
    },
    async close() {
      await engine?.close();
      engine = undefined;
    },
  };
}

export const espeakProvider: EngineProvider<typeof espeakBindingSchema> = {
  id: 'espeak',
  bindingSchema: espeakBindingSchema,
  loudness: 'calibrated',
  create: (settings) => createInstance(settings.synthesisThreads, settings.batchHost),
};
