/**
 * What `/v1/models`, `/v1/audio/models` and `/v1/audio/voices` list, from the voice catalogue.
 * Public entries (no key): OpenAI's model names and the engines' names as models; the engines'
 * voices as `<engine>:<voice>` and OpenAI's voice names. With a key, the account's own voices too
 * (first): an account's voices are never listed without its key.
 */
import type { EngineRegistry } from '../audio/engines/engine-registry.js';
import type { VoiceService } from '../voices/voice-service.js';
import { OPENAI_MODELS } from './speech-request.js';

export interface ListedVoice {
  id: string;
  name: string;
}

/** The time the models list reports as their creation (OpenAI's lists carry one); fixed, not meaningful. */
const MODELS_CREATED = 1_700_000_000;

/** Voices of an account read per listing at most (the account's voice limit is 1,000 by default). */
const ACCOUNT_VOICES_LISTED = 1000;

export interface CatalogueDeps {
  engines: Pick<EngineRegistry, 'engines' | 'voices'>;
  voices: Pick<VoiceService, 'list'>;
  stockVoices: ReadonlyMap<string, string>;
}

export class OpenAiCatalogue {
  constructor(private readonly deps: CatalogueDeps) {}

  /** Model names `model` accepts: OpenAI's, then every available engine's id. */
  async models(): Promise<string[]> {
    const engines = (await this.deps.engines.engines()).filter((e) => e.available).map((e) => e.id);
    return [...OPENAI_MODELS, ...engines.filter((id) => !(OPENAI_MODELS as readonly string[]).includes(id))];
  }

  /** OpenAI's `GET /v1/models` shape. */
  async modelList(): Promise<{
    object: 'list';
    data: { id: string; object: 'model'; created: number; owned_by: string }[];
  }> {
    const openai = new Set<string>(OPENAI_MODELS);
    return {
      object: 'list',
      data: (await this.models()).map((id) => ({
        id,
        object: 'model',
        created: MODELS_CREATED,
        owned_by: openai.has(id) ? 'voicegen' : `voicegen:${id}`,
      })),
    };
  }

  /** The voices: the account's (with a key), OpenAI's names, then every engine voice. */
  async voiceList(accountId: string | undefined): Promise<ListedVoice[]> {
    const own: ListedVoice[] = [];
    if (accountId !== undefined) {
      for (let offset = 0; offset < ACCOUNT_VOICES_LISTED;) {
        const page = await this.deps.voices.list(accountId, { limit: 50, offset });
        own.push(...page.items.map((v) => ({ id: v.id, name: v.name })));
        offset += page.items.length;
        if (page.items.length === 0 || offset >= page.total) break;
      }
    }
    const stock = [...this.deps.stockVoices].map(([name, spec]) => ({ id: name, name: `${name} (${spec})` }));
    const engine = (await this.deps.engines.voices()).map((v) => ({
      id: `${v.engine}:${v.id}`,
      name: `${v.name} (${v.engine})`,
    }));
    return [...own, ...stock, ...engine];
  }
}
