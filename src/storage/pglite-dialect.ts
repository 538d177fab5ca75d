/**
 * A Kysely dialect (PostgreSQL SQL) over anything that runs one statement at a time like PGlite:
 * the service's database worker (src/storage/database.pglite.ts) or an in-process PGlite (the test
 * template). PGlite has one session, so the driver lends its only connection to one caller at a
 * time; a transaction keeps it from BEGIN to COMMIT/ROLLBACK.
 */
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
   * every other statement too.
   */
  queryInTransaction?(sql: string, params: unknown[]): Promise<StatementResult>;
  close(): Promise<void>;
}

class RunnerConnection implements DatabaseConnection {
  /** Between BEGIN and COMMIT/ROLLBACK (set by the driver). */
  inTransaction = false;

  constructor(private readonly runner: StatementRunner) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const params = [...query.parameters];
    const result =
      this.inTransaction && this.runner.queryInTransaction !== undefined
        ? await this.runner.queryInTransaction(query.sql, params)
        : await this.runner.query(query.sql, params);
    const rows = result.rows as R[];
    return result.affectedRows ? { rows, numAffectedRows: BigInt(result.affectedRows) } : { rows };
  }

  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('streaming queries are not supported by the embedded database');
  }
}

class SingleConnectionDriver implements Driver {
  private readonly connection: RunnerConnection;
  private lent = false;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly runner: StatementRunner) {
    this.connection = new RunnerConnection(runner);
  }

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    // Released straight to the next waiter (it stays lent), so no newcomer can slip in between.
    if (this.lent) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.lent = true;
    return this.connection;
  }

  async releaseConnection(): Promise<void> {
    const next = this.waiting.shift();
    if (next === undefined) this.lent = false;
    else next();
  }

  async beginTransaction(_connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    const begin = settings.isolationLevel
      ? `start transaction isolation level ${settings.isolationLevel}`
      : 'begin';
    this.connection.inTransaction = true;
    try {
      await this.connection.executeQuery(CompiledQuery.raw(begin));
    } catch (err) {
      this.connection.inTransaction = false;
      throw err;
    }
  }

  async commitTransaction(): Promise<void> {
    await this.endTransaction('commit');
  }

  async rollbackTransaction(): Promise<void> {
    await this.endTransaction('rollback');
  }

  private async endTransaction(statement: 'commit' | 'rollback'): Promise<void> {
    try {
      await this.connection.executeQuery(CompiledQuery.raw(statement));
    } finally {
      this.connection.inTransaction = false;
    }
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
    return new SingleConnectionDriver(this.runner);
  }

  createQueryCompiler() {
    return new PostgresQueryCompiler();
  }

  createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    return new PostgresIntrospector(db);
  }
}
