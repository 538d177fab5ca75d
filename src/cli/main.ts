/**
 * Operator CLI: accounts, API keys, voice imports and neural models. With a server running, every command goes
 * through its /admin API (found via DATA_DIR/server.json, or --url/VOICEGEN_URL); otherwise the
 * CLI opens the database itself (see operator-connection.ts for the order).
 * Exit codes: 0 done, 1 the operation failed, 2 no usable target (server unreachable, token unknown).
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { SingleBar } from 'cli-progress';
import type { AdminOperations, VoiceImportRequest } from '../admin/admin-service.js';
import type { ModelRecord } from '../audio/engines/neural-install.js';
import type { AppConfig } from '../config/config.js';
import { isAppError } from '../errors/app-error.js';
import { VOICE_VERSIONS, type VoiceVersion } from '../storage/schema.js';
import type { Voice } from '../voices/voice-service.js';
import { CliError } from './cli-error.js';
import type { SynthProgress, SynthTarget } from './synth.js';

// Only what the command line itself needs is imported above: a command loads the modules it uses
// (the database, the engines, the HTTP clients) when it runs, so `--help` and a mistyped option
// answer at once.

/** This machine's configuration (DATA_DIR, DATABASE_URL, …), loaded when a command needs it. */
async function config(): Promise<AppConfig> {
  const { loadConfig } = await import('../config/config.js');
  return loadConfig();
}

/** A progress bar on standard error in `format`, or undefined when it is not a terminal (or `json`). */
async function progressBar(json: boolean, format: string): Promise<SingleBar | undefined> {
  if (json || !process.stderr.isTTY) return undefined;
  const { Presets, SingleBar } = await import('cli-progress');
  return new SingleBar({ format, hideCursor: true }, Presets.shades_classic);
}

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

/**
 * Runs `fn` against the running server's admin API or, without a server, the database, after one
 * line on standard error naming which (a command run against the wrong DATA_DIR shows at once).
 */
async function withOperations(
  fn: (operations: AdminOperations) => Promise<void>,
  options: { createDataDir?: boolean } = {},
): Promise<void> {
  const globals = program.opts<{ url?: string; adminToken?: string }>();
  const { connectOperator } = await import('./operator-connection.js');
  const connection = await connectOperator({
    url: globals.url,
    adminToken: globals.adminToken,
    config,
    createDataDir: options.createDataDir,
  });
  console.error(`voicegen: using ${connection.target}`);
  try {
    await fn(connection.operations);
  } finally {
    await connection.close();
  }
}

/** Prints `value` as JSON for scripts (`--json`), else `text` for people. */
function print(json: boolean, value: unknown, text: () => string): void {
  console.log(json ? JSON.stringify(value, null, 2) : text());
}

program
  .command('init')
  .description(
    'create the embedded database in DATA_DIR (the folder too) before the first start; other commands ' +
      'refuse a DATA_DIR that does not exist',
  )
  .action(async () =>
    withOperations(
      async (ops) => {
        const count = (await ops.listAccounts()).length;
        console.log(`ready: ${(await config()).dataDir} (${count} account(s))`);
      },
      { createDataDir: true },
    ),
  );

const accounts = program.command('accounts').description('manage accounts');
accounts
  .command('create <name>')
  .description('create an account')
  .option('--json', 'print the account as JSON', false)
  .action(async (name: string, opts: { json: boolean }) =>
    withOperations(async (ops) => {
      const account = await ops.createAccount({ name });
      print(opts.json, account, () => `account ${account.name} created (id ${account.id})`);
    }),
  );
accounts
  .command('list')
  .description('list accounts')
  .option('--json', 'print the accounts as a JSON array', false)
  .action(async (opts: { json: boolean }) =>
    withOperations(async (ops) => {
      const list = await ops.listAccounts();
      print(opts.json, list, () => list.map((a) => `${a.id}\t${a.name}\t${a.createdAt}`).join('\n'));
    }),
  );

const keys = program.command('keys').description('manage API keys');
keys
  .command('create <account>')
  .description('issue a key for an account (id or name); the key is printed once')
  .option('--json', 'print the key record (with the key) as JSON', false)
  .action(async (account: string, opts: { json: boolean }) =>
    withOperations(async (ops) => {
      const issued = await ops.createKey(account);
      print(opts.json, issued, () => issued.key);
      console.error(`key ${issued.id} created; it is shown only now — store it safely`);
    }),
  );
keys
  .command('list <account>')
  .description('list the keys of an account (prefixes only)')
  .option('--json', 'print the keys as a JSON array', false)
  .action(async (account: string, opts: { json: boolean }) =>
    withOperations(async (ops) => {
      const list = await ops.listKeys(account);
      print(opts.json, list, () =>
        list
          .map(
            (k) =>
              `${k.id}\t${k.prefix}…\t${k.createdAt}\t${k.revokedAt !== null ? `revoked ${k.revokedAt}` : 'active'}`,
          )
          .join('\n'),
      );
    }),
  );
keys
  .command('revoke <keyId>')
  .description('revoke a key by its id')
  .option('--json', 'print {id, revoked} as JSON', false)
  .action(async (keyId: string, opts: { json: boolean }) =>
    withOperations(async (ops) => {
      await ops.revokeKey(keyId);
      print(opts.json, { id: keyId, revoked: true }, () => `key ${keyId} revoked`);
    }),
  );

const voices = program.command('voices').description('manage voices');
voices
  .command('import <account>')
  .description(
    'import a voice of any version (v1.0–v4.0) from the options, or every voice of a file written by `voices export`',
  )
  .option('--from <file>', 'a JSON file from `voices export` (or - for standard input)')
  .option('--name <name>', 'voice name')
  .option('--version <version>', 'v1.0, v2.0, v3.0 or v4.0', oneOf<VoiceVersion>(VOICE_VERSIONS))
  .option('--language <tag>', 'language tag', 'en')
  .option('--description <text>', 'description')
  .option(
    '--voice <spec>',
    'a voice of the catalogue, <engine>:<voice>[+<variant>] (`voicegen engines --voices`; default: the language default)',
  )
  .option('--espeak-voice <name>', 'shorthand of --voice espeak:<name>')
  .option('--lora', 'the voice has professional-cloning (LoRA) artifacts', false)
  .option('--status <status>', 'ready or creating', oneOf(['ready', 'creating'] as const), 'ready')
  .option('--json', 'print the imported voices as a JSON array (one voice: the object)', false)
  .action(
    async (
      account: string,
      opts: {
        from?: string;
        name?: string;
        version?: VoiceVersion;
        language: string;
        description?: string;
        voice?: string;
        espeakVoice?: string;
        lora: boolean;
        status: 'ready' | 'creating';
        json: boolean;
      },
    ) => {
      let requests: VoiceImportRequest[];
      if (opts.from !== undefined) {
        const { readVoiceExport } = await import('./voice-export-file.js');
        requests = await readVoiceExport(opts.from);
      } else {
        if (opts.name === undefined || opts.version === undefined)
          throw new CliError('give --name and --version, or --from <file>', 1);
        requests = [
          {
            name: opts.name,
            version: opts.version,
            language: opts.language,
            description: opts.description,
            voice: opts.voice,
            espeakVoice: opts.espeakVoice,
            lora: opts.lora,
            status: opts.status,
          },
        ];
      }
      await withOperations(async (ops) => {
        const imported: Voice[] = [];
        for (const request of requests) imported.push(await ops.importVoice(account, request));
        if (opts.from === undefined) console.log(JSON.stringify(imported[0], null, 2));
        else
          print(opts.json, imported, () =>
            [
              ...imported.map((v) => `${v.id}\t${v.version}\t${v.name}`),
              `${imported.length} voice(s) imported`,
            ].join('\n'),
          );
      });
    },
  );
voices
  .command('export <account>')
  .description(
    "write an account's voices as JSON that `voices import --from` takes (another install, another account)",
  )
  .option('-o, --out <file>', 'the file to write (default: standard output)')
  .action(async (account: string, opts: { out?: string }) =>
    withOperations(async (ops) => {
      const list = await ops.exportVoices(account);
      const json = `${JSON.stringify(list, null, 2)}\n`;
      if (opts.out === undefined) process.stdout.write(json);
      else {
        await writeFile(opts.out, json);
        console.error(`${list.length} voice(s) written to ${opts.out}`);
      }
    }),
  );

/** The server for tenant commands: --url, else the one running on DATA_DIR; and the key. */
async function tenantTarget(key: string | undefined): Promise<SynthTarget> {
  if (key === undefined) throw new CliError('give an API key with --key or VOICEGEN_KEY', 2);
  let url = program.opts<{ url?: string }>().url;
  if (url === undefined) {
    const { readServerFile } = await import('../http/server-file.js');
    url = (await readServerFile((await config()).dataDir))?.url;
  }
  if (url === undefined)
    throw new CliError('no server is running on DATA_DIR: give its address with --url', 2);
  const { remoteTarget } = await import('./synth.js');
  console.error(`voicegen: using the server at ${url}`);
  return remoteTarget(url, key);
}

/** One line per model folder: name, availability (or why not), family, rate, voices. */
function formatModels(list: readonly ModelRecord[]): string {
  return list
    .map((m) =>
      m.available
        ? [
            m.name,
            'available',
            m.family,
            `${m.sampleRate ?? ''} Hz`,
            `voices: ${(m.speakers ?? []).join(', ')}`,
          ].join('\t')
        : [m.name, `unavailable: ${m.reason ?? ''}`].join('\t'),
    )
    .join('\n');
}

const models = program
  .command('models')
  .description('manage the neural voice models of MODELS_DIR (sherpa-onnx model folders)');
models
  .command('add <archive>')
  .description(
    'unpack a .tar.bz2/.tar.gz model archive (an http(s) URL or a file) into MODELS_DIR; a running server lists it at once',
  )
  .option('--sha256 <hex>', "the archive's expected SHA-256: another archive is refused")
  .option('--name <name>', "the model's folder name (its engine id); default: the archive's folder")
  .option('--json', 'print the model as JSON', false)
  .action(async (archive: string, opts: { sha256?: string; name?: string; json: boolean }) =>
    withOperations(async (ops) => {
      // A server unpacks a file path on its own machine: give it the absolute path.
      const source = /^[a-z][a-z0-9+.-]*:\/\//i.test(archive) ? archive : resolve(archive);
      const model = await ops.addModel({ source, sha256: opts.sha256, name: opts.name });
      print(
        opts.json,
        model,
        () => `model ${model.name} added (voices: ${(model.speakers ?? []).join(', ')})`,
      );
    }),
  );
models
  .command('list')
  .description('list the model folders, unavailable ones with the reason')
  .option('--json', 'print the models as a JSON array', false)
  .action(async (opts: { json: boolean }) =>
    withOperations(async (ops) => {
      const list = await ops.listModels();
      print(opts.json, list, () => formatModels(list));
    }),
  );
models
  .command('remove <name>')
  .description('remove a model folder (voices bound to it fail until it is back)')
  .option('--json', 'print {name, removed} as JSON', false)
  .action(async (name: string, opts: { json: boolean }) =>
    withOperations(async (ops) => {
      await ops.removeModel(name);
      print(opts.json, { name, removed: true }, () => `model ${name} removed`);
    }),
  );

const keyOption = () => new Option('--key <key>', 'an API key of the account').env('VOICEGEN_KEY');
const tasks = program
  .command('tasks')
  .description("an account's generation tasks (through a running server)");
tasks
  .command('list')
  .description('list tasks, newest first')
  .addOption(keyOption())
  .option(
    '--status <status>',
    'only tasks in this state',
    oneOf(['pending', 'processing', 'generated', 'failed'] as const),
  )
  .option('--limit <n>', 'tasks per page (1–50)', (v) => Number(v), 20)
  .option('--offset <n>', 'tasks to skip', (v) => Number(v), 0)
  .option('--json', 'print {items, total} as JSON', false)
  .action(async (opts: { key?: string; status?: string; limit: number; offset: number; json: boolean }) => {
    const target = await tenantTarget(opts.key);
    const { formatTaskTable, listTasks } = await import('./tasks.js');
    const page = await listTasks(target.call, opts);
    print(opts.json, page, () => formatTaskTable(page));
  });
tasks
  .command('watch <id>')
  .description('follow a task until it is generated or failed (exit 1 when it fails)')
  .addOption(keyOption())
  .option('--timeout <seconds>', 'give up after this long', (v) => Number(v), 3600)
  .option('--json', 'print one JSON line per change of progress (no progress bar)', false)
  .action(async (id: string, opts: { key?: string; timeout: number; json: boolean }) => {
    if (!Number.isFinite(opts.timeout) || opts.timeout <= 0)
      throw new CliError('--timeout must be a positive number', 1);
    const target = await tenantTarget(opts.key);
    const { watchTask } = await import('./tasks.js');
    const bar = await progressBar(opts.json, '{status} {bar} {value}/{total} pieces | {audio} s of audio');
    let started = false;
    try {
      const last = await watchTask(target.call, id, { timeoutSeconds: opts.timeout }, (p) => {
        if (opts.json) console.log(JSON.stringify(p));
        else if (bar === undefined)
          console.error(
            `${p.status}: ${p.piecesDone}/${p.pieces} pieces, ${p.audioSeconds.toFixed(1)} s of audio`,
          );
        else {
          const payload = { status: p.status.padEnd(10), audio: p.audioSeconds.toFixed(1) };
          if (!started) bar.start(Math.max(1, p.pieces), p.piecesDone, payload);
          started = true;
          bar.setTotal(Math.max(1, p.pieces));
          bar.update(p.piecesDone, payload);
        }
      });
      bar?.stop();
      if (!opts.json) console.log(`task ${last.id} generated: ${last.audio ?? ''}`);
    } finally {
      bar?.stop();
    }
  });

program
  .command('engines')
  .description(
    'the voice catalogue: engines and their availability, or their voices (through a running server with ' +
      '--key; without a key, the engines this machine would run)',
  )
  .addOption(keyOption())
  .option('--voices', 'list the voices instead of the engines', false)
  .option('--engine <id>', 'voices of this engine (or of this kind of engine, e.g. remote)')
  .option('--language <tag>', 'voices speaking this language (en also matches en-us)')
  .option('--json', 'print the list as JSON', false)
  .action(
    async (opts: { key?: string; voices: boolean; engine?: string; language?: string; json: boolean }) => {
      const { apiCatalogue, formatEngines, formatVoices, localCatalogue } = await import('./catalogue.js');
      const source =
        opts.key === undefined
          ? await localCatalogue(await config())
          : apiCatalogue((await tenantTarget(opts.key)).call);
      try {
        if (opts.voices) {
          const voices = await source.voices({ engine: opts.engine, language: opts.language });
          print(opts.json, voices, () => formatVoices(voices));
        } else {
          const engines = await source.engines();
          print(opts.json, engines, () => formatEngines(engines));
        }
      } finally {
        await source.close();
      }
    },
  );

program
  .command('synth <text>')
  .description(
    'speak a text (the text itself, @file, or - for standard input) into an MP3 file: in this process on the ' +
      'embedded engine, or through a running server with --url and --key',
  )
  .requiredOption('-o, --out <file>', 'the MP3 file to write')
  .option(
    '--voice <voice>',
    'voice id, or <engine>:<voice>[+<variant>] of the voice catalogue (`voicegen engines --voices`; e.g. espeak:en-us+f3); default: the default English voice',
    'flite:kal16',
  )
  .option(
    '--splitter <splitter>',
    'dialogue mode: a splitter config JSON file (its voiceId values may be <engine>:<voice> specs) or a saved splitter id',
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
      const { inProcessTarget, readSplitter, readText, remoteTarget, synthesize } =
        await import('./synth.js');
      const text = await readText(textSource);
      if (text.trim() === '') throw new CliError('the text is empty', 1);
      const splitter = opts.splitter === undefined ? undefined : await readSplitter(opts.splitter);
      if (splitter !== undefined && 'id' in splitter && server === undefined) {
        throw new CliError('a saved splitter id needs --url (in-process, give a splitter JSON file)', 1);
      }
      console.error(
        server !== undefined
          ? `voicegen: using the server at ${server}`
          : 'voicegen: synthesising in this process (its own engines and a temporary database; --url for a server)',
      );
      const target =
        server !== undefined
          ? remoteTarget(server, opts.key ?? '')
          : await inProcessTarget(splitter === undefined ? opts.voice : undefined);
      const bar = await progressBar(
        opts.json,
        'pieces {bar} {value}/{total} | {audio} s of audio | {speed} audio-s per wall-s',
      );
      let barStarted = false;
      const onProgress = (p: SynthProgress) => {
        if (bar === undefined) return;
        const payload = {
          audio: p.audioSeconds.toFixed(1),
          speed: p.wallSeconds > 0 ? (p.audioSeconds / p.wallSeconds).toFixed(1) : '0',
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
              `(${summary.audioSecondsPerWallSecond.toFixed(1)} audio-seconds per wall-second)`,
          );
        }
      } finally {
        bar?.stop();
        await target.close();
      }
    },
  );

program.parseAsync().catch((err: unknown) => {
  // ConfigError by name: its module is loaded only by the commands that read the configuration.
  const known =
    err instanceof CliError || (err instanceof Error && err.name === 'ConfigError') || isAppError(err);
  console.error(`error: ${known || err instanceof Error ? err.message : String(err)}`);
  // A data dir held by a process that wrote no server file (e.g. a server still starting) is no target either.
  const noTarget =
    err instanceof CliError ? err.exitCode === 2 : err instanceof Error && err.name === 'DataDirLockedError';
  process.exit(noTarget ? 2 : 1);
});
