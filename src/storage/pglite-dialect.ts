/**
 * A Kysely dialect (PostgreSQL SQL) over anything that runs one statement at a time like PGlite:
 * the service's database worker (src/storage/database.pglite.ts) or an in-process PGlite (the test
 * template). PGlite has one session and runs statements in the order they come: statements are
 * sent without waiting for the answers before them, and a transaction keeps the session to itself
 * from BEGIN to COMMIT/ROLLBACK.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import {
  CompiledQuery,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type Driver,
  type Kysely,
  type QueryResult,
  type TransactionSettings,
} from 'kysely';

/** What a statement answers: its rows, and how many rows it changed. */
export interface StatementResult {
  rows: unknown[];
  affectedRows?: number | undefined;
}

/** What the dialect needs of a database: run one statement, and close. */
export interface StatementRunner {
  query(sql: string, params: unknown[]): Promise<StatementResult>;
  /**
   * Runs a statement of an open transaction, if the runner can do it faster than `query` for that
   * case: the transaction holds the only session, so every wait between its statements holds up
   * every other statement too — those waiting now when `othersWaiting`.
   */
  queryInTransaction?(sql: string, params: unknown[], othersWaiting: boolean): Promise<StatementResult>;
  /**
   * Whether the calling thread has already waited on the spot for answers long enough in this
   * turn of its event loop: a new transaction then begins after a turn (see beginTransaction).
   */
  turnSpent?(): boolean;
  close(): Promise<void>;
}

/** Runs one statement; one of an open transaction the runner's faster way for that, if it has one. */
function runStatement(
  runner: StatementRunner,
  sql: string,
  params: unknown[],
  inTransaction: boolean,
  othersWaiting: boolean,
): Promise<StatementResult> {
  return inTransaction && runner.queryInTransaction !== undefined
    ? runner.queryInTransaction(sql, params, othersWaiting)
    : runner.query(sql, params);
}

class RunnerConnection implements DatabaseConnection {
  constructor(
    private readonly runner: StatementRunner,
    private readonly session: SessionGate,
  ) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const params = [...query.parameters];
    const result = await this.session.send(this, (inTransaction, othersWaiting) =>
      runStatement(this.runner, query.sql, params, inTransaction, othersWaiting),
    );
    const rows = result.rows as R[];
    return result.affectedRows ? { rows, numAffectedRows: BigInt(result.affectedRows) } : { rows };
  }

  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('streaming queries are not supported by the embedded database');
  }
}

/**
 * Sends one statement (synchronously, when called) and answers its result; `othersWaiting`: other
 * statements wait for the transaction it belongs to.
 */
type Send = (inTransaction: boolean, othersWaiting: boolean) => Promise<StatementResult>;

/**
 * Who may send a statement to the one session now. The runner runs statements in the order they
 * were sent, so statements outside transactions are sent as they come, without waiting for the
 * answers before them; a transaction has the session to itself from BEGIN until its COMMIT or
 * ROLLBACK is sent, and whatever comes meanwhile is sent after it, in arrival order. Each grant
 * sends its statement synchronously, so the order of sending is the order of granting.
 */
class SessionGate {
  /** The connection whose transaction holds the session. */
  private holder: RunnerConnection | undefined;
  private readonly waiting: Array<() => void> = [];

  /** Sends `send`'s statement for `connection` as soon as the session is free for it. */
  send(connection: RunnerConnection, send: Send): Promise<StatementResult> {
    if (this.holder === connection) return send(true, this.waiting.length > 0);
    return this.whenFree(() => send(false, false));
  }

  /** Sends BEGIN for `connection` when the session is free, and keeps it for that transaction. */
  begin(connection: RunnerConnection, send: Send): Promise<StatementResult> {
    return this.whenFree(() => {
      this.holder = connection;
      const sent = send(true, this.waiting.length > 0);
      // A failed BEGIN opens no transaction (Kysely then sends no ROLLBACK): free the session.
      sent.catch(() => this.free(connection));
      return sent;
    });
  }

  /**
   * Sends COMMIT or ROLLBACK of `connection`'s transaction and frees the session at once (what is
   * sent next runs after it). None if its transaction already ended: a ROLLBACK after a failed
   * COMMIT must not reach a transaction someone else has opened since.
   */
  end(connection: RunnerConnection, send: Send): Promise<StatementResult> | undefined {
    if (this.holder !== connection) return undefined;
    const sent = send(true, this.waiting.length > 0);
    this.free(connection);
    return sent;
  }

  /** Ends `connection`'s hold on the session; what waited is sent, up to the next transaction. */
  private free(connection: RunnerConnection): void {
    if (this.holder !== connection) return;
    this.holder = undefined;
    while (this.waiting.length > 0 && this.holder === undefined) this.waiting.shift()?.();
  }

  private whenFree(send: () => Promise<StatementResult>): Promise<StatementResult> {
    if (this.holder === undefined && this.waiting.length === 0) return send();
    return new Promise((resolve, reject) =>
      this.waiting.push(() => {
        send().then(resolve, reject);
      }),
    );
  }
}

/** Lends every caller a connection at once; the session gate orders what they send. */
class OneSessionDriver implements Driver {
  private readonly session = new SessionGate();

  constructor(private readonly runner: StatementRunner) {}

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    return new RunnerConnection(this.runner, this.session);
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    // Kysely ends every transaction before releasing; should one stay open, roll it back.
    await this.session.end(connection as RunnerConnection, (_, othersWaiting) =>
      runStatement(this.runner, 'rollback', [], true, othersWaiting),
    );
  }

  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    const begin = settings.isolationLevel
      ? `start transaction isolation level ${settings.isolationLevel}`
      : 'begin';
    // Transactions that follow each other in promise callbacks would otherwise all run in one
    // turn of the event loop (50 task creations held it for up to a second): once the turn has
    // waited enough, the next one begins after the loop has served what came meanwhile.
    if (this.runner.turnSpent?.() === true) await nextTurn();
    await this.session.begin(connection as RunnerConnection, (inTransaction, othersWaiting) =>
      runStatement(this.runner, begin, [], inTransaction, othersWaiting),
    );
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await this.endTransaction(connection, 'commit');
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await this.endTransaction(connection, 'rollback');
  }

  private async endTransaction(connection: DatabaseConnection, statement: 'commit' | 'rollback') {
    await this.session.end(connection as RunnerConnection, (_, othersWaiting) =>
      runStatement(this.runner, statement, [], true, othersWaiting),
    );
  }

  async destroy(): Promise<void> {
    await this.runner.close();
  }
}

/** Kysely's PostgreSQL dialect over one `StatementRunner`. */
export class PgliteDialect implements Dialect {
  constructor(private readonly runner: StatementRunner) {}

  createAdapter() {
    return new PostgresAdapter();
  }

  createDriver(): Driver {
    return new OneSessionDriver(this.runner);
  }

  createQueryCompiler() {
    return new PostgresQueryCompiler();
  }

  createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    return new PostgresIntrospector(db);
  }
}
