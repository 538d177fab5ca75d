/**
 * Accounts and their API keys: creation (CLI), authentication of bearer keys, and the optional
 * bootstrap key that makes a fresh install usable at once.
 */
import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { AppError, errors } from '../errors/app-error.js';
import { CONTROL_CHARACTER_MESSAGE, controlCharacterIndex } from '../errors/validation.js';
import type { Database } from '../storage/schema.js';
import { secretsEqual } from '../common/secret-compare.js';
import { TtlCache } from '../common/ttl-cache.js';
import { API_KEY_PATTERN, generateApiKey, hashApiKey, keyPrefix } from './api-keys.js';

export interface Account {
  id: string;
  name: string;
  createdAt: Date;
}

export interface ApiKeyInfo {
  id: string;
  accountId: string;
  prefix: string;
  createdAt: Date;
  revokedAt: Date | null;
}

export const DEFAULT_ACCOUNT_NAME = 'default';

/** Advisory lock id of the first-run account creation (any constant of this service's own). */
const FIRST_RUN_LOCK = 0x766f6963;

/** Keys whose account this node remembers at once (each a few hundred bytes). */
const AUTH_CACHE_ENTRIES = 10_000;

/** Options of `AccountService`. */
export interface AccountServiceOptions {
  /**
   * How long this node remembers the account of a key that authenticated (AUTH_CACHE_MS), so a
   * request needs no database lookup; 0 = always look up. A key revoked through this node stops at
   * once; one revoked elsewhere (another node, the database directly) within this time.
   */
  authCacheMs?: number;
}

/** Accounts and keys over the metadata database, with authenticated keys cached in memory. */
export class AccountService {
  /** Account of each key hash that authenticated lately (never a key that failed). */
  private readonly authenticated: TtlCache<string, Account>;

  constructor(
    private readonly db: Kysely<Database>,
    options: AccountServiceOptions = {},
  ) {
    this.authenticated = new TtlCache(options.authCacheMs ?? 0, AUTH_CACHE_ENTRIES);
  }

  /** Creates an account; names are unique. */
  async createAccount(name: string): Promise<Account> {
    const trimmed = name.trim();
    if (trimmed === '') throw errors.missingField('name');
    if (trimmed.length > 100) throw errors.tooLong('name', 100);
    if (controlCharacterIndex(trimmed) !== -1) throw errors.invalidValue(`name ${CONTROL_CHARACTER_MESSAGE}`);
    const existing = await this.findAccountByName(trimmed);
    if (existing) throw errors.conflict(`account "${trimmed}" already exists`);
    const account = { id: randomUUID(), name: trimmed, created_at: new Date() };
    await this.db.insertInto('accounts').values(account).execute();
    return { id: account.id, name: account.name, createdAt: account.created_at };
  }

  async findAccountByName(name: string): Promise<Account | undefined> {
    const row = await this.db.selectFrom('accounts').selectAll().where('name', '=', name).executeTakeFirst();
    return row && { id: row.id, name: row.name, createdAt: row.created_at };
  }

  async getAccount(id: string): Promise<Account | undefined> {
    const row = await this.db.selectFrom('accounts').selectAll().where('id', '=', id).executeTakeFirst();
    return row && { id: row.id, name: row.name, createdAt: row.created_at };
  }

  /** Resolves an account by id or name (CLI convenience). */
  async resolveAccount(idOrName: string): Promise<Account> {
    const account = (await this.getAccount(idOrName)) ?? (await this.findAccountByName(idOrName));
    if (!account) throw new AppError('RESOURCE_NOT_FOUND', `account "${idOrName}" not found`);
    return account;
  }

  async listAccounts(): Promise<Account[]> {
    const rows = await this.db.selectFrom('accounts').selectAll().orderBy('created_at').execute();
    return rows.map((r) => ({ id: r.id, name: r.name, createdAt: r.created_at }));
  }

  /** Issues a key for the account. The plain key is returned once and never stored. */
  async createKey(
    accountId: string,
    plainKey: string = generateApiKey(),
  ): Promise<{ key: string; info: ApiKeyInfo }> {
    if (!API_KEY_PATTERN.test(plainKey))
      throw errors.invalidValue('API key must be sk- followed by 32 lowercase letters or digits');
    const row = {
      id: randomUUID(),
      account_id: accountId,
      key_hash: hashApiKey(plainKey),
      key_prefix: keyPrefix(plainKey),
      created_at: new Date(),
      revoked_at: null,
    };
    await this.db.insertInto('api_keys').values(row).execute();
    return {
      key: plainKey,
      info: { id: row.id, accountId, prefix: row.key_prefix, createdAt: row.created_at, revokedAt: null },
    };
  }

  async listKeys(accountId: string): Promise<ApiKeyInfo[]> {
    const rows = await this.db
      .selectFrom('api_keys')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('created_at')
      .execute();
    return rows.map((r) => ({
      id: r.id,
      accountId: r.account_id,
      prefix: r.key_prefix,
      createdAt: r.created_at,
      revokedAt: r.revoked_at,
    }));
  }

  /** Revokes a key by its id; revoked keys stop authenticating at once. */
  async revokeKey(keyId: string): Promise<void> {
    const result = await this.db
      .updateTable('api_keys')
      .set({ revoked_at: new Date() })
      .where('id', '=', keyId)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    if (result.numUpdatedRows === 0n)
      throw new AppError('RESOURCE_NOT_FOUND', `active key "${keyId}" not found`);
    // Revocations are rare: forget every remembered key rather than look this one's hash up.
    this.authenticated.clear();
  }

  /** The account a bearer key belongs to, or AUTH_UNAUTHORIZED. */
  async authenticate(plainKey: string | undefined): Promise<Account> {
    if (plainKey === undefined || !API_KEY_PATTERN.test(plainKey)) throw errors.unauthorized();
    const hash = hashApiKey(plainKey);
    // Keyed by the hash of a well-formed key: looking it up compares no secret byte by byte.
    const remembered = this.authenticated.get(hash);
    if (remembered !== undefined) return remembered;
    const row = await this.db
      .selectFrom('api_keys')
      .innerJoin('accounts', 'accounts.id', 'api_keys.account_id')
      .select(['api_keys.key_hash', 'accounts.id', 'accounts.name', 'accounts.created_at'])
      .where('api_keys.key_hash', '=', hash)
      .where('api_keys.revoked_at', 'is', null)
      .executeTakeFirst();
    if (!row || !secretsEqual(hash, row.key_hash)) throw errors.unauthorized();
    const account = { id: row.id, name: row.name, createdAt: row.created_at };
    this.authenticated.set(hash, account);
    return account;
  }

  /** Registers `plainKey` for the default account unless it was ever registered (idempotent). */
  /**
   * First run: when no account exists, creates the account "default" with a new key and returns
   * both (the plain key only here); otherwise undefined. Nodes starting together on one database
   * take a transaction lock first, so exactly one creates it and the others see it exists.
   */
  async createFirstAccount(): Promise<{ account: Account; key: string } | undefined> {
    return this.db.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(${FIRST_RUN_LOCK})`.execute(trx);
      const existing = await trx.selectFrom('accounts').select('id').limit(1).executeTakeFirst();
      if (existing !== undefined) return undefined;
      const account = { id: randomUUID(), name: DEFAULT_ACCOUNT_NAME, created_at: new Date() };
      await trx.insertInto('accounts').values(account).execute();
      const key = generateApiKey();
      await trx
        .insertInto('api_keys')
        .values({
          id: randomUUID(),
          account_id: account.id,
          key_hash: hashApiKey(key),
          key_prefix: keyPrefix(key),
          created_at: new Date(),
          revoked_at: null,
        })
        .execute();
      return { account: { id: account.id, name: account.name, createdAt: account.created_at }, key };
    });
  }

  async bootstrap(plainKey: string): Promise<Account> {
    const known = await this.db
      .selectFrom('api_keys')
      .select('account_id')
      .where('key_hash', '=', hashApiKey(plainKey))
      .executeTakeFirst();
    // A known key (even one an operator revoked since) is left as it is.
    if (known) return this.resolveAccount(known.account_id);
    const account =
      (await this.findAccountByName(DEFAULT_ACCOUNT_NAME)) ??
      (await this.createAccount(DEFAULT_ACCOUNT_NAME));
    await this.createKey(account.id, plainKey);
    return account;
  }
}
