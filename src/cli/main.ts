/**
 * Operator CLI: accounts, API keys and voice imports, against the same database the service uses
 * (DATA_DIR or DATABASE_URL). With the embedded database, stop the service first: PGlite is
 * single-process.
 */
import { Command, InvalidArgumentError } from 'commander';
import { AccountService } from '../accounts/account-service.js';
import { listEspeakVoices } from '../audio/engines/espeak.engine.js';
import { loadConfig } from '../config/config.js';
import { isAppError } from '../errors/app-error.js';
import { FsBlobStore } from '../storage/blob-store.fs.js';
import { openDatabase, type DatabaseHandle } from '../storage/database.js';
import type { VoiceStatus, VoiceVersion } from '../storage/schema.js';
import { createEngineCatalog } from '../voices/engine-catalog.js';
import { VOICE_VERSIONS, VoiceService } from '../voices/voice-service.js';
import { VoiceStore } from '../voices/voice-store.js';
import { join } from 'node:path';

async function withDatabase<T>(fn: (db: DatabaseHandle) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const handle = await openDatabase({ dataDir: config.dataDir, databaseUrl: config.databaseUrl });
  try {
    return await fn(handle);
  } finally {
    await handle.close();
  }
}

function oneOf<T extends string>(allowed: readonly T[]) {
  return (value: string): T => {
    if (!(allowed as readonly string[]).includes(value))
      throw new InvalidArgumentError(`expected one of ${allowed.join(', ')}`);
    return value as T;
  };
}

const program = new Command('voicegen').description('Operator commands of the voice-generation service');

const accounts = program.command('accounts').description('manage accounts');
accounts
  .command('create <name>')
  .description('create an account')
  .action(async (name: string) =>
    withDatabase(async ({ db }) => {
      const account = await new AccountService(db).createAccount(name);
      console.log(`account ${account.name} created (id ${account.id})`);
    }),
  );
accounts
  .command('list')
  .description('list accounts')
  .action(async () =>
    withDatabase(async ({ db }) => {
      for (const a of await new AccountService(db).listAccounts())
        console.log(`${a.id}\t${a.name}\t${a.createdAt.toISOString()}`);
    }),
  );

const keys = program.command('keys').description('manage API keys');
keys
  .command('create <account>')
  .description('issue a key for an account (id or name); the key is printed once')
  .action(async (account: string) =>
    withDatabase(async ({ db }) => {
      const service = new AccountService(db);
      const { id } = await service.resolveAccount(account);
      const { key, info } = await service.createKey(id);
      console.log(key);
      console.error(`key ${info.id} created; it is shown only now — store it safely`);
    }),
  );
keys
  .command('list <account>')
  .description('list the keys of an account (prefixes only)')
  .action(async (account: string) =>
    withDatabase(async ({ db }) => {
      const service = new AccountService(db);
      const { id } = await service.resolveAccount(account);
      for (const k of await service.listKeys(id)) {
        console.log(
          `${k.id}\t${k.prefix}…\t${k.createdAt.toISOString()}\t${k.revokedAt ? `revoked ${k.revokedAt.toISOString()}` : 'active'}`,
        );
      }
    }),
  );
keys
  .command('revoke <keyId>')
  .description('revoke a key by its id')
  .action(async (keyId: string) =>
    withDatabase(async ({ db }) => {
      await new AccountService(db).revokeKey(keyId);
      console.log(`key ${keyId} revoked`);
    }),
  );

program
  .command('voices')
  .description('manage voices')
  .command('import <account>')
  .description('import a voice of any version (v1.0–v4.0), e.g. from an earlier installation')
  .requiredOption('--name <name>', 'voice name')
  .requiredOption('--version <version>', 'v1.0, v2.0, v3.0 or v4.0', oneOf<VoiceVersion>(VOICE_VERSIONS))
  .option('--language <tag>', 'language tag', 'en')
  .option('--description <text>', 'description')
  .option('--espeak-voice <name>', 'espeak-ng voice (default: the language default)')
  .option('--lora', 'the voice has professional-cloning (LoRA) artifacts', false)
  .option('--status <status>', 'ready or creating', oneOf<VoiceStatus>(['ready', 'creating']), 'ready')
  .action(
    async (
      account: string,
      opts: {
        name: string;
        version: VoiceVersion;
        language: string;
        description?: string;
        espeakVoice?: string;
        lora: boolean;
        status: VoiceStatus;
      },
    ) =>
      withDatabase(async ({ db }) => {
        const config = loadConfig();
        const { id } = await new AccountService(db).resolveAccount(account);
        const catalog = createEngineCatalog({
          espeak: await listEspeakVoices(),
          remoteEndpoints: Object.keys(config.remoteEngines),
        });
        const voices = new VoiceService(
          new VoiceStore(db),
          catalog,
          new FsBlobStore(join(config.dataDir, 'blobs')),
        );
        const voice = await voices.importVoice(id, {
          name: opts.name,
          version: opts.version,
          language: opts.language,
          description: opts.description,
          engine: opts.espeakVoice ? { engine: 'espeak', voice: opts.espeakVoice } : undefined,
          withLora: opts.lora,
          status: opts.status,
        });
        console.log(JSON.stringify(voice, null, 2));
      }),
  );

program.parseAsync().catch((err: unknown) => {
  console.error(`error: ${isAppError(err) || err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
