/**
 * Where this process keeps a folder of growing files (the stream sessions' caches): a directory of
 * its own under the configured root (`run-<pid>-<random>`), deleted on close. Directories left by processes that
 * are gone (a crash, a kill) are swept when the next service starts.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { processAlive } from '../common/process-alive.js';
import { OWNER_DIR_MODE } from '../common/owner-only.js';

const RUN_DIR = /^run-(\d+)-[A-Za-z0-9_-]+$/;
/** Run directories of services alive in this process (several apps may share one root in tests). */
const ownRunDirs = new Set<string>();

/** Whether a run directory may belong to a live service (ours in this process, or another live process). */
function inUse(root: string, name: string, pid: number): boolean {
  if (pid === process.pid) return ownRunDirs.has(join(root, name));
  return processAlive(pid);
}

/** A service's own cache directory: created once, removed by `remove()`. */
export interface RunCacheDir {
  /** Resolves to the directory path once it exists (stale siblings swept first). */
  ready(): Promise<string>;
  /** Deletes the directory and everything in it. */
  remove(): Promise<void>;
}

/** Prepares (lazily, once) a run directory under `root`. */
export function runCacheDir(root: string): RunCacheDir {
  const path = join(root, `run-${String(process.pid)}-${randomBytes(6).toString('base64url')}`);
  ownRunDirs.add(path);
  let preparing: Promise<string> | undefined;
  return {
    ready: () => {
      preparing ??= (async () => {
        await mkdir(root, { recursive: true, mode: OWNER_DIR_MODE });
        for (const name of await readdir(root)) {
          const match = RUN_DIR.exec(name);
          if (match === null || inUse(root, name, Number(match[1]))) continue;
          await rm(join(root, name), { recursive: true, force: true });
        }
        await mkdir(path, { recursive: true, mode: OWNER_DIR_MODE });
        return path;
      })();
      return preparing;
    },
    remove: async () => {
      ownRunDirs.delete(path);
      await rm(path, { recursive: true, force: true });
    },
  };
}
