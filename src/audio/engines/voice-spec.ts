/**
 * Voice specs, `<engine>:<voice>[+<choice>]` (e.g. `espeak:en-us+f3`, `studio:nova`): a voice of the
 * catalogue in one string, for the CLI and the operator import. The binding is the engine's own
 * fields with the voice and, after `+`, a value of the engine's first setting that lists its values
 * (espeak-ng's variant). Client and server read specs the same way, from the catalogue's engines.
 */
import type { EngineInfo } from './provider.js';

/** A spec's parts; undefined when `spec` is not one (a voice id has no colon). */
export function parseVoiceSpec(spec: string): { engine: string; voice: string; choice?: string } | undefined {
  const match = /^([A-Za-z0-9_-]{1,64}):([^+]+)(?:\+(.+))?$/.exec(spec);
  if (match === null) return undefined;
  const [, engine = '', voice = '', choice] = match;
  return { engine, voice, ...(choice !== undefined && { choice }) };
}

/**
 * The binding `spec` stands for among `engines` (still to be validated by its provider); throws
 * `fail(message)` for what is not a spec, an engine that is not there or a choice it does not take.
 */
export function bindingFromSpec(
  spec: string,
  engines: readonly Pick<EngineInfo, 'id' | 'available' | 'binding' | 'options'>[],
  fail: (message: string) => Error,
): Record<string, unknown> {
  const parsed = parseVoiceSpec(spec);
  if (parsed === undefined) throw fail(`"${spec}" is not a voice spec such as espeak:en-us+f3`);
  const engine = engines.find((e) => e.id === parsed.engine && e.available);
  if (engine === undefined) {
    const known = engines.filter((e) => e.available).map((e) => e.id);
    throw fail(`voice "${spec}": no engine "${parsed.engine}" (engines: ${known.join(', ')})`);
  }
  const choice = engine.options.find((o) => o.values !== undefined);
  if (parsed.choice !== undefined && choice === undefined)
    throw fail(`voice "${spec}": engine ${engine.id} takes nothing after +`);
  return {
    ...engine.binding,
    voice: parsed.voice,
    ...(parsed.choice !== undefined && choice !== undefined && { [choice.field]: parsed.choice }),
  };
}
