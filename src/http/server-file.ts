/**
 * The runtime file of a running server, DATA_DIR/server.json (mode 0600): how the operator CLI
 * finds the server that holds a data dir and, on an embedded install, its generated admin token.
 * Written after the server listens, removed on clean shutdown; nothing else knows its path or format.
 */
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { OWNER_DIR_MODE, OWNER_FILE_MODE } from '../common/owner-only.js';

const serverFileSchema = z.object({
  pid: z.number().int().positive(),
  url: z.url(),
  /** Only when the token was generated for this run; a configured ADMIN_TOKEN is never written. */
  adminToken: z.string().min(1).optional(),
  startedAt: z.string(),
});

/** What server.json says about the running server. */
export type ServerFile = z.infer<typeof serverFileSchema>;

/** Where the server file of `dataDir` lives (for messages that tell an operator about it). */
export function serverFilePath(dataDir: string): string {
  return join(dataDir, 'server.json');
}

/** Writes server.json atomically (a reader never sees half a file), readable by its owner only. */
export async function writeServerFile(dataDir: string, info: ServerFile): Promise<void> {
  const path = serverFilePath(dataDir);
  const partial = `${path}.${randomBytes(4).toString('hex')}.tmp`;
  // A scale-out node has no embedded database that would have created DATA_DIR already.
  await mkdir(dataDir, { recursive: true, mode: OWNER_DIR_MODE });
  await writeFile(partial, `${JSON.stringify(info, null, 2)}\n`, { mode: OWNER_FILE_MODE });
  await rename(partial, path);
}

/** server.json of `dataDir`; undefined when there is none or it is not a server file. */
export async function readServerFile(dataDir: string): Promise<ServerFile | undefined> {
  let text: string;
  try {
    text = await readFile(serverFilePath(dataDir), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  try {
    const parsed = serverFileSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Removes server.json if process `pid` wrote it (a newer server's file is left alone). */
export async function removeServerFile(dataDir: string, pid: number): Promise<void> {
  const current = await readServerFile(dataDir);
  if (current?.pid === pid) await rm(serverFilePath(dataDir), { force: true });
}

/** The URL a client on this machine reaches a listening address at (wildcards become loopback). */
export function localUrl(address: AddressInfo): string {
  const host =
    address.address === '0.0.0.0' ? '127.0.0.1' : address.address === '::' ? '::1' : address.address;
  return `http://${host.includes(':') ? `[${host}]` : host}:${address.port}`;
}
