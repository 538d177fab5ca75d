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
/** Every voice version, oldest first (a migration only goes forward in this order). */
export const VOICE_VERSIONS: readonly VoiceVersion[] = ['v1.0', 'v2.0', 'v3.0', 'v4.0'];

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
  /** Bytes of its uploaded sample (0: none, or uploaded before sizes were kept). */
  lora_bytes: ColumnType<string, string | number | undefined, string | number>;
  /** Bytes of the voice's reference clip (counted with its uploads). */
  reference_bytes: ColumnType<string, string | number | undefined, string | number>;
  /** Blob key of its uploaded sample; null: none, or the key of the first layout (`voices/<id>/lora.bin`). */
  lora_key: ColumnType<string | null, string | null | undefined, string | null>;
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

export type TaskStatus = 'pending' | 'processing' | 'generated' | 'failed';
export type PieceStatus = 'pending' | 'processing' | 'generated' | 'failed';

export interface TasksTable {
  id: string;
  account_id: string;
  status: TaskStatus;
  /** 'contents' or 'splitter': the request shape the task came from. */
  type: string;
  /** Random 128-bit token of the stream endpoints' `auth` query parameter. */
  auth_token: string;
  /** The request as accepted (JSON text), echoed in metadata. */
  request: string;
  characters: number;
  error: string | null;
  /** Generation attempts started; a task that keeps crashing the worker is failed, not retried forever. */
  attempts: number;
  /** Fencing token of the delivery that last claimed the task; the runner's writes require it. */
  lease_token: string | null;
  /** Base URL of the node that last claimed the task (where its growing audio lives). */
  worker_url: string | null;
  /** Blob key of the merged finished audio, once stored. */
  audio_key: string | null;
  /** Bytes of the merged audio stored (0: none, the one piece's audio, or stored before sizes were kept). */
  audio_bytes: ColumnType<string, string | number | undefined, string | number>;
  duration_seconds: number | null;
  created_at: Timestamp;
  updated_at: Timestamp;
  generated_at: Timestamp | null;
  /** Why cancellation was asked for (shown as the task's error); null = never asked. */
  cancel_reason: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface TaskContentsTable {
  task_id: string;
  idx: number;
  text: string;
  voice_id: string;
  /** The voice's engine binding at creation time (JSON text). */
  binding: string;
  /** Generation parameters of the piece (JSON text): speechRate, interval, preset, seed, … */
  params: string;
  status: PieceStatus;
  /** Canonical PCM samples produced, once generated. */
  samples: ColumnType<string | null, number | null, number | null>;
  audio_key: string | null;
  /** Bytes of the piece's stored MP3 (0: none yet, or stored before sizes were kept). */
  audio_bytes: ColumnType<string, string | number | undefined, string | number>;
  generated_at: Timestamp | null;
  /** The splitter marker that started the piece (its speaker); null outside splitter mode. */
  speaker: ColumnType<string | null, string | null | undefined, string | null>;
}

/** One timed sentence of a content piece; samples count from the piece's first canonical sample. */
export interface TaskTimingsTable {
  task_id: string;
  content_idx: number;
  seq: number;
  start_sample: ColumnType<string, number, number>;
  end_sample: ColumnType<string, number, number>;
  /** UTF-16 offsets of the sentence in the piece's text. */
  text_start: number;
  text_end: number;
  /** JSON array of [startSample, endSample, textStart, textEnd] per word the engine timed. */
  words: string;
}

/** Settings every node shares, by name (e.g. the relay-signing secret). */
export interface ClusterSettingsTable {
  name: string;
  value: string;
}

/** Characters of the tasks an account had accepted on one UTC day (the daily characters quota). */
export interface AccountDailyUsageTable {
  account_id: string;
  /** UTC day, 'YYYY-MM-DD'. */
  day: string;
  characters: ColumnType<string | number, number, number>;
}

export interface Database {
  tasks: TasksTable;
  task_contents: TaskContentsTable;
  task_timings: TaskTimingsTable;
  cluster_settings: ClusterSettingsTable;
  accounts: AccountsTable;
  api_keys: ApiKeysTable;
  voices: VoicesTable;
  splitters: SplittersTable;
  account_daily_usage: AccountDailyUsageTable;
}

export type AccountRow = Selectable<AccountsTable>;
export type VoiceRow = Selectable<VoicesTable>;
export type NewVoiceRow = Insertable<VoicesTable>;
export type VoiceUpdate = Updateable<VoicesTable>;
export type SplitterRow = Selectable<SplittersTable>;
export type TaskRow = Selectable<TasksTable>;
export type TaskContentRow = Selectable<TaskContentsTable>;
