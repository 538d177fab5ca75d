/**
 * Which voice record a `/v1/audio/speech` request speaks with. `voice` is tried as, in order:
 *  1. a voice id of the account;
 *  2. an engine voice spec, `<engine>:<voice>[+<choice>]` (e.g. `espeak:en-us+f3`);
 *  3. when `model` names an engine: a voice of that engine (model `espeak`, voice `en-us`);
 *  4. one of OpenAI's voice names (alloy, …), mapped to a voice spec (stock-voices.ts);
 *  5. the name of exactly one of the account's voices (several → 400 naming their ids).
 * Tasks speak with voice records, so a spec (2–4) speaks with the account's voice of that name,
 * created on first use with the spec's engine binding (as the operator CLI's `synth` does).
 */
import { parseVoiceSpec } from '../audio/engines/voice-spec.js';
import type { EngineRegistry } from '../audio/engines/engine-registry.js';
import { AppError, errors, isAppError } from '../errors/app-error.js';
import type { VoiceService } from '../voices/voice-service.js';

export interface VoiceResolverDeps {
  voices: Pick<VoiceService, 'get' | 'named' | 'forSpec'>;
  engines: Pick<EngineRegistry, 'engines' | 'bindingForSpec' | 'validateBinding'>;
  /** OpenAI voice name → voice spec. */
  stockVoices: ReadonlyMap<string, string>;
}

export class VoiceResolver {
  constructor(private readonly deps: VoiceResolverDeps) {}

  /** The id of the voice record `voice` stands for (see the module comment). */
  async resolve(accountId: string, voice: string, model: string): Promise<string> {
    const byId = await this.deps.voices.get(accountId, voice).catch((err: unknown) => {
      if (isAppError(err) && err.code === 'VOICE_NOT_FOUND') return undefined;
      throw err;
    });
    if (byId !== undefined) return byId.id;
    if (parseVoiceSpec(voice) !== undefined) return this.specVoice(accountId, voice);
    const engineVoice = await this.modelEngineVoice(model, voice);
    if (engineVoice !== undefined) return this.specVoice(accountId, engineVoice);
    const stock = this.deps.stockVoices.get(voice.toLowerCase());
    if (stock !== undefined) return this.specVoice(accountId, stock);
    const named = await this.deps.voices.named(accountId, voice);
    if (named.length === 1 && named[0] !== undefined) return named[0].id;
    if (named.length > 1)
      throw errors.invalidValue(
        `voice "${voice}" names ${named.length} of your voices (${named.map((v) => v.id).join(', ')}); give one of their ids`,
      );
    throw new AppError(
      'VOICE_NOT_FOUND',
      `voice "${voice}" not found: give a voice id, an engine voice such as espeak:en-us, one of OpenAI's voice names such as alloy, or the name of one of your voices (GET /v1/audio/voices lists them)`,
    );
  }

  /** `<model>:<voice>` when `model` is an available engine that speaks `voice`. */
  private async modelEngineVoice(model: string, voice: string): Promise<string | undefined> {
    const engine = (await this.deps.engines.engines()).find((e) => e.id === model && e.available);
    if (engine === undefined) return undefined;
    const spec = `${engine.id}:${voice}`;
    try {
      await this.deps.engines.validateBinding(await this.deps.engines.bindingForSpec(spec));
      return spec;
    } catch (err) {
      if (isAppError(err) && err.status === 400) return undefined;
      throw err;
    }
  }

  private specVoice(accountId: string, spec: string): Promise<string> {
    return this.deps.voices.forSpec(accountId, spec);
  }
}
