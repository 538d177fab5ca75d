/**
 * DATA_DIR is its owner's only: the database (task tokens in its WAL, texts), blobs, work files and
 * stream caches are no business of other local users. Everything the service creates there is made
 * with these modes, which a umask can only narrow (0700 & ~022 is still 0700), so they hold whatever
 * the umask. `tightenDataDir` brings an install made before that to the same modes, once: the walk
 * over every file is recorded in DATA_DIR/.owner-only and not repeated (an install with many tasks
 * holds tens of thousands of files); later starts check DATA_DIR and its top-level entries only.
 */
import { chmod, lstat, opendir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Folders under DATA_DIR: the owner may list and enter them, nobody else. */
export const OWNER_DIR_MODE = 0o700;
/** Files under DATA_DIR: the owner may read and write them, nobody else. */
export const OWNER_FILE_MODE = 0o600;

/** Entries of DATA_DIR that are the service's own: only these are walked (DATA_DIR may be shared with other things). */
const OWN_ENTRIES = [
  /^db$/,
  /^db\.creating-/,
  /^blobs$/,
  /^work$/,
  /^stream-cache$/,
  /^server\.json/,
  /^voicegen\.lock/,
  /^\.owner-only$/,
];

/** Present once every file of the install has been tightened (or was created owner-only). */
export const TIGHTENED_MARKER = '.owner-only';

/** Files and folders examined at once: enough to keep the disk busy, few enough to leave libuv's threads to requests. */
const BATCH = 32;

/** What tightening did, for the start-up log. */
export interface TightenResult {
  examined: number;
  changed: number;
  /** Entries whose mode could not be changed (another owner, a read-only mount): left as they are. */
  failed: number;
}

/** The mode with every group and other bit removed (owner bits kept, so an executable stays one). */
function ownerOnly(mode: number): number {
  return mode & 0o7700;
}

async function tighten(path: string, mode: number, result: TightenResult): Promise<void> {
  result.examined++;
  const wanted = ownerOnly(mode);
  if (wanted === (mode & 0o7777)) return;
  try {
    await chmod(path, wanted);
    result.changed++;
  } catch {
    result.failed++;
  }
}

/** Tightens `dir` and everything under it; symbolic links inside are neither followed nor changed. */
async function tightenTree(dir: string, mode: number, result: TightenResult): Promise<void> {
  await tighten(dir, mode, result);
  const pending = [dir];
  while (pending.length > 0) {
    const current = pending.pop() as string;
    let entries: string[] = [];
    try {
      const handle = await opendir(current);
      for await (const entry of handle) {
        if (entry.isDirectory() || entry.isFile()) entries.push(entry.name);
      }
    } catch {
      continue; // removed meanwhile, or not ours to read
    }
    for (let i = 0; i < entries.length; i += BATCH) {
      await Promise.all(
        entries.slice(i, i + BATCH).map(async (name) => {
          const path = join(current, name);
          const s = await lstat(path).catch(() => undefined);
          if (s === undefined || s.isSymbolicLink()) return;
          await tighten(path, s.mode, result);
          if (s.isDirectory()) pending.push(path);
        }),
      );
    }
    entries = [];
  }
}

/**
 * Removes group and other permissions from DATA_DIR itself and from the service's own entries in
 * it: recursively the first time (one `lstat` per file, a `chmod` only where a mode is wrong), then
 * records that in TIGHTENED_MARKER; with the marker present, only DATA_DIR and its top-level
 * entries. An entry that is a symbolic link (a blob folder on another disk) is followed; links
 * further down are not.
 */
export async function tightenDataDir(dataDir: string): Promise<TightenResult> {
  const result: TightenResult = { examined: 0, changed: 0, failed: 0 };
  const root = await stat(dataDir).catch(() => undefined);
  if (root === undefined || !root.isDirectory()) return result;
  await tighten(dataDir, root.mode, result);
  const handle = await opendir(dataDir);
  const names: string[] = [];
  for await (const entry of handle) names.push(entry.name);
  const walked = names.includes(TIGHTENED_MARKER);
  for (const name of names) {
    if (!OWN_ENTRIES.some((own) => own.test(name))) continue;
    const path = join(dataDir, name);
    const s = await stat(path).catch(() => undefined);
    if (s === undefined) continue;
    if (s.isDirectory() && !walked) await tightenTree(path, s.mode, result);
    else await tighten(path, s.mode, result);
  }
  if (!walked && result.failed === 0) {
    // Not written (a read-only DATA_DIR): the walk is simply repeated at the next start.
    await writeFile(
      join(dataDir, TIGHTENED_MARKER),
      'Every file and folder here was made owner-only (0600/0700); the service creates new ones so.\n',
      { mode: OWNER_FILE_MODE },
    ).catch(() => {
      result.failed++;
    });
  }
  return result;
}
