/**
 * Unpacks an embedded-database archive (a `dumpDataDir` tar, gzipped or not: the migrated template
 * `npm run build` writes, or one a test makes with `createPgliteTemplate`) into a folder with plain
 * file writes. PGlite can load such an archive itself, but only while it starts PostgreSQL's
 * WebAssembly on the folder: a new database then cost one start to create it and another to open it
 * where it was renamed into place. Written here with no WebAssembly, the new folder is then opened
 * like any existing database: one start.
 *
 * The archive is read as a stream, a chunk at a time: unpacked whole, its 40 MB (a 16 MiB
 * write-ahead log segment among them) stayed in the service's resident memory long after the
 * start, ~100 MiB above a restart's.
 */
import { closeSync, ftruncateSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { OWNER_DIR_MODE, OWNER_FILE_MODE } from '../common/owner-only.js';

/** A tar record: every header and every file's data (padded) take whole records. */
const RECORD = 512;

/** An archive that is not a database dump this code can unpack (corrupt, truncated, or another kind). */
export class PgliteArchiveError extends Error {
  override readonly name = 'PgliteArchiveError';
}

/** The NUL-terminated text of a header field. */
function text(header: Uint8Array, start: number, length: number): string {
  const field = header.subarray(start, start + length);
  const end = field.indexOf(0);
  return Buffer.from(end === -1 ? field : field.subarray(0, end)).toString('utf8');
}

/** An octal number field (space or NUL terminated, possibly space padded in front). */
function octal(header: Uint8Array, start: number, length: number, what: string, at: number): number {
  const digits = text(header, start, length).trim();
  if (!/^[0-7]+$/.test(digits)) throw new PgliteArchiveError(`bad ${what} in the header at byte ${at}`);
  return parseInt(digits, 8);
}

/**
 * The relative path of an entry name inside the target folder ('/base/1/112' → 'base/1/112'):
 * a name that would leave the folder ('..') is refused, whoever made the archive.
 */
function relativePath(name: string, at: number): string {
  const parts = name.split('/').filter((part) => part !== '' && part !== '.');
  if (parts.some((part) => part === '..'))
    throw new PgliteArchiveError(`entry at byte ${at} leaves the database folder: ${name}`);
  return parts.join('/');
}

/** What one header announces: a folder, a file of `size` bytes, or the end of the archive. */
type Header = { kind: 'dir'; path: string } | { kind: 'file'; path: string; size: number } | { kind: 'end' };

/** Reads the header record found at byte `at` of the archive (POSIX ustar, as PGlite writes it). */
function readHeader(header: Uint8Array, at: number): Header {
  if (header.every((byte) => byte === 0)) return { kind: 'end' };
  // The checksum is the sum of the header's bytes with its own field counted as spaces.
  let sum = 8 * 0x20;
  for (let i = 0; i < RECORD; i++) if (i < 148 || i >= 156) sum += header[i] ?? 0;
  if (octal(header, 148, 8, 'checksum', at) !== sum)
    throw new PgliteArchiveError(`header checksum mismatch at byte ${at} (not a tar archive?)`);
  const prefix = text(header, 345, 155);
  const name = prefix === '' ? text(header, 0, 100) : `${prefix}/${text(header, 0, 100)}`;
  const path = relativePath(name, at);
  const type = String.fromCharCode(header[156] ?? 0);
  if (type === '5') return { kind: 'dir', path };
  if (type === '0' || type === '\0') {
    if (path === '') throw new PgliteArchiveError(`file entry at byte ${at} has no name`);
    return { kind: 'file', path, size: octal(header, 124, 12, 'size', at) };
  }
  // Links, devices and extended headers have no place in a database folder PGlite wrote.
  throw new PgliteArchiveError(`unsupported entry type '${type}' for ${name}`);
}

/** The archive's bytes, gunzipped when they start with gzip's magic bytes (whatever a Blob's type said). */
async function* tarBytes(source: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  const chunks = source[Symbol.asyncIterator]();
  const first = await chunks.next();
  if (first.done === true) return;
  const all = (async function* () {
    try {
      yield first.value;
      for (let next = await chunks.next(); next.done !== true; next = await chunks.next()) yield next.value;
    } finally {
      // Read no further (the end marker came first, or reading failed): the source closes its file.
      await chunks.return?.();
    }
  })();
  if (!(first.value[0] === 0x1f && first.value[1] === 0x8b)) {
    yield* all;
    return;
  }
  const gunzip = createGunzip();
  const fed = pipeline(Readable.from(all), gunzip);
  // Awaited below when the archive is read to its end; stopped earlier, its rejection is expected.
  fed.catch(() => undefined);
  try {
    for await (const chunk of gunzip) yield chunk as Buffer;
    await fed;
  } catch (err) {
    throw new PgliteArchiveError(
      `the archive is not a readable gzip stream: ${err instanceof Error ? err.message : String(err)}`,
    );
  } finally {
    gunzip.destroy();
  }
}

/** The block a sparse write skips when it holds only zeros (PostgreSQL's page size). */
const BLOCK = 8192;
const ZERO_BLOCK = Buffer.alloc(BLOCK);

/**
 * A file written block by block (blocks counted from its start), leaving a hole where a block is
 * all zeros: a third of a new database is zeros (most of its write-ahead log segment, empty pages),
 * which a hole reads back as, without the disk writes. A block cut by the archive's chunks waits
 * for its rest.
 */
class SparseFile {
  private readonly pending = Buffer.alloc(BLOCK);
  private pendingLength = 0;
  /** Bytes taken so far: the file position of the next one. */
  private taken = 0;

  constructor(
    readonly path: string,
    readonly fd: number,
    readonly size: number,
  ) {}

  get left(): number {
    return this.size - this.taken;
  }

  write(part: Uint8Array): void {
    const bytes = Buffer.from(part.buffer, part.byteOffset, part.byteLength);
    let at = 0;
    // What is pending starts on a block edge: complete that block first.
    if (this.pendingLength > 0) {
      at = Math.min(BLOCK - this.pendingLength, bytes.length);
      bytes.copy(this.pending, this.pendingLength, 0, at);
      this.pendingLength += at;
      this.taken += at;
      if (this.pendingLength < BLOCK) return;
      this.block(this.pending, this.taken - BLOCK);
      this.pendingLength = 0;
    }
    for (; at + BLOCK <= bytes.length; at += BLOCK) {
      this.block(bytes.subarray(at, at + BLOCK), this.taken);
      this.taken += BLOCK;
    }
    if (at < bytes.length) {
      this.pendingLength = bytes.copy(this.pending, 0, at);
      this.taken += this.pendingLength;
    }
  }

  /** Writes what is pending, sets the size (holes at the end included) and closes the file. */
  close(): void {
    if (this.pendingLength > 0)
      this.block(this.pending.subarray(0, this.pendingLength), this.taken - this.pendingLength);
    ftruncateSync(this.fd, this.size);
    closeSync(this.fd);
  }

  private block(block: Buffer, position: number): void {
    if (block.length === BLOCK && block.equals(ZERO_BLOCK)) return;
    for (let written = 0; written < block.length;)
      written += writeSync(this.fd, block, written, block.length - written, position + written);
  }
}

/**
 * Writes every folder and file of the archive `source` streams under `dir`, which must exist:
 * folders and files are the owner's only, as everything under DATA_DIR. Rejects with
 * PgliteArchiveError for an archive it cannot read, possibly after writing its first files: the
 * caller unpacks into a staging folder it removes then. The writes are synchronous: a thousand
 * small files cost a few milliseconds each through libuv's thread pool on a busy machine (three
 * hops per file) and a fraction of that here; they run while the service is starting, before it
 * answers anything.
 */
export async function unpackPgliteArchive(source: AsyncIterable<Uint8Array>, dir: string): Promise<void> {
  const made = new Set<string>(['']);
  const ensureDir = (path: string) => {
    if (made.has(path)) return;
    mkdirSync(join(dir, path), { recursive: true, mode: OWNER_DIR_MODE });
    // Its parents were made with it (recursive) or before it.
    for (let p = path; p !== '' && !made.has(p); p = p.slice(0, Math.max(0, p.lastIndexOf('/')))) made.add(p);
  };
  /** Bytes of the archive read so far (for messages). */
  let offset = 0;
  const header = new Uint8Array(RECORD);
  let headerFilled = 0;
  /** The file being written (how many of its bytes are still to come), and the padding after it. */
  let file: SparseFile | undefined;
  let skip = 0;
  try {
    for await (const chunk of tarBytes(source)) {
      let at = 0;
      while (at < chunk.length) {
        if (file !== undefined) {
          const part = chunk.subarray(at, at + Math.min(file.left, chunk.length - at));
          file.write(part);
          at += part.length;
          if (file.left === 0) {
            file.close();
            file = undefined;
          }
        } else if (skip > 0) {
          const n = Math.min(skip, chunk.length - at);
          at += n;
          skip -= n;
        } else {
          const n = Math.min(RECORD - headerFilled, chunk.length - at);
          header.set(chunk.subarray(at, at + n), headerFilled);
          headerFilled += n;
          at += n;
          if (headerFilled < RECORD) continue;
          headerFilled = 0;
          const entry = readHeader(header, offset + at - RECORD);
          if (entry.kind === 'end') return;
          if (entry.kind === 'dir') {
            ensureDir(entry.path);
            continue;
          }
          // An archive may list a file before its folder.
          ensureDir(entry.path.slice(0, Math.max(0, entry.path.lastIndexOf('/'))));
          const fd = openSync(join(dir, entry.path), 'w', OWNER_FILE_MODE);
          if (entry.size === 0) closeSync(fd);
          else file = new SparseFile(entry.path, fd, entry.size);
          skip = (RECORD - (entry.size % RECORD)) % RECORD;
        }
      }
      offset += chunk.length;
    }
    if (file !== undefined) throw new PgliteArchiveError(`${file.path} is cut short`);
    throw new PgliteArchiveError('the archive ends before its end marker');
  } finally {
    if (file !== undefined) closeSync(file.fd);
  }
}
