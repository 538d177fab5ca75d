/**
 * Saved splitter configurations: create with full validation, list, get, diff-update (re-validated;
 * an invalid result leaves the stored row untouched), delete, and loading a saved config for
 * generation (corrupt stored JSON → TTS_SPLITTER_METADATA_INVALID). Create and update also enforce
 * SPLITTER_CONFIG_BOUNDS and the account's storage limits; loading does not, so a row saved before
 * the bounds stays readable.
 */
import { randomUUID } from 'node:crypto';
import { pageSchema } from '../common/paging.js';
import { storageLimitExceeded, UNLIMITED_STORAGE, type StorageLimits } from '../storage/storage-limits.js';
import { AppError, errors } from '../errors/app-error.js';
import { CONTROL_CHARACTER_MESSAGE, controlCharacterIndex, parseInput } from '../errors/validation.js';
import type { SplitterRow } from '../storage/schema.js';
import { mergeConfigDiff } from './merge-config.js';
import { checkSplitterConfigBounds, validateSplitterConfig, type SplitterConfig } from './splitter-config.js';
import type { SplitterStore, SplitterUsage } from './splitter-store.js';

/** The public representation of a splitter configuration. */
export interface Splitter {
  id: string;
  name: string;
  config: SplitterConfig;
  createdAt: string;
  updatedAt: string;
}

/**
 * Bytes of configs one list page holds at most: a page stops before the config that would pass it
 * (its first item always fits), so a page costs the same however large the saved configs are.
 */
export const LIST_PAGE_MAX_BYTES = 1024 * 1024;

export class SplitterService {
  constructor(
    private readonly store: SplitterStore,
    private readonly maxNameLength: number,
    private readonly limits: StorageLimits = UNLIMITED_STORAGE,
  ) {}

  /** Validates and saves a configuration. Never produces TTS_SPLITTER_METADATA_INVALID. */
  async create(accountId: string, body: unknown): Promise<Splitter> {
    const input = asObject(body);
    const name = this.validateName(input.name);
    if (input.config === undefined) throw errors.missingField('config');
    const config = validateSplitterConfig(input.config);
    checkSplitterConfigBounds(config);
    const now = new Date();
    const row: SplitterRow = {
      id: randomUUID(),
      account_id: accountId,
      name,
      config: JSON.stringify(config),
      created_at: now,
      updated_at: now,
    };
    const refused = await this.store.insert(row, this.limits);
    if (refused !== undefined) throw storageLimitExceeded(refused);
    return { id: row.id, name, config, createdAt: now.toISOString(), updatedAt: now.toISOString() };
  }

  /** The account's saved configs and their bytes together (account info). */
  async usage(accountId: string): Promise<SplitterUsage> {
    return this.store.usage(accountId);
  }

  async get(accountId: string, id: string): Promise<Splitter> {
    return toSplitter(await this.requireRow(accountId, id));
  }

  /** The validated configuration of a saved splitter, for generation with `splitterId`. */
  async configFor(accountId: string, id: string): Promise<SplitterConfig> {
    return toSplitter(await this.requireRow(accountId, id)).config;
  }

  /**
   * A page of at most `limit` splitters and LIST_PAGE_MAX_BYTES of configs, newest first; the next
   * page starts at `offset + items.length` while that is below `total`.
   */
  async list(
    accountId: string,
    query: { limit?: unknown; offset?: unknown },
  ): Promise<{ items: Splitter[]; total: number }> {
    const { limit, offset } = parseInput(pageSchema, query);
    const { rows, total } = await this.store.listSummaries(accountId, limit, offset);
    const page: typeof rows = [];
    let bytes = 0;
    for (const row of rows) {
      bytes += row.bytes;
      if (page.length > 0 && bytes > LIST_PAGE_MAX_BYTES) break;
      page.push(row);
    }
    const full = new Map(
      (
        await this.store.getMany(
          accountId,
          page.map((row) => row.id),
        )
      ).map((row) => [row.id, row]),
    );
    // A row deleted between the two reads is left out of the page.
    const items = page.flatMap((row) => {
      const stored = full.get(row.id);
      return stored === undefined ? [] : [toSplitter(stored)];
    });
    return { items, total };
  }

  /** Diff update: objects deep-merged, arrays replaced, null deletes; the result is re-validated. */
  async update(accountId: string, id: string, body: unknown): Promise<Splitter> {
    const input = asObject(body);
    const row = await this.requireRow(accountId, id);
    const current = toSplitter(row);
    const name = input.name === undefined ? current.name : this.validateName(input.name);
    let config = current.config;
    if (input.config !== undefined && input.config !== null) {
      if (typeof input.config !== 'object' || Array.isArray(input.config)) {
        throw new AppError('TTS_SPLITTER_INVALID', 'config must be an object');
      }
      config = validateSplitterConfig(
        mergeConfigDiff(current.config, input.config as Record<string, unknown>),
      );
      checkSplitterConfigBounds(config);
    }
    const updatedAt = new Date();
    const outcome = await this.store.update(
      accountId,
      id,
      { name: row.name, config: row.config, updated_at: row.updated_at },
      { name, config: JSON.stringify(config), updated_at: updatedAt },
      this.limits,
    );
    if (outcome === 'conflict')
      throw errors.conflict('the splitter was changed concurrently; retry the update');
    if (outcome !== 'changed') throw storageLimitExceeded(outcome);
    return { id, name, config, createdAt: current.createdAt, updatedAt: updatedAt.toISOString() };
  }

  async delete(accountId: string, id: string): Promise<void> {
    if (!(await this.store.delete(accountId, id)))
      throw errors.notFound('SPLITTER_NOT_FOUND', `splitter ${id}`);
  }

  private validateName(value: unknown): string {
    if (value === undefined || value === null) throw errors.missingField('name');
    if (typeof value !== 'string') throw errors.invalidValue('name must be a string');
    const name = value.trim();
    if (name === '') throw errors.missingField('name');
    if (name.length > this.maxNameLength) throw errors.tooLong('name', this.maxNameLength);
    if (controlCharacterIndex(name) !== -1) throw errors.invalidValue(`name ${CONTROL_CHARACTER_MESSAGE}`);
    return name;
  }

  private async requireRow(accountId: string, id: string): Promise<SplitterRow> {
    const row = await this.store.get(accountId, id);
    if (!row) throw errors.notFound('SPLITTER_NOT_FOUND', `splitter ${id}`);
    return row;
  }
}

function asObject(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new AppError('VALIDATION_INVALID_FORMAT', 'request body must be a JSON object');
  }
  return body as Record<string, unknown>;
}

function toSplitter(row: SplitterRow): Splitter {
  let parsed: unknown;
  try {
    parsed = JSON.parse(row.config);
  } catch (cause) {
    throw new AppError(
      'TTS_SPLITTER_METADATA_INVALID',
      `stored configuration of splitter ${row.id} is corrupt`,
      { cause },
    );
  }
  let config: SplitterConfig;
  try {
    config = validateSplitterConfig(parsed);
  } catch (cause) {
    throw new AppError(
      'TTS_SPLITTER_METADATA_INVALID',
      `stored configuration of splitter ${row.id} is invalid`,
      { cause },
    );
  }
  return {
    id: row.id,
    name: row.name,
    config,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}
