/** Table types of the service database (PostgreSQL dialect, embedded PGlite or a server). */
import type { ColumnType, Insertable, Selectable, Updateable } from 'kysely';

type Timestamp = ColumnType<Date, Date | string, Date | string>;

export interface AccountsTable {
  id: string;
  name: string;
  created_at: Timestamp;
}

export interface ApiKeysTable {
  id: string;
  account_id: string;
  /** sha256 hex of the whole key; the key itself is never stored. */
  key_hash: string;
  /** First characters of the key, to tell keys apart in listings. */
  key_prefix: string;
  created_at: Timestamp;
  revoked_at: Timestamp | null;
}

export type VoiceStatus = 'creating' | 'ready' | 'failed';
export type VoiceVersion = 'v1.0' | 'v2.0' | 'v3.0' | 'v4.0';

export interface VoicesTable {
  id: string;
  account_id: string;
  name: string;
  status: VoiceStatus;
  version: VoiceVersion;
  language: string;
  description: string;
  /** Engine binding (JSON text): which engine speaks for this voice and with which parameters. */
  engine: string;
  with_lora: boolean;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface SplittersTable {
  id: string;
  account_id: string;
  name: string;
  /** The configuration as JSON text, so key order is kept exactly as given (jsonb would reorder). */
  config: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface Database {
  accounts: AccountsTable;
  api_keys: ApiKeysTable;
  voices: VoicesTable;
  splitters: SplittersTable;
}

export type AccountRow = Selectable<AccountsTable>;
export type VoiceRow = Selectable<VoicesTable>;
export type NewVoiceRow = Insertable<VoicesTable>;
export type VoiceUpdate = Updateable<VoicesTable>;
export type SplitterRow = Selectable<SplittersTable>;
