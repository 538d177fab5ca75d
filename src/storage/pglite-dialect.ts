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

/** What the dialect needs of a database: run one statement, and close. */
export interface StatementRunner {
  query(sql: string, params: unknown[]): Promise<{ rows: unknown[]; affectedRows?: number | undefined }>;
  close(): Promise<void>;
}

class RunnerConnection implements DatabaseConnection {
  constructor(private readonly runner: StatementRunner) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const result = await this.runner.query(query.sql, [...query.parameters]);
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

  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    const begin = settings.isolationLevel
      ? `start transaction isolation level ${settings.isolationLevel}`
      : 'begin';
    await connection.executeQuery(CompiledQuery.raw(begin));
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('commit'));
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('rollback'));
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
