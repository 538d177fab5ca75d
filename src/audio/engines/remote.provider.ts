/**
 * Operator-configured OpenAI-compatible speech endpoints (REMOTE_ENGINES) as a provider: each
 * endpoint is an engine known by its NAME (a binding never carries a URL, so a voice cannot point
 * the server anywhere). Their voices are whatever the endpoint accepts; those the operator listed
 * for an endpoint appear in the catalogue.
 */
import { z } from 'zod';
import { errors } from '../../errors/app-error.js';
import type { EngineTimeouts, SpeechEngine } from './engine.js';
import { createOpenAiEngine, type RemoteEndpoint } from './openai.engine.js';
import type { EngineInfo, EngineProvider, EngineVoice, ProviderInstance } from './provider.js';

export const remoteBindingSchema = z.object({
  engine: z.literal('remote'),
  endpoint: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must name an operator-configured endpoint'),
  voice: z.string().min(1).max(200),
  model: z.string().min(1).max(200).optional(),
});

export type RemoteBinding = z.infer<typeof remoteBindingSchema>;

const QUALITY = "the remote server's own voice; first audio after its first MP3 bytes arrive";

function infoOf(name: string): EngineInfo {
  return {
    id: name,
    provider: 'remote',
    // Configured endpoints are offered; a call that fails is reported by the call itself.
    available: true,
    description: 'OpenAI-compatible speech endpoint (remote)',
    marks: [],
    openVoices: true,
    binding: { engine: 'remote', endpoint: name },
    options: [{ field: 'model', description: "The endpoint's model (its default when absent)" }],
  };
}

function voicesOf(name: string, endpoint: RemoteEndpoint): EngineVoice[] {
  return (endpoint.voices ?? []).map((v) => ({
    id: v.id,
    name: v.name ?? v.id,
    engine: name,
    languages: v.languages ?? [],
    ...(v.gender !== undefined && { gender: v.gender }),
    quality: QUALITY,
    binding: { engine: 'remote', endpoint: name, voice: v.id },
  }));
}

function createInstance(
  endpoints: Record<string, RemoteEndpoint>,
  timeouts: EngineTimeouts,
): ProviderInstance<RemoteBinding> {
  const engines = new Map<string, SpeechEngine>();
  // Own-property lookup only: a name like "constructor" must not reach Object.prototype.
  const endpointNamed = (name: string): RemoteEndpoint => {
    const endpoint = Object.hasOwn(endpoints, name) ? endpoints[name] : undefined;
    if (endpoint === undefined) throw errors.invalidValue(`unknown remote TTS endpoint "${name}"`);
    return endpoint;
  };
  return {
    engines: async () => Object.keys(endpoints).map(infoOf),
    voices: async () => Object.entries(endpoints).flatMap(([name, e]) => voicesOf(name, e)),
    async validate(binding) {
      endpointNamed(binding.endpoint);
      if (binding.voice.trim() === '') throw errors.invalidValue('remote voice name must not be empty');
    },
    // A remote endpoint is never a new voice's default: the operator's built-in engines are.
    defaultBinding: async () => undefined,
    engineId: (binding) => binding.endpoint,
    // The remote decides what it can speak: never refused, no detection (its own language, when
    // the operator listed the voice, is only informative).
    async languages(binding) {
      const listed = Object.hasOwn(endpoints, binding.endpoint)
        ? endpoints[binding.endpoint]?.voices?.find((v) => v.id === binding.voice)
        : undefined;
      const own = listed?.languages?.[0];
      return { engine: binding.endpoint, speaks: 'any', ...(own !== undefined && { own }) };
    },
    engineFor(binding) {
      let engine = engines.get(binding.endpoint);
      if (engine === undefined) {
        engine = createOpenAiEngine(binding.endpoint, endpointNamed(binding.endpoint), timeouts);
        engines.set(binding.endpoint, engine);
      }
      return engine;
    },
    close: async () => engines.clear(),
  };
}

export const remoteProvider: EngineProvider<typeof remoteBindingSchema> = {
  id: 'remote',
  bindingSchema: remoteBindingSchema,
  // Speaking a calibration text would be a billed call per voice the operator never asked for;
  // remote servers commonly deliver speech near −16 LUFS already.
  loudness: 'as-delivered',
  create: (settings) => createInstance(settings.remoteEndpoints, settings.timeouts),
};
