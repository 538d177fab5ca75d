/**
 * EngineCatalog over the configured engines: espeak-ng voice names known to the embedded engine
 * and the names of operator-configured remote endpoints.
 */
import { AppError } from '../errors/app-error.js';
import type { EngineCatalog, VoiceBinding } from './voice-binding.js';

/** espeak-ng voice names for language tags whose default voice is not the tag itself. */
const DEFAULT_ESPEAK_VOICE: Record<string, string> = { en: 'en-us', zh: 'cmn', 'zh-cn': 'cmn', 'zh-tw': 'cmn', pt: 'pt-br' };

export function createEngineCatalog(options: {
  espeakVoices: ReadonlySet<string>;
  remoteEndpoints: readonly string[];
}): EngineCatalog {
  const remote = new Set(options.remoteEndpoints);
  return {
    validateBinding(binding: VoiceBinding): void {
      if (binding.engine === 'espeak') {
        if (!options.espeakVoices.has(binding.voice.toLowerCase())) {
          throw new AppError('VALIDATION_INVALID_VALUE', `engine.voice: unknown espeak-ng voice "${binding.voice}"`);
        }
      } else if (!remote.has(binding.endpoint)) {
        throw new AppError('VALIDATION_INVALID_VALUE', `engine.endpoint: no remote engine named "${binding.endpoint}" is configured`);
      }
    },
    defaultBinding(language: string): VoiceBinding {
      const tag = language.toLowerCase().replace('_', '-');
      const candidates = [DEFAULT_ESPEAK_VOICE[tag], tag, DEFAULT_ESPEAK_VOICE[tag.split('-')[0] ?? ''], tag.split('-')[0]];
      const voice = candidates.find((v): v is string => v !== undefined && options.espeakVoices.has(v));
      if (voice === undefined) {
        throw new AppError('VALIDATION_INVALID_VALUE', `language: the embedded engine has no voice for "${language}"`);
      }
      return { engine: 'espeak', voice };
    },
  };
}
