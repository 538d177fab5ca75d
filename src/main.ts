/** Service entry point: validated config → app → listen; graceful shutdown on SIGINT/SIGTERM; SIGHUP rescans MODELS_DIR. */
import { openDatabaseFor } from './adapters.js';
import { ConfigError, loadConfig } from './config/config.js';
import { widenHeapGrowth } from './common/heap-growth.js';
import { chooseLogFormat, prettyLogStream } from './http/log-format.js';
import { localUrl, removeServerFile, writeServerFile } from './http/server-file.js';

/** Set once a signal asked the service to stop: start-up steps still running then fail harmlessly. */
let closing = false;

async function main(): Promise<void> {
  // Before anything is loaded: the limits of every heap are computed with it from the start.
  widenHeapGrowth();
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(1);
    }
    throw err;
  }
  const pretty = chooseLogFormat(config.logFormat, process.stdout.isTTY) === 'pretty';
  // The database opens in its own thread while the rest of the service loads here; buildApp
  // awaits it (and reports its failure).
  const database = openDatabaseFor(config);
  database.catch(() => undefined);
  const { buildApp } = await import('./app.js');
  const app = await buildApp(config, {
    database,
    ...(pretty && { logger: { stream: await prettyLogStream(process.stdout.isTTY) } }),
  });
  const log = app.http.log;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    log.info({ signal }, 'shutting down');
    removeServerFile(config.dataDir, process.pid)
      .catch((err: unknown) => log.warn({ err }, 'could not remove server.json'))
      .then(() => app.close())
      .then(
        () => process.exit(0),
        (err: unknown) => {
          log.error({ err }, 'shutdown failed');
          process.exit(1);
        },
      );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  // SIGHUP reads MODELS_DIR again: model folders added or fixed while the service runs appear.
  process.on('SIGHUP', () => {
    app.rescanModels().catch((err: unknown) => log.error({ err }, 'rescanning MODELS_DIR failed'));
  });

  // The first-run account exists before the service answers: a healthy /healthz means it is there.
  const first =
    config.firstRunAccount && config.bootstrapApiKey === undefined
      ? await app.services.accounts.createFirstAccount()
      : undefined;
  await app.http.listen({ host: config.host, port: config.port });
  // The operator CLI finds this server (and a generated admin token) through server.json.
  const address = app.http.server.address();
  if (!closing && address !== null && typeof address === 'object') {
    await writeServerFile(config.dataDir, {
      pid: process.pid,
      url: localUrl(address),
      ...(config.adminToken === undefined && app.adminToken !== undefined && { adminToken: app.adminToken }),
      startedAt: new Date().toISOString(),
    });
  }
  if (first !== undefined) {
    // Once, on stdout whatever the log format: the key is never stored in plain or shown again.
    console.log(firstRunBanner(config.publicUrl, first.account.name, first.key));
  } else if ((await app.services.accounts.listAccounts()).length === 0) {
    log.warn(
      'no accounts yet: create one with `npx voicegen accounts create NAME` and a key with ' +
        '`npx voicegen keys create NAME`, or start with BOOTSTRAP_API_KEY=sk-<32 lowercase letters/digits>',
    );
  }
  log.info(`voice service ready at ${config.publicUrl} (data in ${config.dataDir})`);
  // Listening first: the warm-up never delays the service's start.
  if (!closing) app.warmUpDatabase();
}

/** What a first run prints: the new account's key, once, and a console URL that signs in with it. */
function firstRunBanner(publicUrl: string, account: string, key: string): string {
  return [
    '',
    `  First run: created the account "${account}" with this API key (shown once, keep it):`,
    '',
    `      ${key}`,
    '',
    '  Open the console, signed in with it:',
    '',
    `      ${publicUrl}/#key=${key}`,
    '',
    `  More keys: npx voicegen keys create ${account}`,
    '',
  ].join('\n');
}

/** The messages of an error and its causes, one line each ("because: …"). */
function explain(err: unknown): string {
  const lines: string[] = [];
  for (
    let e: unknown = err;
    e !== undefined && lines.length < 5;
    e = e instanceof Error ? e.cause : undefined
  ) {
    lines.push(e instanceof Error ? e.message : JSON.stringify(e));
  }
  return lines.join('\n  because: ');
}

main().catch((err: unknown) => {
  // Stopped while starting: the shutdown closed what a start-up step was using, and exits itself.
  if (closing) return;
  // Start-up failures (a held DATA_DIR, an unreachable Redis or bucket, …) are the operator's to fix:
  // say what is wrong in words; the stack only helps at LOG_LEVEL=debug.
  console.error(`voicegen could not start: ${explain(err)}`);
  if (process.env.LOG_LEVEL === 'debug' || process.env.LOG_LEVEL === 'trace') console.error(err);
  process.exit(1);
});
