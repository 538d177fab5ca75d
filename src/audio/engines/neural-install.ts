/**
 * Adding and removing neural model folders of MODELS_DIR: `voicegen models add` and the admin API.
 * An archive (`.tar.bz2` or `.tar.gz`, the layout sherpa-onnx publishes: one folder holding the
 * model) is read from a URL or a file as a stream, hashed and counted as it arrives, unpacked into a
 * hidden staging folder of MODELS_DIR (entries that would land outside it, links and special files
 * are refused), checked with the start-up scan's check, and only then moved to its name. Nothing is
 * left behind by an archive that fails.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Readable, type Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { extract } from 'tar-stream';
import unbzip2 from 'unbzip2-stream';
import { AppError, errors } from '../../errors/app-error.js';
import { MODEL_NAME, readModel, scanModels, type NeuralModel, type ScannedModel } from './neural-models.js';

/** Default of MODELS_MAX_ARCHIVE_BYTES: the largest published Kokoro archive unpacks to about 1 GiB. */
export const DEFAULT_MODEL_ARCHIVE_BYTES = 4 * 1024 ** 3;

/** How long a download may take before it is abandoned. */
const DOWNLOAD_TIMEOUT_MS = 30 * 60_000;

export interface ModelInstallOptions {
  modelsDir: string;
  /** Bytes the archive and, separately, its unpacked files may take (MODELS_MAX_ARCHIVE_BYTES). */
  maxBytes: number;
  /** Expected SHA-256 of the archive (hex): a different archive is refused. */
  sha256?: string | undefined;
  /** The model's folder name (its engine id); default: the archive's top folder. */
  name?: string | undefined;
}

const bad = (message: string) => errors.invalidValue(message);

/** Unpacks the archive at `source` (an http(s) URL or a file path) as a model of `modelsDir`. */
export async function installModel(source: string, options: ModelInstallOptions): Promise<NeuralModel> {
  const expected = options.sha256?.toLowerCase();
  if (expected !== undefined && !/^[0-9a-f]{64}$/.test(expected)) {
    throw bad('sha256 must be 64 hexadecimal digits');
  }
  if (options.name !== undefined && !MODEL_NAME.test(options.name)) {
    throw bad('name must be 1–64 letters, digits, "-" or "_" (it is the engine id)');
  }
  await mkdir(options.modelsDir, { recursive: true });
  const staging = join(options.modelsDir, `.incoming-${randomBytes(6).toString('hex')}`);
  await mkdir(staging);
  try {
    const digest = await unpack(await openSource(source, options.maxBytes), staging, options.maxBytes);
    if (expected !== undefined && digest !== expected) {
      throw bad(`the archive's SHA-256 is ${digest}, not the expected ${expected}`);
    }
    const top = await readdir(staging, { withFileTypes: true });
    const single = top.length === 1 && top[0]?.isDirectory() === true ? top[0].name : undefined;
    const folder = single === undefined ? staging : join(staging, single);
    const name = options.name ?? single ?? archiveStem(source);
    if (!MODEL_NAME.test(name)) {
      throw bad(`"${name}" cannot name a model (1–64 letters, digits, "-" or "_"): give --name`);
    }
    const target = join(options.modelsDir, name);
    if (await exists(target)) throw errors.conflict(`a model named "${name}" is already in MODELS_DIR`);
    const checked = await readModel(folder, name);
    if (!checked.available) throw bad(`the archive is not a model this service runs: ${checked.reason}`);
    await rename(folder, target);
    const installed = await readModel(target, name);
    if (!installed.available) throw bad(`the model's folder could not be read: ${installed.reason}`);
    return installed;
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** Removes the model folder `name` of `modelsDir`; RESOURCE_NOT_FOUND when there is none. */
export async function removeModel(modelsDir: string, name: string): Promise<void> {
  if (!MODEL_NAME.test(name) || !(await exists(join(modelsDir, name)))) {
    throw errors.notFound('RESOURCE_NOT_FOUND', `model "${name}"`);
  }
  await rm(join(modelsDir, name), { recursive: true, force: true });
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

/** The archive's file name without its extensions (a URL's last path segment). */
function archiveStem(source: string): string {
  const last = /^https?:\/\//i.test(source)
    ? (new URL(source).pathname.split('/').at(-1) ?? '')
    : basename(source);
  return last.replace(/\.(tar\.bz2|tbz2?|tar\.gz|tgz)$/i, '');
}

/** The archive's bytes: a download (refused early when it announces more than `maxBytes`) or a file. */
async function openSource(source: string, maxBytes: number): Promise<Readable> {
  if (/^https?:\/\//i.test(source)) {
    let res: Response;
    try {
      res = await fetch(source, { signal: AbortSignal.timeout(DOWNLOAD_TIMEOUT_MS), redirect: 'follow' });
    } catch (err) {
      throw bad(`could not download ${source} (${err instanceof Error ? err.message : String(err)})`);
    }
    if (!res.ok || res.body === null) {
      await res.body?.cancel();
      throw bad(`could not download ${source}: HTTP ${res.status}`);
    }
    const length = Number(res.headers.get('content-length') ?? NaN);
    if (length > maxBytes) {
      await res.body.cancel();
      throw tooLarge(maxBytes);
    }
    return Readable.fromWeb(res.body);
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(source)) throw bad('a model archive is an http(s) URL or a file path');
  try {
    if (!(await stat(source)).isFile()) throw bad(`${source} is not a file`);
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw bad(`cannot read ${source} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  return createReadStream(source);
}

const tooLarge = (maxBytes: number) =>
  bad(`the model archive is larger than MODELS_MAX_ARCHIVE_BYTES (${maxBytes} bytes)`);

/**
 * Unpacks `input` (.tar.bz2 or .tar.gz, told apart by their first bytes) into `dir`; resolves with
 * the SHA-256 (hex) of every byte of `input`. Both the archive and its unpacked files are bounded
 * by `maxBytes`.
 */
async function unpack(input: Readable, dir: string, maxBytes: number): Promise<string> {
  const hash = createHash('sha256');
  let read = 0;
  const source = input[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const first = await source.next();
  if (first.done === true) throw bad('the model archive is empty');
  const head = first.value;
  let decoder: Transform;
  if (head[0] === 0x42 && head[1] === 0x5a && head[2] === 0x68) decoder = unbzip2();
  else if (head[0] === 0x1f && head[1] === 0x8b) decoder = createGunzip();
  else throw bad('the model archive is neither .tar.bz2 nor .tar.gz');
  const metered = Readable.from(
    (async function* () {
      for (let chunk: Buffer | undefined = head; chunk !== undefined;) {
        read += chunk.length;
        if (read > maxBytes) throw tooLarge(maxBytes);
        hash.update(chunk);
        yield chunk;
        const next = await source.next();
        chunk = next.done === true ? undefined : next.value;
      }
    })(),
  );
  const entries = extract();
  const feeding = pipeline(metered, decoder, entries);
  // Its failure is read below, after the entries (a truncated archive fails both).
  feeding.catch(() => undefined);
  let written = 0;
  try {
    for await (const entry of entries) {
      const { name, type } = entry.header;
      const path = safePath(dir, name);
      if (type === 'directory') {
        await mkdir(path, { recursive: true });
        entry.resume();
      } else if (type === 'file' || type === 'contiguous-file') {
        await mkdir(dirname(path), { recursive: true });
        await pipeline(
          entry,
          async function* (chunks: AsyncIterable<unknown>) {
            for await (const chunk of chunks as AsyncIterable<Buffer>) {
              written += chunk.length;
              if (written > maxBytes) throw tooLarge(maxBytes);
              yield chunk;
            }
          },
          createWriteStream(path, { flags: 'wx' }),
        );
      } else if (type === 'symlink' || type === 'link') {
        throw bad(`the model archive holds a link (${name}): links are not accepted`);
      } else {
        // Headers of other kinds (a directory's extended attributes) carry no model file.
        entry.resume();
      }
    }
    await feeding;
  } catch (err) {
    input.destroy();
    if (err instanceof AppError) throw err;
    throw bad(
      `the model archive could not be unpacked (${err instanceof Error ? err.message : String(err)})`,
    );
  }
  return hash.digest('hex');
}

/** Where an entry named `name` goes in `dir`; refuses names that would land anywhere else. */
function safePath(dir: string, name: string): string {
  const parts = name.replace(/^\.\//, '').split('/');
  if (
    name.startsWith('/') ||
    name.includes('\\') ||
    name.includes('\0') ||
    parts.some((p) => p === '..') ||
    /^[A-Za-z]:/.test(name)
  ) {
    throw bad(`the model archive holds an entry outside its folder ("${name}")`);
  }
  const kept = parts.filter((p) => p !== '' && p !== '.');
  return kept.length === 0 ? dir : join(dir, ...kept);
}

/** A model folder as the operator sees it (`models list`, the admin API). */
export interface ModelRecord {
  name: string;
  available: boolean;
  /** Why it cannot be used, when unavailable. */
  reason?: string;
  family?: string;
  sampleRate?: number;
  speakers?: string[];
  languages?: string[];
}

/** What `models add` takes: an http(s) URL or a file path on the machine that unpacks it. */
export interface AddModelRequest {
  source: string;
  sha256?: string | undefined;
  name?: string | undefined;
}

/** The model operations of the operator: on MODELS_DIR itself, then `changed` (a rescan). */
export interface ModelOperations {
  list(): Promise<ModelRecord[]>;
  add(request: AddModelRequest): Promise<ModelRecord>;
  remove(name: string): Promise<void>;
}

export function modelRecord(model: ScannedModel): ModelRecord {
  if (!model.available) return { name: model.name, available: false, reason: model.reason };
  return {
    name: model.name,
    available: true,
    family: model.family,
    sampleRate: model.sampleRate,
    speakers: model.speakers,
    languages: model.languages,
  };
}

/** Model operations on `modelsDir`; `changed` runs after a model was added or removed. */
export function localModelOperations(
  settings: { modelsDir: string; maxArchiveBytes: number },
  changed: () => Promise<unknown> = async () => undefined,
): ModelOperations {
  return {
    list: async () => (await scanModels(settings.modelsDir)).map(modelRecord),
    async add(request) {
      const model = await installModel(request.source, {
        modelsDir: settings.modelsDir,
        maxBytes: settings.maxArchiveBytes,
        sha256: request.sha256,
        name: request.name,
      });
      await changed();
      return modelRecord({ available: true, ...model });
    },
    async remove(name) {
      await removeModel(settings.modelsDir, name);
      await changed();
    },
  };
}
