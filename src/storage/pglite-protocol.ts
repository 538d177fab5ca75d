/**
 * Messages between the service and the worker thread that owns its embedded database
 * (src/storage/pglite.worker.ts), and the PGlite settings both sides share.
 */
import type { MessagePort } from 'node:worker_threads';
import { types, type PGliteOptions } from '@electric-sql/pglite';

// int8 (bigint, count(*)) as text, as pg returns it and schema.ts declares it: PGlite would give a
// number, and the two adapters must return the same types.
/** Type parsers of every PGlite the service opens. */
export const PGLITE_PARSERS: PGliteOptions['parsers'] = { [types.INT8]: (value: string) => value };

/**
 * What the worker is started with: the database folder (created before, see database.pglite.ts);
 * and the channel for statements, whose answers the caller may wait for without returning to its
 * event loop: the worker answers on `port` and then raises `answered[0]` to 1.
 */
export interface PgliteWorkerData {
  /** The database folder; undefined: the database lives in memory, loaded from `template` when given. */
  dir: string | undefined;
  /** A data-dir dump a database in memory starts from (else initdb). */
  template?: Blob | undefined;
  /** PostgreSQL's shared_buffers in MiB. */
  cacheMb: number;
  port: MessagePort;
  answered: Int32Array;
}

/** One statement to run, or the request to close the database. */
export type PgliteCommand = { op: 'query'; sql: string; params: unknown[] } | { op: 'close' };

/** A command as sent: `id` pairs it with its answer. */
export type PgliteRequest = PgliteCommand & { id: number };

/** An error as it crosses the thread boundary: its name, message, stack and PostgreSQL's fields. */
export interface SerializedDatabaseError {
  name: string;
  message: string;
  stack?: string | undefined;
  fields: Record<string, string | number>;
}

/** The answer to request `id` (id 0: the database is open, or failed to open). */
export type PgliteResponse =
  | { id: number; ok: true; rows: unknown[]; affectedRows?: number | undefined }
  | { id: number; ok: false; error: SerializedDatabaseError };

/** An error's own string and number fields (PostgreSQL's `code`, `severity`, `detail`, …) and identity. */
export function serializeDatabaseError(err: unknown): SerializedDatabaseError {
  if (!(err instanceof Error)) return { name: 'Error', message: String(err), fields: {} };
  const fields: Record<string, string | number> = {};
  for (const [key, value] of Object.entries(err)) {
    if (typeof value === 'string' || typeof value === 'number') fields[key] = value;
  }
  return { name: err.name, message: err.message, stack: err.stack, fields };
}

/** The error the caller sees: the worker's, with its fields, under its own name. */
export function deserializeDatabaseError(serialized: SerializedDatabaseError): Error {
  const err = Object.assign(new Error(serialized.message), serialized.fields);
  err.name = serialized.name;
  if (serialized.stack !== undefined) err.stack = serialized.stack;
  return err;
}
