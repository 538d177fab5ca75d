/**
 * Operator operations behind the /admin API and the CLI: accounts, API keys, voice imports and the
 * neural model folders of MODELS_DIR.
 * Accounts are named by id or name; results are plain JSON records, the same over HTTP and when
 * the CLI opens the database itself, so both paths print the same thing.
 */
import { z } from 'zod';
import type { Account, AccountService, ApiKeyInfo } from '../accounts/account-service.js';
import { errors } from '../errors/app-error.js';
import { parseInput, storableString } from '../errors/validation.js';
import type { VoiceStatus, VoiceVersion } from '../storage/schema.js';
import { voiceBindingSchema } from '../audio/engines/engine-registry.js';
import type { AddModelRequest, ModelOperations, ModelRecord } from '../audio/engines/neural-install.js';
import { languageSchema, type Voice, type VoiceService } from '../voices/voice-service.js';

/** An account as operators see it. */
export interface AccountRecord {
  id: string;
  name: string;
  createdAt: string;
}

/** An API key as listings show it: the prefix only, never the key. */
export interface ApiKeyRecord {
  id: string;
  accountId: string;
  prefix: string;
  createdAt: string;
  revokedAt: string | null;
}

/** A newly issued key: the only time the whole key is returned. */
export interface IssuedApiKey extends ApiKeyRecord {
  key: string;
}

/** Body of account creation: `{name}` (trimmed, 1–100 characters, unique). */
export const createAccountRequestSchema = z.object({ name: z.string() });

/** Body of account creation. */
export type CreateAccountRequest = z.input<typeof createAccountRequestSchema>;

/** Body of a voice import: the fields of the CLI's `voices import`. */
export const voiceImportRequestSchema = z.object({
  name: storableString().trim().max(100),
  /** v1.0–v4.0; anything else is VOICE_MODEL_VERSION_INVALID (checked by the voice service). */
  version: z.string(),
  language: languageSchema.optional(),
  description: storableString().max(1000).optional(),
  /** A voice of the voice catalogue, `<engine>:<voice>[+<variant>]`; the language's default voice when absent. */
  voice: storableString().min(3).max(300).optional(),
  /** Shorthand of `voice: "espeak:<espeakVoice>"`, kept for existing scripts. */
  espeakVoice: storableString().min(1).max(32).optional(),
  /** The whole engine binding (as `voices export` writes it); takes precedence over voice and espeakVoice. */
  engine: voiceBindingSchema.optional(),
  /** The voice has professional-cloning (LoRA) artifacts. */
  lora: z.boolean().optional(),
  status: z.enum(['ready', 'creating'] as const satisfies readonly VoiceStatus[]).optional(),
});

/** Body of a voice import. */
export type VoiceImportRequest = z.input<typeof voiceImportRequestSchema>;

/** What an operator can do; implemented by AdminService (database) and the CLI's HTTP client. */
export interface AdminOperations {
  createAccount(request: CreateAccountRequest): Promise<AccountRecord>;
  listAccounts(): Promise<AccountRecord[]>;
  /** Issues a key for the account (id or name). */
  createKey(account: string): Promise<IssuedApiKey>;
  listKeys(account: string): Promise<ApiKeyRecord[]>;
  /** Revokes an active key by its id; it stops authenticating at once. */
  revokeKey(keyId: string): Promise<void>;
  importVoice(account: string, request: VoiceImportRequest): Promise<Voice>;
  /** The account's voices as import requests (in the list's order): what `voices import --from` takes back. */
  exportVoices(account: string): Promise<VoiceImportRequest[]>;
  /** The neural model folders of MODELS_DIR, unavailable ones with the reason. */
  listModels(): Promise<ModelRecord[]>;
  /** Unpacks a model archive (URL or file of the machine that runs it) into MODELS_DIR. */
  addModel(request: AddModelRequest): Promise<ModelRecord>;
  /** Removes a model folder of MODELS_DIR. */
  removeModel(name: string): Promise<void>;
}

/** Body of `POST /admin/models`. */
export const addModelRequestSchema = z.object({
  source: z
    .string()
    .min(1)
    .max(4096)
    .describe('An http(s) URL or a file path of a .tar.bz2/.tar.gz model archive'),
  sha256: z.string().optional().describe("The archive's expected SHA-256 (hex)"),
  name: z
    .string()
    .optional()
    .describe("The model's folder name (its engine id); default: the archive's folder"),
});

/** A voice as the import request that recreates it (another install, another account). */
export function voiceExport(voice: Voice): VoiceImportRequest {
  return {
    name: voice.name,
    version: voice.version,
    language: voice.language,
    ...(voice.metadata.description !== '' && { description: voice.metadata.description }),
    engine: voice.engine,
    lora: voice.metadata.withLora,
    status: voice.status === 'creating' ? 'creating' : 'ready',
  };
}

function accountRecord(account: Account): AccountRecord {
  return { id: account.id, name: account.name, createdAt: account.createdAt.toISOString() };
}

function keyRecord(info: ApiKeyInfo): ApiKeyRecord {
  return {
    id: info.id,
    accountId: info.accountId,
    prefix: info.prefix,
    createdAt: info.createdAt.toISOString(),
    revokedAt: info.revokedAt?.toISOString() ?? null,
  };
}

/** The operator operations on the domain services; request bodies are validated here. */
export class AdminService implements AdminOperations {
  /** `voices` is asked for only by imports, so the CLI loads the engine catalogue only then. */
  constructor(
    private readonly accounts: AccountService,
    private readonly voices: () => Promise<VoiceService>,
    private readonly models: ModelOperations,
  ) {}

  listModels(): Promise<ModelRecord[]> {
    return this.models.list();
  }

  async addModel(body: unknown): Promise<ModelRecord> {
    const request = parseInput(addModelRequestSchema, body, 'VALIDATION_INVALID_VALUE', 'model');
    return this.models.add(request);
  }

  removeModel(name: string): Promise<void> {
    return this.models.remove(name);
  }

  async createAccount(body: unknown): Promise<AccountRecord> {
    const { name } = parseInput(createAccountRequestSchema, body);
    return accountRecord(await this.accounts.createAccount(name));
  }

  async listAccounts(): Promise<AccountRecord[]> {
    return (await this.accounts.listAccounts()).map(accountRecord);
  }

  async createKey(account: string): Promise<IssuedApiKey> {
    const { id } = await this.accounts.resolveAccount(account);
    const { key, info } = await this.accounts.createKey(id);
    return { key, ...keyRecord(info) };
  }

  async listKeys(account: string): Promise<ApiKeyRecord[]> {
    const { id } = await this.accounts.resolveAccount(account);
    return (await this.accounts.listKeys(id)).map(keyRecord);
  }

  async revokeKey(keyId: string): Promise<void> {
    await this.accounts.revokeKey(keyId);
  }

  async importVoice(account: string, body: unknown): Promise<Voice> {
    const input = parseInput(voiceImportRequestSchema, body);
    if (input.name === '') throw errors.missingField('name');
    const { id } = await this.accounts.resolveAccount(account);
    const voices = await this.voices();
    return voices.importVoice(id, {
      name: input.name,
      version: input.version as VoiceVersion,
      language: input.language,
      description: input.description,
      engine: input.engine,
      voiceSpec: input.voice ?? (input.espeakVoice === undefined ? undefined : `espeak:${input.espeakVoice}`),
      withLora: input.lora ?? false,
      status: input.status ?? 'ready',
    });
  }

  async exportVoices(account: string): Promise<VoiceImportRequest[]> {
    const { id } = await this.accounts.resolveAccount(account);
    const voices = await this.voices();
    const all: Voice[] = [];
    for (let offset = 0; ; offset += EXPORT_PAGE) {
      const { items, total } = await voices.list(id, { limit: EXPORT_PAGE, offset });
      all.push(...items);
      if (items.length === 0 || offset + items.length >= total) break;
    }
    return all.map(voiceExport);
  }
}

/** Voices read per page by an export (the list's largest page). */
const EXPORT_PAGE = 50;
