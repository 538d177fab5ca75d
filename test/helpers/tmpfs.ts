/**
 * Small real file systems for disk-full and read-only fault tests: a tmpfs of a few MiB mounted on
 * a directory (root only; the CI runs as root), remounted read-only or read-write at will.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * Why tmpfs fault tests cannot run here (not root, or mount refused, e.g. a container without
 * CAP_SYS_ADMIN), or undefined when they can. Tries a real mount once.
 */
export async function tmpfsUnavailable(): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return 'needs root to mount a tmpfs (the CI runs as root)';
  const probe = await mkdtemp(join(tmpdir(), 'voicegen-tmpfs-probe-'));
  try {
    await run('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', probe]);
    await run('umount', [probe]);
    return undefined;
  } catch (err) {
    return `mount -t tmpfs refused: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`;
  } finally {
    await rm(probe, { recursive: true, force: true });
  }
}

/** A mounted tmpfs; `unmount()` in a finally. */
export interface Tmpfs {
  dir: string;
  /** Remounts it read-only (`ro`) or read-write. */
  remount(mode: 'ro' | 'rw'): Promise<void>;
  /** Unmounts it (lazily, so an open descriptor cannot keep it mounted) and leaves the empty directory. */
  unmount(): Promise<void>;
}

/** Mounts a tmpfs of `bytes` on `dir` (created if missing). */
export async function mountTmpfs(dir: string, bytes: number): Promise<Tmpfs> {
  await mkdir(dir, { recursive: true });
  await run('mount', ['-t', 'tmpfs', '-o', `size=${bytes}`, 'tmpfs', dir]);
  return {
    dir,
    remount: async (mode) => void (await run('mount', ['-o', `remount,${mode}`, dir])),
    unmount: async () => void (await run('umount', ['-l', dir])),
  };
}
