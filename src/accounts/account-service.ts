/**
 * Accounts and their API keys: creation (CLI), authentication of bearer keys, and the optional
 * bootstrap key that makes a fresh install usable at once.
 */
import { randomUUID } from 'node:crypto';
import { AppError, errors } from '../errors/app-error.js';
import { CONTROL_CHARACTER_MESSAGE, controlCharacterIndex } from '../errors/validation.js';
import { secretsEqual } from '../common/secret-compare.js';
import { TtlCache } from '../common/ttl-cache.js';
import type { Account, AccountStore, ApiKeyInfo, StoredApiKey } from './account-store.js';
import { API_KEY_PATTERN, generateApiKey, hashApiKey, keyPrefix } from './api-keys.js';

export type { Account, ApiKeyInfo } from './account-store.js';

export const DEFAULT_ACCOUNT_NAME = 'default';

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

/** A new key of `accountId` as it is stored: its hash and prefix, never the key. */
function storedKey(accountId: string, plainKey: string): StoredApiKey {
  return {
    id: randomUUID(),
    accountId,
    hash: hashApiKey(plainKey),
    prefix: keyPrefix(plainKey),
    createdAt: new Date(),
    revokedAt: null,
  };
}

/** Accounts and keys over an account store, with authenticated keys cached in memory. */
export class AccountService {
  /** Account of each key hash that authenticated lately (never a key that failed). */
  private readonly authenticated: TtlCache<string, Account>;

  constructor(
    private readonly store: AccountStore,
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
    const account = { id: randomUUID(), name: trimmed, createdAt: new Date() };
    await this.store.insertAccount(account);
    return account;
  }

  async findAccountByName(name: string): Promise<Account | undefined> {
    return this.store.accountByName(name);
  }

  async getAccount(id: string): Promise<Account | undefined> {
    return this.store.accountById(id);
  }

  /** Resolves an account by id or name (CLI convenience). */
  async resolveAccount(idOrName: string): Promise<Account> {
    const account = (await this.getAccount(idOrName)) ?? (await this.findAccountByName(idOrName));
    if (!account) throw new AppError('RESOURCE_NOT_FOUND', `account "${idOrName}" not found`);
    return account;
  }

  async listAccounts(): Promise<Account[]> {
    return this.store.listAccounts();
  }

  /** Issues a key for the account. The plain key is returned once and never stored. */
  async createKey(
    accountId: string,
    plainKey: string = generateApiKey(),
  ): Promise<{ key: string; info: ApiKeyInfo }> {
    if (!API_KEY_PATTERN.test(plainKey))
      throw errors.invalidValue('API key must be sk- followed by 32 lowercase letters or digits');
    const stored = storedKey(accountId, plainKey);
    await this.store.insertKey(stored);
    const { id, prefix, createdAt } = stored;
    return { key: plainKey, info: { id, accountId, prefix, createdAt, revokedAt: null } };
  }

  async listKeys(accountId: string): Promise<ApiKeyInfo[]> {
    return this.store.listKeys(accountId);
  }

  /** Revokes a key by its id; revoked keys stop authenticating at once. */
  async revokeKey(keyId: string): Promise<void> {
    if (!(await this.store.revokeKey(keyId, new Date())))
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
    const found = await this.store.accountOfActiveKey(hash);
    if (!found || !secretsEqual(hash, found.keyHash)) throw errors.unauthorized();
    this.authenticated.set(hash, found.account);
    return found.account;
  }

  /**
   * First run: when no account exists, creates the account "default" with a new key and returns
   * both (the plain key only here); otherwise undefined. Nodes starting together on one database
   * create it exactly once between them (the store sees to it).
   */
  async createFirstAccount(): Promise<{ account: Account; key: string } | undefined> {
    const account = { id: randomUUID(), name: DEFAULT_ACCOUNT_NAME, createdAt: new Date() };
    const key = generateApiKey();
    const created = await this.store.insertFirstAccount(account, storedKey(account.id, key));
    return created ? { account, key } : undefined;
  }

  /** Registers `plainKey` for the default account unless it was ever registered (idempotent). */
  async bootstrap(plainKey: string): Promise<Account> {
    const knownAccountId = await this.store.accountIdOfKey(hashApiKey(plainKey));
    // A known key (even one an operator revoked since) is left as it is.
    if (knownAccountId !== undefined) return this.resolveAccount(knownAccountId);
    const account =
      (await this.findAccountByName(DEFAULT_ACCOUNT_NAME)) ??
      (await this.createAccount(DEFAULT_ACCOUNT_NAME));
    await this.createKey(account.id, plainKey);
    return account;
  }
}
