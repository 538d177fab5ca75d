/**
 * Worker thread that owns the embedded database (PGlite) of the service: it opens DATA_DIR/db and
 * answers the main thread's statements one at a time (src/storage/database.pglite.ts). PGlite runs
 * PostgreSQL in WebAssembly on the thread that calls it; here, a long statement no longer stops the
 * main thread from answering HTTP requests.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite, protocol, types } from '@electric-sql/pglite';
import {
  PGLITE_PARSERS,
  serializeDatabaseError,
  type PgliteRequest,
  type PgliteResponse,
  type PgliteWorkerData,
} from './pglite-protocol.js';

async function open(data: PgliteWorkerData): Promise<PGlite> {
  const options = {
    parsers: PGLITE_PARSERS,
    startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${data.cacheMb}MB`],
  };
  if (data.dir !== undefined) return PGlite.create(data.dir, options);
  return PGlite.create({ ...options, ...(data.template !== undefined && { loadDataDir: data.template }) });
}

/**
 * A parameter in PostgreSQL's text format, for the types the service's statements pass, converted
 * as the `pg` client of the PostgreSQL adapter converts them (a Date as its UTC instant); undefined
 * for any other type.
 */
function textParameter(value: unknown): string | null | undefined {
  if (value === null || value === undefined) return null;
  switch (typeof value) {
    case 'string':
      return value;
    case 'number':
    case 'bigint':
      return String(value);
    case 'boolean':
      return value ? 'true' : 'false';
    default:
      return value instanceof Date ? value.toISOString() : undefined;
  }
}

/** What a statement answers, as PGlite's `query` would give it. */
interface StatementAnswer {
  rows: Record<string, unknown>[];
  affectedRows: number;
}

/** Rows changed, from a CommandComplete tag ('UPDATE 3', 'INSERT 0 1'), as PGlite counts them. */
function changedRows(tag: string): number {
  const [command, first, second] = tag.split(' ');
  if (command === 'INSERT') return Number(second ?? 0);
  if (command === 'UPDATE' || command === 'DELETE' || command === 'MERGE' || command === 'COPY')
    return Number(first ?? 0);
  return 0;
}

/**
 * The rows and changed-row count of one statement's answer. PGlite's own result parser copies
 * its whole table of ~300 type parsers on every statement (~0.17 ms here); this one looks them up
 * in place.
 */
function answerOf(messages: readonly unknown[], parsers: PGlite['parsers']): StatementAnswer {
  const { RowDescriptionMessage, DataRowMessage, CommandCompleteMessage } = protocol.messages;
  let fields: { name: string; dataTypeID: number }[] = [];
  const rows: Record<string, unknown>[] = [];
  let affectedRows = 0;
  for (const message of messages) {
    if (message instanceof RowDescriptionMessage) fields = message.fields;
    else if (message instanceof DataRowMessage) {
      const row: Record<string, unknown> = {};
      message.fields.forEach((value, i) => {
        const field = fields[i];
        if (field !== undefined) row[field.name] = types.parseType(value, field.dataTypeID, parsers);
      });
      rows.push(row);
    } else if (message instanceof CommandCompleteMessage) affectedRows += changedRows(message.text);
  }
  return { rows, affectedRows };
}

/** Most statements kept prepared in the session (each holds its plan in the database's memory). */
const PREPARED_STATEMENTS_MAX = 200;

/**
 * The statements prepared in the database's one session, by SQL text, the least recently used
 * first. The service sends the same few dozen statements again and again: binding the prepared
 * one skips parsing and planning, about half of a short statement's time (a task read with a
 * subquery: 0.43 → 0.22 ms in PGlite). Prepared statements belong to the session, not to a
 * transaction: a rollback keeps them.
 */
class PreparedStatements {
  private readonly names = new Map<string, string>();
  private made = 0;
  /** Statements to close with the next message: evicted, or forgotten after a failure. */
  private toClose: string[] = [];

  /** The name of `sql`'s prepared statement, and whether this message must prepare it. */
  take(sql: string): { name: string; prepare: boolean } {
    const known = this.names.get(sql);
    if (known !== undefined) {
      this.names.delete(sql); // most recently used last
      this.names.set(sql, known);
      return { name: known, prepare: false };
    }
    const name = `s${String(++this.made)}`;
    this.names.set(sql, name);
    if (this.names.size > PREPARED_STATEMENTS_MAX) {
      const [oldest] = this.names;
      if (oldest !== undefined) {
        this.names.delete(oldest[0]);
        this.toClose.push(oldest[1]);
      }
    }
    return { name, prepare: true };
  }

  /**
   * After a failed message: its statement may not have been prepared (a parse error) or may be
   * unusable, so it is closed and prepared again next time; the closes the message carried may
   * not have run, so they are sent again (closing an unknown statement is not an error).
   */
  failed(sql: string, closes: readonly string[]): void {
    const name = this.names.get(sql);
    this.names.delete(sql);
    this.toClose.push(...closes, ...(name === undefined ? [] : [name]));
  }

  /** The statements to close now (the caller sends them first in its message). */
  takeCloses(): string[] {
    const closes = this.toClose;
    this.toClose = [];
    return closes;
  }
}

/**
 * Runs one statement in a single call into PostgreSQL: the closes of evicted statements, the parse
 * of a statement not prepared yet, then bind, describe, execute and sync, sent as one message.
 * PGlite's `query` makes a call for each step, one more to learn the parameters' types, and parses
 * and plans the statement every time. Here the parameters go as untyped text, typed by PostgreSQL
 * from the statement, as the `pg` client sends them to a PostgreSQL server; a statement with a
 * parameter of another type goes through `query`.
 */
async function runStatement(
  pglite: PGlite,
  prepared: PreparedStatements,
  sql: string,
  params: unknown[],
): Promise<StatementAnswer> {
  const values = params.map(textParameter);
  if (values.some((value) => value === undefined)) {
    const result = await pglite.query<Record<string, unknown>>(sql, params);
    return { rows: result.rows, affectedRows: result.affectedRows ?? 0 };
  }
  const { serialize } = protocol;
  const closes = prepared.takeCloses();
  const statement = prepared.take(sql);
  const parts = [
    ...closes.map((name) => serialize.close({ type: 'S', name })),
    ...(statement.prepare ? [serialize.parse({ name: statement.name, text: sql })] : []),
    serialize.bind({ statement: statement.name, values: values as (string | null)[] }),
    serialize.describe({ type: 'P' }),
    serialize.execute({}),
    serialize.sync(),
  ];
  try {
    const { messages } = await pglite.execProtocol(Buffer.concat(parts));
    return answerOf(messages, pglite.parsers);
  } catch (err) {
    prepared.failed(sql, closes);
    throw err;
  }
}

/** Runs one command and answers it (never throws). */
async function run(
  pglite: PGlite,
  prepared: PreparedStatements,
  request: PgliteRequest,
): Promise<PgliteResponse> {
  try {
    switch (request.op) {
      case 'query': {
        const result = await runStatement(pglite, prepared, request.sql, request.params);
        return { id: request.id, ok: true, rows: result.rows, affectedRows: result.affectedRows };
      }
      case 'close':
        await pglite.close();
        return { id: request.id, ok: true, rows: [] };
    }
  } catch (err) {
    return { id: request.id, ok: false, error: serializeDatabaseError(err) };
  }
}

/**
 * Answers every command on the channel, one after another in the order they came (statements sent
 * by the one-call path and by `query` must not interleave on the one session): the answer first,
 * then the flag the caller may be waiting on (it reads the answer at once, or later from its event
 * loop). A closed database closes the channel, which ends the thread.
 */
function serve(pglite: PGlite, data: PgliteWorkerData): void {
  const prepared = new PreparedStatements();
  const answer = async (request: PgliteRequest): Promise<void> => {
    const response = await run(pglite, prepared, request);
    try {
      data.port.postMessage(response);
    } catch (err) {
      // Rows that cannot cross to the caller: it gets the error instead of waiting for ever.
      data.port.postMessage({ id: request.id, ok: false, error: serializeDatabaseError(err) });
    }
    Atomics.store(data.answered, 0, 1);
    Atomics.notify(data.answered, 0);
    if (request.op === 'close' && response.ok) data.port.close();
  };
  let previous: Promise<void> = Promise.resolve();
  data.port.on('message', (request: PgliteRequest) => {
    // Each command after the one before, whatever became of it: one failure must not stop the chain.
    previous = previous.then(() => answer(request)).catch(() => undefined);
  });
}

const data = workerData as PgliteWorkerData;
// No top-level await: under tsx, worker modules are loaded as CommonJS (src/common/worker-url.ts).
// Opening is announced on the thread's own port, the only message sent there.
open(data).then(
  (pglite) => {
    serve(pglite, data);
    parentPort?.postMessage({ id: 0, ok: true, rows: [] } satisfies PgliteResponse);
  },
  (err: unknown) => {
    parentPort?.postMessage({
      id: 0,
      ok: false,
      error: serializeDatabaseError(err),
    } satisfies PgliteResponse);
  },
);
