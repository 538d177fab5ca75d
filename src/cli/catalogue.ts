/**
 * `voicegen engines`: the voice catalogue — engines with their availability, or (`--voices`) their
 * voices filtered by engine and language — from a running server's API (with a key), or from this
 * machine's own engines when no key is given (the engines the service would run with its config).
 */
import type { EngineRegistry, VoiceFilter } from '../audio/engines/engine-registry.js';
import type { EngineInfo, EngineVoice } from '../audio/engines/provider.js';
import type { AppConfig } from '../config/config.js';
import { parseData, type ApiCall } from './api-call.js';

/** Where the catalogue comes from. */
export interface CatalogueSource {
  engines(): Promise<EngineInfo[]>;
  voices(filter: VoiceFilter): Promise<EngineVoice[]>;
  close(): Promise<void>;
}

/** The catalogue of a running server (GET /api/engines, GET /api/engines/voices). */
export function apiCatalogue(call: ApiCall): CatalogueSource {
  return {
    engines: async () => parseData<EngineInfo[]>(await call('GET', '/api/engines'), 'listing engines'),
    async voices(filter) {
      const query = new URLSearchParams(
        Object.entries(filter).filter((entry): entry is [string, string] => entry[1] !== undefined),
      );
      return parseData<EngineVoice[]>(
        await call('GET', `/api/engines/voices?${query.toString()}`),
        'listing voices',
      );
    },
    close: async () => undefined,
  };
}

/** The catalogue of the engines `config` gives this machine (no server, no database). */
export async function localCatalogue(config: AppConfig): Promise<CatalogueSource> {
  const { createEngineRegistry } = await import('../audio/engines/engine-registry.js');
  const registry: EngineRegistry = createEngineRegistry({
    remoteEndpoints: config.remoteEngines,
    synthesisThreads: 1,
    neural: config.neural,
  });
  return {
    engines: () => registry.engines(),
    voices: (filter) => registry.voices(filter),
    close: () => registry.close(),
  };
}

/** One line per engine: id, kind, availability (and why not), what it is. */
export function formatEngines(engines: readonly EngineInfo[]): string {
  return engines
    .map((e) =>
      [e.id, e.provider, e.available ? 'available' : `unavailable: ${e.reason ?? ''}`, e.description].join(
        '\t',
      ),
    )
    .join('\n');
}

/** One line per voice: the spec `synth --voice` takes, its name, languages and gender. */
export function formatVoices(voices: readonly EngineVoice[]): string {
  return [
    ...voices.map((v) => [`${v.engine}:${v.id}`, v.name, v.languages.join(','), v.gender ?? ''].join('\t')),
    `${voices.length} voice(s)`,
  ].join('\n');
}
