/**
 * Operator CLI: accounts, API keys and voice imports. With a server running, every command goes
 * through its /admin API (found via DATA_DIR/server.json, or --url/VOICEGEN_URL); otherwise the
 * CLI opens the database itself (see operator-connection.ts for the order).
 * Exit codes: 0 done, 1 the operation failed, 2 no usable target (server unreachable, token unknown).
 */
import { Presets, SingleBar } from 'cli-progress';
import { Command, InvalidArgumentError, Option } from 'commander';
import type { AdminOperations } from '../admin/admin-service.js';
import { ConfigError, loadConfig } from '../config/config.js';
import { isAppError } from '../errors/app-error.js';
import type { VoiceVersion } from '../storage/schema.js';
import { VOICE_VERSIONS } from '../voices/voice-service.js';
import { CliError } from './cli-error.js';
import { connectOperator } from './operator-connection.js';
import {
  inProcessTarget,
  readSplitter,
  readText,
  remoteTarget,
  synthesize,
  type SynthProgress,
} from './synth.js';

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

program
  .command('synth <text>')
  .description(
    'speak a text (the text itself, @file, or - for standard input) into an MP3 file: in this process on the ' +
      'embedded engine, or through a running server with --url and --key',
  )
  .requiredOption('-o, --out <file>', 'the MP3 file to write')
  .option('--voice <voice>', 'voice id, or espeak:<voice>[+<variant>] (e.g. espeak:en-us+f3)', 'espeak:en-us')
  .option(
    '--splitter <splitter>',
    'dialogue mode: a splitter config JSON file (its voiceId values may be espeak:… specs) or a saved splitter id',
  )
  .addOption(new Option('--key <key>', 'an API key of the server given with --url').env('VOICEGEN_KEY'))
  .option('--timeout <seconds>', 'give up after this long', (v) => Number(v), 600)
  .option('--json', 'print one JSON summary for scripts (no progress bar)', false)
  .action(
    async (
      textSource: string,
      opts: {
        out: string;
        voice: string;
        splitter?: string;
        key?: string;
        timeout: number;
        json: boolean;
      },
    ) => {
      if (!Number.isFinite(opts.timeout) || opts.timeout <= 0)
        throw new CliError('--timeout must be a positive number', 1);
      // The server: the global --url (VOICEGEN_URL); in-process without it.
      const server = program.opts<{ url?: string }>().url;
      if (server !== undefined && opts.key === undefined)
        throw new CliError('--url needs --key for synth', 2);
      const text = await readText(textSource);
      if (text.trim() === '') throw new CliError('the text is empty', 1);
      const splitter = opts.splitter === undefined ? undefined : await readSplitter(opts.splitter);
      if (splitter !== undefined && 'id' in splitter && server === undefined) {
        throw new CliError('a saved splitter id needs --url (in-process, give a splitter JSON file)', 1);
      }
      const target = server !== undefined ? remoteTarget(server, opts.key ?? '') : await inProcessTarget();
      const bar =
        !opts.json && process.stderr.isTTY
          ? new SingleBar(
              {
                format: 'pieces {bar} {value}/{total} | {audio} s of audio | {rtf}× real time',
                hideCursor: true,
              },
              Presets.shades_classic,
            )
          : undefined;
      let barStarted = false;
      const onProgress = (p: SynthProgress) => {
        if (bar === undefined) return;
        const payload = {
          audio: p.audioSeconds.toFixed(1),
          rtf: p.wallSeconds > 0 ? (p.audioSeconds / p.wallSeconds).toFixed(1) : '0',
        };
        if (!barStarted) {
          bar.start(Math.max(1, p.pieces), p.piecesDone, payload);
          barStarted = true;
        }
        bar.setTotal(Math.max(1, p.pieces));
        bar.update(p.piecesDone, payload);
      };
      try {
        const summary = await synthesize(
          target,
          {
            text,
            voice: opts.voice,
            out: opts.out,
            timeoutSeconds: opts.timeout,
            ...(splitter !== undefined && { splitter }),
          },
          onProgress,
        );
        bar?.stop();
        if (opts.json) console.log(JSON.stringify(summary));
        else {
          console.log(
            `${summary.file}: ${summary.pieces} piece(s), ${summary.audioSeconds.toFixed(2)} s of audio, ` +
              `${(summary.bytes / 1024).toFixed(0)} KiB, in ${summary.wallSeconds.toFixed(2)} s ` +
              `(${summary.realtimeFactor.toFixed(1)}× real time)`,
          );
        }
      } finally {
        bar?.stop();
        await target.close();
      }
    },
  );

program.parseAsync().catch((err: unknown) => {
  const known = err instanceof CliError || err instanceof ConfigError || isAppError(err);
  console.error(`error: ${known || err instanceof Error ? err.message : String(err)}`);
  // A data dir held by a process that wrote no server file (e.g. a server still starting) is no target either.
  const noTarget =
    err instanceof CliError ? err.exitCode === 2 : err instanceof Error && err.name === 'DataDirLockedError';
  process.exit(noTarget ? 2 : 1);
});
