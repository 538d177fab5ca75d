/**
 * Operator CLI: accounts, API keys and voice imports. With a server running, every command goes
 * through its /admin API (found via DATA_DIR/server.json, or --url/VOICEGEN_URL); otherwise the
 * CLI opens the database itself (see operator-connection.ts for the order).
 * Exit codes: 0 done, 1 the operation failed, 2 no usable target (server unreachable, token unknown).
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import type { AdminOperations } from '../admin/admin-service.js';
import { ConfigError, loadConfig } from '../config/config.js';
import { isAppError } from '../errors/app-error.js';
import type { VoiceVersion } from '../storage/schema.js';
import { VOICE_VERSIONS } from '../voices/voice-service.js';
import { CliError } from './cli-error.js';
import { connectOperator } from './operator-connection.js';

function oneOf<T extends string>(allowed: readonly T[]) {
  return (value: string): T => {
    if (!(allowed as readonly string[]).includes(value))
      throw new InvalidArgumentError(`expected one of ${allowed.join(', ')}`);
    return value as T;
  };
}

const program = new Command('voicegen')
  .description('Operator commands of the voice-generation service')
  .addOption(
    new Option('--url <url>', 'admin API of a running server (default: the one found in DATA_DIR)').env(
      'VOICEGEN_URL',
    ),
  )
  .addOption(new Option('--admin-token <token>', 'admin token of that server').env('ADMIN_TOKEN'))
  .addHelpText(
    'after',
    '\nWith a server running on DATA_DIR, commands go through its admin API; otherwise the CLI opens the\n' +
      'database itself. Exit codes: 0 done, 1 the operation failed, 2 no usable server or database.',
  );

/** Runs `fn` against the running server's admin API or, without a server, the database. */
async function withOperations(fn: (operations: AdminOperations) => Promise<void>): Promise<void> {
  const globals = program.opts<{ url?: string; adminToken?: string }>();
  const connection = await connectOperator({
    url: globals.url,
    adminToken: globals.adminToken,
    config: () => loadConfig(),
  });
  try {
    await fn(connection.operations);
  } finally {
    await connection.close();
  }
}

const accounts = program.command('accounts').description('manage accounts');
accounts
  .command('create <name>')
  .description('create an account')
  .action(async (name: string) =>
    withOperations(async (ops) => {
      const account = await ops.createAccount({ name });
      console.log(`account ${account.name} created (id ${account.id})`);
    }),
  );
accounts
  .command('list')
  .description('list accounts')
  .action(async () =>
    withOperations(async (ops) => {
      for (const a of await ops.listAccounts()) console.log(`${a.id}\t${a.name}\t${a.createdAt}`);
    }),
  );

const keys = program.command('keys').description('manage API keys');
keys
  .command('create <account>')
  .description('issue a key for an account (id or name); the key is printed once')
  .action(async (account: string) =>
    withOperations(async (ops) => {
      const issued = await ops.createKey(account);
      console.log(issued.key);
      console.error(`key ${issued.id} created; it is shown only now — store it safely`);
    }),
  );
keys
  .command('list <account>')
  .description('list the keys of an account (prefixes only)')
  .action(async (account: string) =>
    withOperations(async (ops) => {
      for (const k of await ops.listKeys(account)) {
        console.log(
          `${k.id}\t${k.prefix}…\t${k.createdAt}\t${k.revokedAt !== null ? `revoked ${k.revokedAt}` : 'active'}`,
        );
      }
    }),
  );
keys
  .command('revoke <keyId>')
  .description('revoke a key by its id')
  .action(async (keyId: string) =>
    withOperations(async (ops) => {
      await ops.revokeKey(keyId);
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
  .option('--status <status>', 'ready or creating', oneOf(['ready', 'creating'] as const), 'ready')
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
        status: 'ready' | 'creating';
      },
    ) =>
      withOperations(async (ops) => {
        const voice = await ops.importVoice(account, {
          name: opts.name,
          version: opts.version,
          language: opts.language,
          description: opts.description,
          espeakVoice: opts.espeakVoice,
          lora: opts.lora,
          status: opts.status,
        });
        console.log(JSON.stringify(voice, null, 2));
      }),
  );

program.parseAsync().catch((err: unknown) => {
  const known = err instanceof CliError || err instanceof ConfigError || isAppError(err);
  console.error(`error: ${known || err instanceof Error ? err.message : String(err)}`);
  // A data dir held by a process that wrote no server file (e.g. a server still starting) is no target either.
  const noTarget =
    err instanceof CliError ? err.exitCode === 2 : err instanceof Error && err.name === 'DataDirLockedError';
  process.exit(noTarget ? 2 : 1);
});
