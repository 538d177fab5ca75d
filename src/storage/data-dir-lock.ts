/**
 * The DATA_DIR lock: the embedded database (PGlite) is single-process, so a second process opening the
 * same DATA_DIR would corrupt it. `DATA_DIR/voicegen.lock` names the holder ({pid, hostname, startedAt});
 * it is created atomically (a complete temp file hard-linked into place), removed on close, and a lock
 * left by a crashed process (pid gone, or the machine rebooted) is taken over by the next start.
 *
 * Taking over a stale lock is a race when several processes start at once. A process may replace a
 * stale lock only while it holds the exclusive claim file named after that lock's content
 * (`voicegen.lock.takeover-<sha256>`, created with link(), which fails if it exists). A claimant that
 * died mid-takeover leaves its claim behind; the next process then claims the claim (a chain named
 * after the dead claim's content), so exactly one live process can hold the newest claim. The winner
 * re-reads the lock, checks it is still the stale one, renames its own record over it and removes
 * the chain. Everyone else sees a live holder and gets DataDirLockedError.
 */
import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { link, mkdir, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { processAlive } from '../common/process-alive.js';
import { OWNER_DIR_MODE, OWNER_FILE_MODE } from '../common/owner-only.js';

/** Name of the lock file inside DATA_DIR. */
export const DATA_DIR_LOCK_FILE = 'voicegen.lock';

/** Who holds a DATA_DIR: what the lock file says. */
export interface DataDirLockHolder {
  pid: number;
  hostname: string;
  /** When the holder took the lock (ISO 8601). */
  startedAt: string;
}

/** A held DATA_DIR lock; `release()` removes it (idempotent). */
export interface DataDirLock {
  readonly path: string;
  readonly holder: DataDirLockHolder;
  release(): Promise<void>;
}

/** Thrown when a live process (this one, another on this host, or one on another host) holds DATA_DIR. */
export class DataDirLockedError extends Error {
  override readonly name = 'DataDirLockedError';
  constructor(
    readonly dataDir: string,
    readonly lockPath: string,
    readonly holder: DataDirLockHolder,
  ) {
    super(lockedMessage(dataDir, lockPath, holder));
  }
}

/** What a lock file holds; `bootId` (Linux) tells a lock from before a reboot, whose pid means nothing now. */
interface LockRecord extends DataDirLockHolder {
  bootId?: string;
  /** Makes every record's bytes unique, so a lock's content identifies one acquisition. */
  nonce: string;
}

interface LockFile {
  raw: string;
  record: LockRecord | undefined;
}

type HolderState = 'live' | 'dead' | 'foreign';

const THIS_HOST = hostname();
const BOOT_ID = readBootId();
/** When this process started (process-wide, also in worker threads). */
const PROCESS_STARTED_MS = Date.now() - process.uptime() * 1000;
/** How long to keep retrying while another process is in the middle of taking over a stale lock. */
const TAKEOVER_DEADLINE_MS = 10_000;
/** Age after which an unreadable temp file next to the lock is a crashed writer's, not one being written. */
const LEFTOVER_AGE_MS = 60_000;

function readBootId(): string | undefined {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

function lockedMessage(dataDir: string, lockPath: string, holder: DataDirLockHolder): string {
  const since = `since ${holder.startedAt}`;
  if (holder.hostname !== THIS_HOST) {
    return (
      `DATA_DIR ${dataDir} is in use by a voicegen process on host ${holder.hostname} (pid ${holder.pid}, ${since}). ` +
      `The embedded database can be opened by one process only. If no voicegen process runs there any more, ` +
      `delete ${lockPath} and start again.`
    );
  }
  if (holder.pid === process.pid) {
    return (
      `DATA_DIR ${dataDir} is already open in this process (pid ${holder.pid}, ${since}): the embedded ` +
      `database can be opened once only; close the other handle first.`
    );
  }
  return (
    `DATA_DIR ${dataDir} is in use by another voicegen process (pid ${holder.pid}, ${since}). The embedded ` +
    `database (PGlite) can be opened by one process only: stop that process first, or manage the running ` +
    `server through its admin API / the CLI talking to it instead of opening DATA_DIR directly (a server ` +
    `that is still starting answers the CLI once it is up).`
  );
}

function isErrno(err: unknown, ...codes: string[]): boolean {
  return (
    typeof err === 'object' && err !== null && codes.includes((err as { code?: unknown }).code as string)
  );
}

function parseRecord(raw: string): LockRecord | undefined {
  try {
    const value = JSON.parse(raw) as Partial<LockRecord> | null;
    if (
      value === null ||
      typeof value !== 'object' ||
      typeof value.pid !== 'number' ||
      !Number.isInteger(value.pid) ||
      value.pid <= 0 ||
      typeof value.hostname !== 'string' ||
      typeof value.startedAt !== 'string'
    )
      return undefined;
    return {
      pid: value.pid,
      hostname: value.hostname,
      startedAt: value.startedAt,
      nonce: typeof value.nonce === 'string' ? value.nonce : '',
      ...(typeof value.bootId === 'string' ? { bootId: value.bootId } : {}),
    };
  } catch {
    return undefined;
  }
}

async function readLockFile(path: string): Promise<LockFile | undefined> {
  try {
    const raw = await readFile(path, 'utf8');
    return { raw, record: parseRecord(raw) };
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return undefined;
    throw err;
  }
}

/** Whether the process a record names still runs (as far as this host can tell). */
function holderState(record: LockRecord | undefined): HolderState {
  // Every lock is written completely before it is linked into place: unreadable content is damage.
  if (record === undefined) return 'dead';
  if (record.hostname !== THIS_HOST) return 'foreign';
  if (record.bootId !== undefined && BOOT_ID !== undefined && record.bootId !== BOOT_ID) return 'dead';
  if (record.pid === process.pid) {
    // Our own pid: either this process took it, or an earlier process with the same pid (a restarted
    // container's pid 1) did before we started. A few ms of slack for clock reading.
    return Date.parse(record.startedAt) >= PROCESS_STARTED_MS - 10 ? 'live' : 'dead';
  }
  return processAlive(record.pid) ? 'live' : 'dead';
}

function holderOf(record: LockRecord): DataDirLockHolder {
  return { pid: record.pid, hostname: record.hostname, startedAt: record.startedAt };
}

/** Creates `path` as a hard link to the complete file `from`; false if `path` exists. */
async function linkExclusive(from: string, path: string): Promise<boolean> {
  try {
    await link(from, path);
    return true;
  } catch (err) {
    if (isErrno(err, 'EEXIST')) return false;
    throw err;
  }
}

function contentId(raw: string): string {
  return createHash('sha256').update(raw).digest('hex').slice(0, 32);
}

/**
 * The claim file a process must create before replacing the lock (or dead claim) whose content is
 * `content`. Exported for tests that simulate a process killed in the middle of a takeover.
 */
export function staleLockClaimPath(dataDir: string, content: string): string {
  return join(dataDir, `${DATA_DIR_LOCK_FILE}.takeover-${contentId(content)}`);
}

/**
 * Replaces the stale lock `stale` with the record in `temp`, if this process wins the claim chain.
 * 'busy' means someone else is (or was just) taking over: re-read the lock and decide again.
 */
async function takeOver(
  dataDir: string,
  lockPath: string,
  stale: LockFile,
  temp: string,
): Promise<'taken' | 'busy'> {
  const chain: string[] = [];
  let claimPath = staleLockClaimPath(dataDir, stale.raw);
  for (;;) {
    const claim = await readLockFile(claimPath);
    if (claim === undefined) break;
    if (holderState(claim.record) !== 'dead' || chain.length >= 100) return 'busy';
    chain.push(claimPath);
    claimPath = staleLockClaimPath(dataDir, claim.raw);
  }
  if (!(await linkExclusive(temp, claimPath))) return 'busy';
  chain.push(claimPath);
  // Holding the newest claim, no live process but us may replace the lock; it must still be the stale one.
  const current = await readLockFile(lockPath);
  if (current?.raw !== stale.raw) {
    await rm(claimPath, { force: true });
    return 'busy';
  }
  await rename(temp, lockPath);
  for (const path of chain) await rm(path, { force: true });
  return 'taken';
}

/**
 * Best effort: removes temp and claim files that dead processes left next to the lock. A temp file
 * is written after it is created, so an unreadable one may be another process's, still being
 * written: it goes only once it is old.
 */
async function sweepLeftovers(dataDir: string): Promise<void> {
  const names = await readdir(dataDir).catch(() => [] as string[]);
  for (const name of names) {
    if (!name.startsWith(`${DATA_DIR_LOCK_FILE}.`)) continue;
    const path = join(dataDir, name);
    const file = await readLockFile(path).catch(() => undefined);
    if (file === undefined) continue;
    const leftover =
      file.record === undefined
        ? Date.now() - ((await stat(path).catch(() => undefined))?.mtimeMs ?? Date.now()) > LEFTOVER_AGE_MS
        : holderState(file.record) === 'dead';
    if (leftover) await rm(path, { force: true });
  }
}

/**
 * Takes the DATA_DIR lock for this process, taking over a stale one; throws DataDirLockedError
 * naming the holder when a live process has it.
 */
export async function acquireDataDirLock(dataDir: string): Promise<DataDirLock> {
  const dir = resolve(dataDir);
  await mkdir(dir, { recursive: true, mode: OWNER_DIR_MODE });
  const lockPath = join(dir, DATA_DIR_LOCK_FILE);
  const record: LockRecord = {
    pid: process.pid,
    hostname: THIS_HOST,
    startedAt: new Date().toISOString(),
    ...(BOOT_ID !== undefined ? { bootId: BOOT_ID } : {}),
    nonce: randomUUID(),
  };
  const content = `${JSON.stringify(record)}\n`;
  const temp = join(dir, `${DATA_DIR_LOCK_FILE}.${process.pid}.${record.nonce}.tmp`);
  await writeFile(temp, content, { flag: 'wx', mode: OWNER_FILE_MODE });
  try {
    const deadline = Date.now() + TAKEOVER_DEADLINE_MS;
    for (;;) {
      if (await linkExclusive(temp, lockPath)) break;
      const current = await readLockFile(lockPath);
      if (current === undefined) continue; // released just now: try again
      const state = holderState(current.record);
      if (current.record !== undefined && state !== 'dead')
        throw new DataDirLockedError(dir, lockPath, holderOf(current.record));
      if ((await takeOver(dir, lockPath, current, temp)) === 'taken') break;
      if (Date.now() > deadline) {
        throw new Error(
          `could not take over the stale lock ${lockPath}: other processes kept claiming it for ` +
            `${TAKEOVER_DEADLINE_MS / 1000} s`,
        );
      }
      await sleep(10 + Math.random() * 40);
    }
  } finally {
    await rm(temp, { force: true });
  }
  await sweepLeftovers(dir);
  let released: Promise<void> | undefined;
  return {
    path: lockPath,
    holder: holderOf(record),
    release: () =>
      (released ??= (async () => {
        // Remove the lock only if it is still ours (never someone else's after a wrong takeover).
        const current = await readLockFile(lockPath);
        if (current?.raw === content) await rm(lockPath, { force: true });
      })()),
  };
}

/**
 * The live holder of DATA_DIR's lock, or undefined when nobody holds it (no lock, or a stale one the
 * next start will take over). A holder on another host is returned: its liveness cannot be checked.
 */
export async function readDataDirLock(dataDir: string): Promise<DataDirLockHolder | undefined> {
  const current = await readLockFile(join(resolve(dataDir), DATA_DIR_LOCK_FILE));
  if (current?.record === undefined || holderState(current.record) === 'dead') return undefined;
  return holderOf(current.record);
}
