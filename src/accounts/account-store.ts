/**
 * The accounts and API keys the service keeps: the port the account service reads and writes them
 * through. Keys are kept only as their hash and the prefix listings show, never the key.
 */

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

/** A key as it is stored: its listing and the hash a bearer key is looked up by. */
export interface StoredApiKey extends ApiKeyInfo {
  hash: string;
}

export interface AccountStore {
  /** Adds an account; a name taken by another account is refused (the store's error). */
  insertAccount(account: Account): Promise<void>;
  accountById(id: string): Promise<Account | undefined>;
  accountByName(name: string): Promise<Account | undefined>;
  /** Every account, oldest first. */
  listAccounts(): Promise<Account[]>;

  /** Adds a key; a hash already stored is refused (the store's error). */
  insertKey(key: StoredApiKey): Promise<void>;
  /** The account's keys, revoked ones included, oldest first. */
  listKeys(accountId: string): Promise<ApiKeyInfo[]>;
  /** Marks key `keyId` revoked at `at`; false when no unrevoked key has that id. */
  revokeKey(keyId: string, at: Date): Promise<boolean>;
  /** The account of the unrevoked key with hash `hash`, with the hash as stored (to compare). */
  accountOfActiveKey(hash: string): Promise<{ account: Account; keyHash: string } | undefined>;
  /** The account id of the key with hash `hash`, revoked or not: whether it was ever registered. */
  accountIdOfKey(hash: string): Promise<string | undefined>;

  /**
   * Adds `account` with `key` only when no account exists yet, and says whether it did. Nodes
   * sharing the store that call this together add exactly one first account between them.
   */
  insertFirstAccount(account: Account, key: StoredApiKey): Promise<boolean>;
}
