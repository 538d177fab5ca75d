/**
 * Voice characters: create, list, detail, delete, professional-cloning upload and version
 * migration (to v3.0; migrateV2 follows the same flow one version lower).
 */
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { z } from 'zod';
import { pageSchema } from '../common/paging.js';
import {
  storageLimitExceeded,
  UNLIMITED_STORAGE,
  type StorageLimits,
  type StorageRefusal,
} from '../storage/storage-limits.js';
import { AppError, errors, isAppError } from '../errors/app-error.js';
import { parseInput, storableString } from '../errors/validation.js';
import type { BlobStore } from '../storage/blob-store.js';
import { VOICE_VERSIONS, type VoiceRow, type VoiceStatus, type VoiceVersion } from '../storage/schema.js';
import { voiceBindingSchema, type VoiceBinding } from '../audio/engines/engine-registry.js';
import type { VoiceLanguages } from '../audio/engines/language-decision.js';
import type { ReferenceModel } from '../audio/engines/provider.js';
import { MAX_REFERENCE_TEXT, REFERENCE_VOICE } from '../audio/engines/neural.provider.js';
import { ClipError, clipToWav, decodeClip } from '../audio/reference-clip.js';
import type { VoiceStore, VoiceUsage } from './voice-store.js';

/** What the voice domain needs of the engines (the engine registry knows every engine). */
export interface VoiceEngines {
  /**
   * The model a voice created with a reference clip speaks with (of `engine` when the request names
   * one); VALIDATION_INVALID_VALUE when there is none or `engine` takes no clip.
   */
  referenceModel(engine?: { engine: string; model?: unknown }): Promise<ReferenceModel<VoiceBinding>>;
  /** Resolves when the binding can be spoken; VALIDATION_INVALID_VALUE naming the problem otherwise. */
  validateBinding(binding: VoiceBinding): Promise<void>;
  /** The binding of a new voice of `language` when the request names none. */
  defaultBinding(language: string): Promise<VoiceBinding>;
  /** The binding of a voice spec such as `espeak:en-us+f3` (operator imports). */
  bindingForSpec(spec: string): Promise<VoiceBinding>;
  /** What the binding's engine can speak (the language decision of a new task's pieces). */
  languagesFor(binding: VoiceBinding): Promise<VoiceLanguages>;
}

export { VOICE_VERSIONS };

/** A voice's one prompt: the hosted API's voices carry prompts; ours speak as one (`default`). */
export const DEFAULT_PROMPT = { id: 'default', name: 'default' } as const;

/** The public representation of a voice character, with the hosted API's fields its clients read. */
export interface Voice {
  id: string;
  /** The id to put in `voiceId` (the hosted API's field; the voice's own id here). */
  idForGenerate: string;
  name: string;
  status: VoiceStatus;
  version: VoiceVersion;
  /** Where the voice comes from: the account's own (`user`), as every voice here is. */
  from: 'user';
  language: string;
  engine: VoiceBinding;
  metadata: { description: string; withLora: boolean; prompts: (typeof DEFAULT_PROMPT)[] };
  createdAt: string;
  updatedAt: string;
}

/** A voice as a task record lists it: the voice, or its id when it has been deleted since. */
export type TaskVoice = Voice | { id: string; idForGenerate: string; deleted: true };

/** The language of a voice that speaks whatever its text is in, with its engine's own language as the prior. */
export const AUTO_LANGUAGE = 'auto';

const LANGUAGE_TAG = /^[A-Za-z]{2,3}([_-][A-Za-z0-9]{2,8})*$/;

/** Longest `prompt` accepted (base64 of a 30 s clip of 16-bit mono 48 kHz WAV, with room to spare). */
const MAX_PROMPT_CHARS = 8 * 1024 * 1024;

/** A `data:` URL with base64 content, or bare base64 (whitespace allowed, as line-wrapped base64). */
const DATA_URL = /^data:[^,;]*(?:;[^,;]*)*;base64,([\s\S]*)$/i;
const BASE64 = /^[A-Za-z0-9+/\s]*={0,2}\s*$/;

/** A language tag such as en or en-GB, or `auto` (operator import: anything else is refused). */
export const languageSchema = z
  .string()
  .refine(
    (tag) => tag.toLowerCase() === AUTO_LANGUAGE || LANGUAGE_TAG.test(tag),
    'must be a language tag such as en or en-GB, or auto',
  );

export const createVoiceSchema = z.object({
  // Stored strings refuse NUL and other control characters.
  name: storableString().trim().min(1).max(100),
  engine: voiceBindingSchema.optional(),
  modelVersion: z.string().optional(),
  // The hosted API takes any language and keeps the ones it knows (unknown ones become auto).
  language: storableString().max(64).optional(),
  description: storableString().max(1000).optional(),
  /**
   * The hosted API's cloning field: a recording the voice speaks like, here as a `data:` URL (or
   * bare base64) of WAV or MP3 audio. The voice then speaks with a reference-audio model.
   */
  prompt: z.string().max(MAX_PROMPT_CHARS).optional(),
  /** What is said in `prompt` (ZipVoice models need it; the service transcribes nothing). */
  promptText: storableString().trim().min(1).max(MAX_REFERENCE_TEXT).optional(),
});

/** What an operator import may set beyond a create request (CLI). */
export interface VoiceImport {
  name: string;
  version: VoiceVersion;
  language?: string;
  description?: string;
  engine?: VoiceBinding;
  /** A catalogue voice as `<engine>:<voice>[+<choice>]`, when `engine` is absent. */
  voiceSpec?: string;
  withLora?: boolean;
  status?: VoiceStatus;
}

type MigrationTarget = 'v2.0' | 'v3.0';

export class VoiceService {
  constructor(
    private readonly store: VoiceStore,
    private readonly engines: VoiceEngines,
    private readonly blobs: BlobStore,
    private readonly limits: StorageLimits = UNLIMITED_STORAGE,
  ) {}

  /** Creates a voice from an API request; only v3.0 (default) and v4.0 may be created this way. */
  async create(accountId: string, body: unknown): Promise<Voice> {
    const name = typeof body === 'object' && body !== null ? (body as { name?: unknown }).name : undefined;
    if (name === undefined || name === null || (typeof name === 'string' && name.trim() === '')) {
      throw errors.missingField('name');
    }
    const requested = (body as { engine?: unknown }).engine;
    if (typeof requested === 'object' && requested !== null && 'reference' in requested) {
      throw errors.invalidValue(
        'engine.reference: a voice’s reference clip is given as `prompt` (with `promptText`), not in `engine`',
      );
    }
    const cloning = await this.clones(body as { prompt?: unknown; promptText?: unknown; engine?: unknown });
    // A voice with a clip names a reference-audio model only: it has no speakers to pick from.
    const withVoice =
      cloning &&
      typeof requested === 'object' &&
      requested !== null &&
      (requested as { engine?: unknown }).engine === 'neural' &&
      (requested as { voice?: unknown }).voice === undefined
        ? { ...(body as object), engine: { ...requested, voice: REFERENCE_VOICE } }
        : body;
    const input = parseInput(createVoiceSchema, withVoice);
    if (input.modelVersion !== undefined && input.modelVersion !== 'v3.0' && input.modelVersion !== 'v4.0') {
      throw new AppError('VOICE_MODEL_VERSION_INVALID', 'modelVersion must be v3.0 or v4.0');
    }
    const voice = {
      name: input.name,
      version: input.modelVersion ?? 'v3.0',
      language: await this.knownLanguage(input.language, input.engine !== undefined || cloning),
      description: input.description,
      engine: input.engine,
    } as const;
    if (input.prompt === undefined && input.promptText !== undefined)
      throw errors.invalidValue('promptText: is the transcript of a `prompt` clip, and none was given');
    if (!cloning || input.prompt === undefined) return this.insert(accountId, voice);
    return this.createWithReference(accountId, voice, input.prompt, input.promptText);
  }

  /**
   * Whether a create request clones its `prompt` clip: when it gives the clip's transcript, or a
   * model that takes a clip is there for it (the one its `engine` names, else any installed).
   * Otherwise the clip is ignored, as hosted-API clients that send one to any server expect.
   */
  private async clones(body: { prompt?: unknown; promptText?: unknown; engine?: unknown }): Promise<boolean> {
    if (typeof body.prompt !== 'string' || body.prompt === '') return false;
    if (body.promptText !== undefined) return true;
    const engine = body.engine;
    if (engine !== undefined && (typeof engine !== 'object' || engine === null)) return false;
    return this.engines.referenceModel(engine as { engine: string; model?: unknown } | undefined).then(
      () => true,
      () => false,
    );
  }

  /**
   * A voice that speaks like a reference clip: the clip is decoded, resampled to the model's rate
   * and kept beside the voice (`voices/<id>/`, removed with it); the binding names it.
   */
  private async createWithReference(
    accountId: string,
    voice: Pick<VoiceImport, 'name' | 'version' | 'language' | 'description' | 'engine'>,
    prompt: string,
    promptText: string | undefined,
  ): Promise<Voice> {
    const model = await this.engines.referenceModel(voice.engine);
    if (promptText === undefined && model.transcript) {
      throw new AppError(
        'VALIDATION_MISSING_FIELD',
        'promptText is required with a `prompt`: what is said in the clip (the reference-audio model needs it, and this service transcribes nothing)',
      );
    }
    if (/^https?:/i.test(prompt.trim())) {
      throw errors.invalidValue(
        'prompt: give the clip itself as a data: URL (base64 WAV or MP3); this service does not download URLs',
      );
    }
    const encoded = DATA_URL.exec(prompt)?.[1] ?? prompt;
    if (!BASE64.test(encoded)) {
      throw errors.invalidValue('prompt: must be a data: URL of base64 WAV or MP3 audio, or bare base64');
    }
    let wav: Buffer;
    try {
      wav = await clipToWav(await decodeClip(Buffer.from(encoded, 'base64')), model.sampleRate);
    } catch (err) {
      if (err instanceof ClipError) throw errors.invalidValue(`prompt: the clip ${err.message}`);
      throw err;
    }
    const id = randomUUID();
    const clip = `voices/${id}/reference-${randomUUID()}.wav`;
    await this.blobs.put(clip, wav, 'audio/wav');
    try {
      return await this.insert(accountId, {
        ...voice,
        engine: { ...model.binding, reference: { clip, text: promptText ?? '' } } as VoiceBinding,
        id,
        // Counted against the account's upload limit; beyond it nothing stays (the clip goes below).
        referenceBytes: wav.length,
      });
    } catch (err) {
      await this.blobs.delete(clip).catch(() => undefined);
      throw err;
    }
  }

  /**
   * The language a create request's `language` is kept as: `auto` for `auto` and for what is not a
   * language tag or (when no engine is given, so one is picked for the language) not a language
   * any engine speaks.
   */
  private async knownLanguage(
    language: string | undefined,
    engineGiven: boolean,
  ): Promise<string | undefined> {
    if (language === undefined) return undefined;
    if (language.toLowerCase() === AUTO_LANGUAGE || !LANGUAGE_TAG.test(language)) return AUTO_LANGUAGE;
    if (engineGiven) return language;
    return this.engines.defaultBinding(language).then(
      () => language,
      () => AUTO_LANGUAGE,
    );
  }

  /** Imports a voice of any version, with or without professional-cloning artifacts (operator CLI). */
  async importVoice(accountId: string, voice: VoiceImport): Promise<Voice> {
    if (!VOICE_VERSIONS.includes(voice.version)) {
      throw new AppError(
        'VOICE_MODEL_VERSION_INVALID',
        `version must be one of ${VOICE_VERSIONS.join(', ')}`,
      );
    }
    return this.insert(accountId, voice);
  }

  private async insert(
    accountId: string,
    v: Partial<VoiceImport> &
      Pick<VoiceImport, 'name' | 'version'> & { id?: string; referenceBytes?: number },
  ): Promise<Voice> {
    const language = v.language?.toLowerCase() === AUTO_LANGUAGE ? AUTO_LANGUAGE : (v.language ?? 'en');
    // An auto voice speaks with the English voice of the first engine that has one as its prior.
    const engine =
      v.engine ??
      (v.voiceSpec === undefined
        ? await this.engines.defaultBinding(language === AUTO_LANGUAGE ? 'en' : language)
        : await this.engines.bindingForSpec(v.voiceSpec));
    await this.engines.validateBinding(engine);
    const now = new Date();
    const row: VoiceRow = {
      id: v.id ?? randomUUID(),
      account_id: accountId,
      name: v.name.trim(),
      status: v.status ?? 'ready',
      version: v.version,
      language,
      description: v.description ?? '',
      engine: JSON.stringify(engine),
      with_lora: v.withLora ?? false,
      lora_bytes: '0',
      reference_bytes: String(v.referenceBytes ?? 0),
      lora_key: null,
      created_at: now,
      updated_at: now,
    };
    const refused = await this.store.insert(row, this.limits);
    if (refused !== undefined) throw storageLimitExceeded(refused);
    return toVoice(row);
  }

  async get(accountId: string, id: string): Promise<Voice> {
    return toVoice(await this.requireRow(accountId, id));
  }

  /**
   * The voice objects of `ids` for a task record (the hosted API's `metadata.voices`), in order; a
   * voice deleted since keeps its id, marked `deleted`.
   */
  async forTask(accountId: string, ids: readonly string[]): Promise<TaskVoice[]> {
    const found = new Map((await this.store.getMany(accountId, ids)).map((row) => [row.id, toVoice(row)]));
    return ids.map((id) => found.get(id) ?? { id, idForGenerate: id, deleted: true });
  }

  /**
   * The voices a new task speaks (`ids` in first-use order, no repeats), read once: their engine
   * bindings for synthesis, what their engines can speak, and their voice objects for the task
   * record. VOICE_NOT_FOUND for the first id that is not the account's, VOICE_CREATING for the
   * first voice still being created.
   */
  async forGeneration(
    accountId: string,
    ids: readonly string[],
  ): Promise<{
    bindings: Map<string, VoiceBinding>;
    languages: Map<string, VoiceLanguages>;
    voices: Voice[];
  }> {
    const rows = new Map((await this.store.getMany(accountId, ids)).map((row) => [row.id, row]));
    const bindings = new Map<string, VoiceBinding>();
    const voices: Voice[] = [];
    for (const id of ids) {
      const row = rows.get(id);
      if (!row) throw errors.notFound('VOICE_NOT_FOUND', `voice ${id}`);
      if (row.status === 'creating')
        throw new AppError('VOICE_CREATING', `voice ${id} is still being created`);
      bindings.set(id, parseBinding(row));
      voices.push(toVoice(row));
    }
    const languages = new Map(
      await Promise.all(
        [...bindings].map(async ([id, binding]) => [id, await this.engines.languagesFor(binding)] as const),
      ),
    );
    return { bindings, languages, voices };
  }

  /** The account's voices called exactly `name`, oldest first (names need not be unique). */
  /**
   * The account's voice that an engine voice spec (`espeak:en-us+f3`) speaks with: the oldest ready
   * voice named after the spec, else a new one bound to the spec's engine voice. Tasks speak with
   * voice records, so the routes that take engine voices directly (OpenAI's, Wyoming) go through
   * one record per spec, created on first use.
   */
  async forSpec(accountId: string, spec: string): Promise<string> {
    const ready = (await this.named(accountId, spec)).find((v) => v.status !== 'creating');
    if (ready !== undefined) return ready.id;
    try {
      const engine = await this.engines.bindingForSpec(spec);
      return (await this.create(accountId, { name: spec, engine })).id;
    } catch (err) {
      if (isAppError(err) && err.code === 'VALIDATION_INVALID_VALUE')
        throw new AppError('VALIDATION_INVALID_VALUE', `voice "${spec}": ${err.message}`);
      throw err;
    }
  }

  async named(accountId: string, name: string): Promise<Voice[]> {
    return (await this.store.named(accountId, name)).map(toVoice);
  }

  async list(
    accountId: string,
    query: { limit?: unknown; offset?: unknown },
  ): Promise<{ items: Voice[]; total: number }> {
    const { limit, offset } = parseInput(pageSchema, query);
    const { rows, total } = await this.store.list(accountId, limit, offset);
    return { items: rows.map(toVoice), total };
  }

  async delete(accountId: string, id: string): Promise<void> {
    if (!(await this.store.delete(accountId, id))) throw errors.notFound('VOICE_NOT_FOUND', `voice ${id}`);
    await this.blobs.deletePrefix(`voices/${id}/`);
  }

  /** The account's voices and the bytes of their uploaded samples (account info). */
  async usage(accountId: string): Promise<VoiceUsage> {
    return this.store.usage(accountId);
  }

  /**
   * Stores a professional-cloning sample archive; the voice then has LoRA artifacts. The archive goes
   * to a new key and replaces the voice's previous one only once it is stored whole and counted
   * within the account's upload limit: a refused or broken upload leaves the voice as it was.
   * `declaredBytes` (Content-Length) lets an upload past the limit be refused before it is read.
   */
  async uploadLora(accountId: string, id: string, archive: Readable, declaredBytes?: number): Promise<Voice> {
    const row = await this.requireRow(accountId, id);
    const allowance = await this.uploadAllowance(accountId, row, declaredBytes);
    const key = `voices/${id}/lora-${randomUUID()}.bin`;
    let bytes = 0;
    // Pulled by the store as it writes, so the limit's error reaches the write that is under way.
    const counted = Readable.from(
      (async function* count() {
        for await (const chunk of archive as AsyncIterable<Buffer>) {
          bytes += chunk.length;
          if (bytes > allowance.left) throw storageLimitExceeded({ ...allowance.refusal, adding: bytes });
          yield chunk;
        }
      })(),
      { objectMode: false },
    );
    const stored = await this.blobs.put(key, counted, 'application/octet-stream').then(
      () => this.store.recordUpload(accountId, id, { key, bytes }, this.limits),
      async (err: unknown) => {
        await this.blobs.delete(key).catch(() => undefined);
        throw err;
      },
    );
    if (stored === 'gone' || !('replaced' in stored)) {
      await this.blobs.delete(key).catch(() => undefined);
      if (stored === 'gone') throw errors.notFound('VOICE_NOT_FOUND', `voice ${id}`);
      throw storageLimitExceeded(stored);
    }
    if (stored.replaced !== null) await this.blobs.delete(stored.replaced).catch(() => undefined);
    return this.get(accountId, id);
  }

  /** How many bytes an upload to `row` may hold (its own previous sample is replaced, so it does not count). */
  private async uploadAllowance(
    accountId: string,
    row: VoiceRow,
    declaredBytes: number | undefined,
  ): Promise<{ left: number; refusal: StorageRefusal }> {
    const max = this.limits.uploadBytes;
    if (max === 0) return { left: Infinity, refusal: { limit: 'uploadBytes', max, used: 0, adding: 0 } };
    const used = (await this.store.usage(accountId)).uploadBytes - Number(row.lora_bytes);
    const refusal: StorageRefusal = { limit: 'uploadBytes', max, used, adding: declaredBytes ?? 0 };
    if (declaredBytes !== undefined && used + declaredBytes > max) throw storageLimitExceeded(refusal);
    return { left: Math.max(0, max - used), refusal };
  }

  /**
   * Migrates a voice to v3.0 or v2.0. The conditional update makes concurrent calls
   * safe: exactly one succeeds, the others then see the new version and get NOT_NEEDED.
   */
  async migrate(accountId: string, id: string, target: MigrationTarget): Promise<void> {
    const sources: VoiceVersion[] = target === 'v3.0' ? ['v1.0', 'v2.0'] : ['v1.0'];
    const row = await this.requireRow(accountId, id);
    this.checkMigration(row, target);
    if (await this.store.migrateVersion(accountId, id, sources, target)) return;
    // Lost a race (or the voice changed meanwhile): report against the current state.
    const current = await this.requireRow(accountId, id);
    this.checkMigration(current, target);
    throw new AppError('VOICE_MIGRATE_NOT_NEEDED', `voice is already ${current.version}`);
  }

  private checkMigration(row: VoiceRow, target: MigrationTarget): void {
    if (row.status === 'creating')
      throw new AppError('VOICE_CREATING', `voice ${row.id} is still being created`);
    if (row.version === 'v4.0') {
      throw new AppError(
        'VOICE_MIGRATE_NOT_ALLOWED',
        `migration to ${target} is not allowed: cross model family (v4.0)`,
      );
    }
    if (row.with_lora) {
      throw new AppError(
        'VOICE_MIGRATE_NOT_ALLOWED',
        `migration to ${target} is not allowed: voice has professional-cloning (LoRA) artifacts`,
      );
    }
    const order = VOICE_VERSIONS.indexOf(row.version);
    if (order >= VOICE_VERSIONS.indexOf(target)) {
      throw new AppError('VOICE_MIGRATE_NOT_NEEDED', `voice is already ${row.version}`);
    }
  }

  private async requireRow(accountId: string, id: string): Promise<VoiceRow> {
    const row = await this.store.get(accountId, id);
    if (!row) throw errors.notFound('VOICE_NOT_FOUND', `voice ${id}`);
    return row;
  }
}

function parseBinding(row: VoiceRow): VoiceBinding {
  return voiceBindingSchema.parse(JSON.parse(row.engine));
}

function toVoice(row: VoiceRow): Voice {
  return {
    id: row.id,
    idForGenerate: row.id,
    name: row.name,
    status: row.status,
    version: row.version,
    from: 'user',
    language: row.language,
    engine: parseBinding(row),
    metadata: { description: row.description, withLora: row.with_lora, prompts: [DEFAULT_PROMPT] },
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}
