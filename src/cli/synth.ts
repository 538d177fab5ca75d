/**
 * `voicegen synth`: text, or a marked dialogue with a splitter, to an MP3 file — through the public
 * API of a running server (`--url/--key`), or in-process on the embedded engine with no server (an
 * app built on a temporary DATA_DIR, asked through the same routes with Fastify's inject), so both
 * modes run the one generation pipeline the service runs. Progress (pieces done, audio-seconds per wall-second)
 * comes from the task record as it is generated.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bindingFromSpec, parseVoiceSpec } from '../audio/engines/voice-spec.js';
import { parseData, type ApiCall } from './api-call.js';
import { CliError } from './cli-error.js';
import { watchTask } from './tasks.js';

/** Where synthesis runs: an API to call, and what to release afterwards. */
export interface SynthTarget {
  call: ApiCall;
  /** How often the task is read while it is generated: a server over the network is asked less often. */
  pollMs: number;
  close(): Promise<void>;
}

/** What to synthesise. */
export interface SynthRequest {
  text: string;
  /** A splitter config (dialogue mode) or a saved splitter's id; absent = one voice. */
  splitter?: { config: Record<string, unknown> } | { id: string };
  /** The voice of plain text: a voice id, or `<engine>:<voice>[+<choice>]` (e.g. espeak:en-us+f3). */
  voice: string;
  out: string;
  /** Seconds to wait for the task at most. */
  timeoutSeconds: number;
}

/** Progress of one synthesis, as often as the task record changes. */
export interface SynthProgress {
  piecesDone: number;
  pieces: number;
  audioSeconds: number;
  wallSeconds: number;
}

/** What a finished synthesis produced. */
export interface SynthSummary extends SynthProgress {
  taskId: string;
  /** Seconds of audio made per second of wall time (the inverse of a real-time factor). */
  audioSecondsPerWallSecond: number;
  file: string;
  bytes: number;
}

/** The catalogue's engines, as a voice spec needs them. */
type CatalogueEngine = Parameters<typeof bindingFromSpec>[1][number];

/** Voice ids for the `<engine>:<voice>` specs (created once per run, or found by name), others as they are. */
async function resolveVoices(call: ApiCall, specs: string[]): Promise<Map<string, string>> {
  const resolved = new Map<string, string>();
  const unique = [...new Set(specs)];
  if (!unique.some((spec) => parseVoiceSpec(spec) !== undefined)) return new Map(unique.map((s) => [s, s]));
  const engines = parseData<CatalogueEngine[]>(await call('GET', '/api/engines'), 'listing engines');
  const existing = parseData<{ id: string; name: string }[]>(
    await call('GET', '/api/voice?limit=50'),
    'listing voices',
  );
  for (const spec of unique) {
    if (parseVoiceSpec(spec) === undefined) {
      resolved.set(spec, spec);
      continue;
    }
    const found = existing.find((v) => v.name === spec);
    const id =
      found?.id ??
      parseData<{ id: string }>(
        await call('POST', '/api/voice', {
          name: spec,
          engine: bindingFromSpec(spec, engines, (message) => new CliError(message, 1)),
        }),
        `creating voice ${spec}`,
      ).id;
    resolved.set(spec, id);
  }
  return resolved;
}

/** The splitter config with its `<engine>:<voice>` specs replaced by voice ids. */
function withVoiceIds(config: Record<string, unknown>, ids: Map<string, string>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(config).map(([key, value]) => {
      if (value === null || typeof value !== 'object' || Array.isArray(value)) return [key, value];
      const entry = value as Record<string, unknown>;
      const voiceId = typeof entry.voiceId === 'string' ? ids.get(entry.voiceId) : undefined;
      return [key, voiceId === undefined ? entry : { ...entry, voiceId }];
    }),
  );
}

function voiceSpecsOf(config: Record<string, unknown>): string[] {
  return Object.values(config).flatMap((value) =>
    value !== null &&
    typeof value === 'object' &&
    typeof (value as { voiceId?: unknown }).voiceId === 'string'
      ? [(value as { voiceId: string }).voiceId]
      : [],
  );
}

/** Runs one synthesis on `target`, reporting progress, and writes the MP3 to `request.out`. */
export async function synthesize(
  target: SynthTarget,
  request: SynthRequest,
  onProgress: (progress: SynthProgress) => void = () => undefined,
): Promise<SynthSummary> {
  const { call } = target;
  const started = performance.now();
  let body: Record<string, unknown>;
  if (request.splitter === undefined) {
    const ids = await resolveVoices(call, [request.voice]);
    body = { contents: [{ type: 'text', text: request.text, voiceId: ids.get(request.voice) }] };
  } else if ('id' in request.splitter) {
    body = { text: request.text, splitterId: request.splitter.id };
  } else {
    const ids = await resolveVoices(call, voiceSpecsOf(request.splitter.config));
    body = { text: request.text, splitter: withVoiceIds(request.splitter.config, ids) };
  }
  const task = parseData<{ id: string }>(await call('POST', '/api/tts/generate', body), 'creating the task');
  const finished = await watchTask(
    call,
    task.id,
    { timeoutSeconds: request.timeoutSeconds, intervalMs: target.pollMs },
    ({ piecesDone, pieces, audioSeconds }) =>
      onProgress({ piecesDone, pieces, audioSeconds, wallSeconds: (performance.now() - started) / 1000 }),
  );
  if (finished.audio === undefined) throw new CliError('the generated task has no audio URL', 1);
  const audioUrl = new URL(finished.audio);
  const audio = await call('GET', `${audioUrl.pathname}${audioUrl.search}`);
  if (audio.status !== 200) throw new CliError(`downloading the audio: HTTP ${audio.status}`, 1);
  await writeFile(request.out, audio.body).catch((err: unknown) => {
    throw new CliError(`cannot write ${request.out}: ${err instanceof Error ? err.message : String(err)}`, 1);
  });
  const wallSeconds = (performance.now() - started) / 1000;
  return {
    piecesDone: finished.piecesDone,
    pieces: finished.pieces,
    // The audio of the whole task: the pieces and the silences between them.
    audioSeconds: finished.totalSeconds,
    wallSeconds,
    taskId: task.id,
    audioSecondsPerWallSecond: wallSeconds > 0 ? finished.totalSeconds / wallSeconds : 0,
    file: request.out,
    bytes: audio.body.length,
  };
}

/** A running server's public API at `url`, with `key`. Unreachable → exit code 2. */
export function remoteTarget(url: string, key: string): SynthTarget {
  const base = url.replace(/\/+$/, '');
  return {
    call: async (method, path, body) => {
      let response: Response;
      try {
        response = await fetch(`${base}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${key}`,
            ...(body !== undefined && { 'content-type': 'application/json' }),
          },
          ...(body !== undefined && { body: JSON.stringify(body) }),
          signal: AbortSignal.timeout(60_000),
        });
      } catch (err) {
        throw new CliError(`cannot reach ${base}: ${err instanceof Error ? err.message : String(err)}`, 2);
      }
      return { status: response.status, body: Buffer.from(await response.arrayBuffer()) };
    },
    pollMs: 200,
    close: async () => undefined,
  };
}

/**
 * The service itself in this process, on the embedded defaults and a temporary DATA_DIR (removed
 * afterwards), with one account: nothing listens, requests go through Fastify's inject.
 */
export async function inProcessTarget(voice?: string): Promise<SynthTarget> {
  // Loaded here: a remote synth never pays for the engine, the database and the workers.
  const [{ openDatabaseFor }, { loadConfig }] = await Promise.all([
    import('../adapters.js'),
    import('../config/config.js'),
  ]);
  const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-synth-'));
  // This machine's settings, but never a server's data, database, Redis, bucket or keys.
  const own = Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) =>
        !/^(DATA_DIR|DATABASE_URL|REDIS_URL|REDIS_PREFIX|S3_.*|NODE_URL|BOOTSTRAP_API_KEY|PORT)$/.test(name),
    ),
  );
  const config = loadConfig({
    ...own,
    DATA_DIR: dataDir,
    FIRST_RUN_ACCOUNT: 'false',
    LOG_LEVEL: 'silent',
    RATE_LIMIT_MAX: '1000000',
  });
  // The database opens in its own thread while the service's code loads; in memory, as nothing of
  // it outlives this command.
  const database = openDatabaseFor(config, { inMemory: true });
  database.catch(() => undefined);
  const { buildApp } = await import('../app.js');
  // The voice's threads start while the database opens (a spec's engine and voice; an id is looked up later).
  const spec = voice === undefined ? undefined : parseVoiceSpec(voice);
  const { voiceBindingSchema } = await import('../audio/engines/engine-registry.js');
  const binding = voiceBindingSchema.safeParse({ engine: spec?.engine, voice: spec?.voice });
  const warmUp = binding.success ? binding.data : undefined;
  const app = await buildApp(config, { logger: false, database, warmUp }).catch(async (err: unknown) => {
    await rm(dataDir, { recursive: true, force: true });
    throw err;
  });
  const account = await app.services.accounts.createAccount('synth');
  const { key } = await app.services.accounts.createKey(account.id);
  return {
    call: async (method, path, body) => {
      const res = await app.http.inject({
        method,
        url: path,
        headers: { authorization: `Bearer ${key}` },
        ...(body !== undefined && { payload: body as Record<string, unknown> }),
      });
      return { status: res.statusCode, body: res.rawPayload };
    },
    // A read in this process costs a fraction of a millisecond: the file is written as soon as the task is done.
    pollMs: 20,
    close: async () => {
      await app.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Reads the text: the value, a file (`@path`) or standard input (`-`). */
export async function readText(source: string): Promise<string> {
  try {
    if (source === '-') {
      const chunks: Buffer[] = [];
      for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks).toString('utf8');
    }
    if (source.startsWith('@')) return await readFile(source.slice(1), 'utf8');
    return source;
  } catch (err) {
    throw new CliError(
      `cannot read ${source.slice(1)}: ${err instanceof Error ? err.message : String(err)}`,
      1,
    );
  }
}

/** `--splitter`: a JSON file with a splitter config (or `{config}`), or a saved splitter's id. */
export async function readSplitter(
  value: string,
): Promise<{ config: Record<string, unknown> } | { id: string }> {
  if (!value.endsWith('.json')) return { id: value };
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(value, 'utf8'));
  } catch (err) {
    throw new CliError(
      `cannot read the splitter ${value}: ${err instanceof Error ? err.message : String(err)}`,
      1,
    );
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new CliError(`the splitter ${value} is not a JSON object`, 1);
  }
  const object = parsed as Record<string, unknown>;
  const config = object.config !== undefined && typeof object.config === 'object' ? object.config : object;
  return { config: config as Record<string, unknown> };
}
