/**
 * EngineCatalog over the configured engines: espeak-ng voice names known to the embedded engine
 * and the names of operator-configured remote endpoints.
 */
import { AppError } from '../errors/app-error.js';
import type { EngineCatalog, VoiceBinding } from './voice-binding.js';

/** espeak-ng voice names for language tags whose default voice is not the tag itself. */
const DEFAULT_ESPEAK_VOICE: Record<string, string> = {
  en: 'en-us',
  zh: 'cmn',
  'zh-cn': 'cmn',
  'zh-tw': 'cmn',
  pt: 'pt-br',
};

/** What the catalog needs of the embedded engine's voice list (see listEspeakVoices). */
export interface EspeakVoiceList {
  voices: readonly { id: string; languages: readonly { code: string }[] }[];
  variants: readonly string[];
}

export function createEngineCatalog(options: {
  espeak: EspeakVoiceList;
  remoteEndpoints: readonly string[];
}): EngineCatalog {
  const remote = new Set(options.remoteEndpoints);
  // Voices may be named by identifier ('gmw/en-US') or by any language code they answer to.
  const espeakVoices = new Set(
    options.espeak.voices.flatMap((v) => [
      v.id.toLowerCase(),
      ...v.languages.map((l) => l.code.toLowerCase()),
    ]),
  );
  const variants = new Set(options.espeak.variants);
  return {
    validateBinding(binding: VoiceBinding): void {
      if (binding.engine === 'espeak') {
        if (!espeakVoices.has(binding.voice.toLowerCase())) {
          throw new AppError(
            'VALIDATION_INVALID_VALUE',
            `engine.voice: unknown espeak-ng voice "${binding.voice}"`,
          );
        }
        if (binding.variant !== undefined && !variants.has(binding.variant)) {
          throw new AppError(
            'VALIDATION_INVALID_VALUE',
            `engine.variant: unknown espeak-ng variant "${binding.variant}"`,
          );
        }
      } else if (!remote.has(binding.endpoint)) {
        throw new AppError(
          'VALIDATION_INVALID_VALUE',
          `engine.endpoint: no remote engine named "${binding.endpoint}" is configured`,
        );
      }
    },
    defaultBinding(language: string): VoiceBinding {
      const tag = language.toLowerCase().replace('_', '-');
      const candidates = [
        DEFAULT_ESPEAK_VOICE[tag],
        tag,
        DEFAULT_ESPEAK_VOICE[tag.split('-')[0] ?? ''],
        tag.split('-')[0],
      ];
      const voice = candidates.find((v): v is string => v !== undefined && espeakVoices.has(v));
      if (voice === undefined) {
        throw new AppError(
          'VALIDATION_INVALID_VALUE',
          `language: the embedded engine has no voice for "${language}"`,
        );
      }
      return { engine: 'espeak', voice };
    },
  };
}
