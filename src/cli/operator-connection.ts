/**
 * Where the CLI's operations go. A running server owns its data: with one, every command goes
 * through its /admin API; without one, the CLI opens the database itself. Order:
 *  1. `--url`/VOICEGEN_URL: that server's admin API, with `--admin-token`/ADMIN_TOKEN (required).
 *  2. The server.json of DATA_DIR names a live process whose URL answers /healthz: its admin API,
 *     with `--admin-token`/ADMIN_TOKEN or the token the server generated (embedded installs).
 *     Without a token: PostgreSQL (DATABASE_URL) is opened directly; embedded PGlite is refused.
 *  3. No server: the database directly (PostgreSQL is safe beside servers; the embedded database
 *     refuses a second process that opens its data dir). An embedded DATA_DIR that does not exist
 *     is refused unless asked to create it (`voicegen init`): a mistyped or unset DATA_DIR would
 *     otherwise give a new empty database beside the real one, and commands that seem to work.
 */
import { existsSync } from 'node:fs';
import { AccountService } from '../accounts/account-service.js';
import { SqlAccountStore } from '../accounts/account-store.sql.js';
import { AdminService, type AdminOperations } from '../admin/admin-service.js';
import { createEngineRegistry } from '../audio/engines/engine-registry.js';
import { localModelOperations } from '../audio/engines/neural-install.js';
import type { AppConfig } from '../config/config.js';
import { readServerFile, serverFilePath } from '../http/server-file.js';
import { blobStoreFor } from '../adapters.js';
import { openDatabase } from '../storage/database.js';
import { VoiceService } from '../voices/voice-service.js';
import { VoiceStore } from '../voices/voice-store.js';
import { AdminHttpClient } from './admin-http-client.js';
import { CliError } from './cli-error.js';
import { processAlive } from '../common/process-alive.js';

/** The operations the CLI runs, and how to let go of what they hold. */
export interface OperatorConnection {
  operations: AdminOperations;
  /** `admin-api` (a running server) or `database` (opened by the CLI itself). */
  via: 'admin-api' | 'database';
  /** What it is, for a person: the server's URL, or the database and where it lives. */
  target: string;
  close(): Promise<void>;
}

/** What the CLI was told: explicit server URL and admin token (flags or environment). */
export interface ConnectOptions {
  url: string | undefined;
  adminToken: string | undefined;
  /** Loaded only when needed (an explicit URL needs no database settings). */
  config: () => AppConfig | Promise<AppConfig>;
  /** Create an embedded DATA_DIR that does not exist yet (else it is refused). */
  createDataDir?: boolean;
}

/** A PostgreSQL URL without its credentials: host, port and database. */
function describePostgres(url: string): string {
  try {
    const parsed = new URL(url);
    return `PostgreSQL database ${parsed.hostname}:${parsed.port || '5432'}${parsed.pathname}`;
  } catch {
    return 'PostgreSQL database of DATABASE_URL';
  }
}

async function answersHealth(url: string): Promise<boolean> {
  try {
    const response = await fetch(`${url.replace(/\/+$/, '')}/healthz`, { signal: AbortSignal.timeout(5000) });
    await response.arrayBuffer();
    return response.ok;
  } catch {
    return false;
  }
}

function viaAdminApi(url: string, adminToken: string): OperatorConnection {
  return {
    operations: new AdminHttpClient(url, adminToken),
    via: 'admin-api',
    target: `the server at ${url} (admin API)`,
    close: async () => {},
  };
}

async function viaDatabase(config: AppConfig, createDataDir: boolean): Promise<OperatorConnection> {
  const embedded = config.databaseUrl === undefined;
  if (embedded && !createDataDir && !existsSync(config.dataDir)) {
    throw new CliError(
      `DATA_DIR ${config.dataDir} does not exist, so there is no voicegen database there: set DATA_DIR to the ` +
        'service\'s data folder (the server logs it at start: "data in …"), start a server there with --url, ' +
        'or create a new one with `voicegen init`',
      2,
    );
  }
  const handle = await openDatabase({ dataDir: config.dataDir, databaseUrl: config.databaseUrl });
  const accounts = new AccountService(new SqlAccountStore(handle.db));
  const blobs = await blobStoreFor(config);
  // Imports validate bindings against the engines the server would speak them with.
  const engines = createEngineRegistry({
    remoteEndpoints: config.remoteEngines,
    synthesisThreads: 1,
    neural: config.neural,
  });
  const voices = async () => new VoiceService(new VoiceStore(handle.db), engines, blobs);
  return {
    // No server to tell: the next start (or SIGHUP) reads MODELS_DIR.
    operations: new AdminService(accounts, voices, localModelOperations(config.neural)),
    via: 'database',
    target:
      config.databaseUrl === undefined
        ? `the embedded database in ${config.dataDir} (no server running on it)`
        : describePostgres(config.databaseUrl),
    close: async () => {
      await engines.close();
      blobs.close?.();
      await handle.close();
    },
  };
}

/** Picks the target (see the module comment) and connects to it. */
export async function connectOperator(options: ConnectOptions): Promise<OperatorConnection> {
  if (options.url !== undefined) {
    if (options.adminToken === undefined) {
      throw new CliError(
        `the admin API at ${options.url} needs the admin token: pass --admin-token TOKEN or set ADMIN_TOKEN`,
        2,
      );
    }
    return viaAdminApi(options.url, options.adminToken);
  }
  const config = await options.config();
  const server = await readServerFile(config.dataDir);
  const embedded = config.databaseUrl === undefined;
  if (server !== undefined && processAlive(server.pid)) {
    if (await answersHealth(server.url)) {
      const adminToken = options.adminToken ?? server.adminToken;
      if (adminToken !== undefined) return viaAdminApi(server.url, adminToken);
      if (embedded) {
        throw new CliError(
          `a voicegen server (pid ${server.pid}, ${server.url}) is running on ${config.dataDir} with its own ` +
            'ADMIN_TOKEN: pass that token with --admin-token TOKEN or set ADMIN_TOKEN',
          2,
        );
      }
    } else if (embedded) {
      throw new CliError(
        `a voicegen server (pid ${server.pid}) holds ${config.dataDir} but ${server.url} does not answer: ` +
          `wait until it is ready, or stop it (if no server runs there, remove ${serverFilePath(config.dataDir)})`,
        2,
      );
    }
  }
  return viaDatabase(config, options.createDataDir === true);
}
