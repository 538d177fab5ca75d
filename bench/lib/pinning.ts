/**
 * Separate cores for the server and the load: SERVER_CPUS and CLIENT_CPUS (taskset lists such as
 * "1" or "0,2"). With both set the server side runs on one set and every client process on the
 * other, so the load generator never takes CPU from the service it measures (nor the other way).
 */
import { execFileSync } from 'node:child_process';
import { availableParallelism } from 'node:os';

/** The cores of the server side (SERVER_CPUS), if pinned. */
export let serverCpus = process.env.SERVER_CPUS || undefined;
/** The cores of the client side (CLIENT_CPUS), if pinned. */
export let clientCpus = process.env.CLIENT_CPUS || undefined;

/**
 * For a benchmark that is only meaningful pinned: the server side on core `server` and the clients
 * on core `client` unless SERVER_CPUS / CLIENT_CPUS say otherwise (a machine with one core stays unpinned).
 */
export function pinByDefault(server = '1', client = '0'): void {
  if (availableParallelism() < 2) return;
  serverCpus ??= server;
  clientCpus ??= client;
}

/** `command args` to spawn the server with: under `taskset -c SERVER_CPUS` when set. */
export function serverCommand(command: string, args: readonly string[]): [string, string[]] {
  return serverCpus === undefined ? [command, [...args]] : ['taskset', ['-c', serverCpus, command, ...args]];
}

/** Moves this process (every thread) to CLIENT_CPUS; processes it starts afterwards inherit it. */
export function pinClient(): void {
  if (clientCpus === undefined) return;
  execFileSync('taskset', ['-a', '-p', '-c', clientCpus, String(process.pid)], { stdio: 'ignore' });
}

/** How the run was pinned, for the report. */
export function pinningLine(): string {
  return serverCpus === undefined && clientCpus === undefined
    ? 'cores: not pinned (server and clients share every core)'
    : `cores: server on ${serverCpus ?? 'any'}, clients on ${clientCpus ?? 'any'}`;
}
