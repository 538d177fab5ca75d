/**
 * Saved splitter configurations (spec 4.3, decisions §7): create with full validation, list, get,
 * diff-update (re-validated; an invalid result leaves the stored row untouched), delete, and
 * loading a saved config for generation (corrupt stored JSON → TTS_SPLITTER_METADATA_INVALID).
 * Create and update also enforce SPLITTER_CONFIG_BOUNDS (issue 11 finding 1); loading does not, so
 * a row saved before the bounds stays readable.
 */
import { randomUUID } from 'node:crypto';
import { pageSchema } from '../common/paging.js';
import { AppError, errors } from '../errors/app-error.js';
import { CONTROL_CHARACTER_MESSAGE, controlCharacterIndex, parseInput } from '../errors/validation.js';
import type { SplitterRow } from '../storage/schema.js';
import { mergeConfigDiff } from './merge-config.js';
import { checkSplitterConfigBounds, validateSplitterConfig, type SplitterConfig } from './splitter-config.js';
import type { SplitterStore } from './splitter-store.js';

/** The public representation of a splitter configuration (spec 2.3). */
export interface Splitter {
  id: string;
  name: string;
  config: SplitterConfig;
  createdAt: string;
  updatedAt: string;
}

export class SplitterService {
  constructor(
    private readonly store: SplitterStore,
    private readonly maxNameLength: number,
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
    await this.store.insert(row);
    return { id: row.id, name, config, createdAt: now.toISOString(), updatedAt: now.toISOString() };
  }

  async get(accountId: string, id: string): Promise<Splitter> {
    return toSplitter(await this.requireRow(accountId, id));
  }

  /** The validated configuration of a saved splitter, for generation with `splitterId`. */
  async configFor(accountId: string, id: string): Promise<SplitterConfig> {
    return toSplitter(await this.requireRow(accountId, id)).config;
  }

  async list(
    accountId: string,
    query: { limit?: unknown; offset?: unknown },
  ): Promise<{ items: Splitter[]; total: number }> {
    const { limit, offset } = parseInput(pageSchema, query);
    const { rows, total } = await this.store.list(accountId, limit, offset);
    return { items: rows.map(toSplitter), total };
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
    const changed = await this.store.update(accountId, id, row.config, {
      name,
      config: JSON.stringify(config),
      updated_at: updatedAt,
    });
    if (!changed) throw errors.conflict('the splitter was changed concurrently; retry the update');
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
