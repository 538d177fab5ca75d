/**
 * Separate cores for the server and the load: SERVER_CPUS and CLIENT_CPUS (taskset lists such as
 * "1" or "0,2"). With both set the server side runs on one set and every client process on the
 * other, so the load generator never takes CPU from the service it measures (nor the other way).
 * A benchmark may pin by default (pinByDefault); the variables, when set, still decide.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { availableParallelism, setPriority } from 'node:os';

/** The cores of the server side (SERVER_CPUS), if pinned. */
export function serverCpus(): string | undefined {
  return process.env.SERVER_CPUS || undefined;
}

/** How many cores the server side may use: those of SERVER_CPUS ("1", "0,2", "1-3"), else all. */
export function serverCoreCount(): number {
  const cpus = serverCpus();
  if (cpus === undefined) return availableParallelism();
  return cpus.split(',').reduce((sum, part) => {
    const [from, to] = part.split('-').map(Number);
    return sum + (to === undefined ? 1 : (to ?? 0) - (from ?? 0) + 1);
  }, 0);
}

/** The cores of the client side (CLIENT_CPUS), if pinned. */
export function clientCpus(): string | undefined {
  return process.env.CLIENT_CPUS || undefined;
}

/**
 * Pins the server side to `server` and the clients to `client` unless SERVER_CPUS / CLIENT_CPUS say
 * otherwise (an empty value: not pinned). Nothing on a machine with fewer cores than that needs.
 */
export function pinByDefault(server: string, client: string): void {
  const highest = Math.max(...`${server},${client}`.split(/[,-]/).map(Number));
  if (availableParallelism() <= highest) return;
  process.env.SERVER_CPUS ??= server;
  process.env.CLIENT_CPUS ??= client;
}

/** `command args` to spawn the server with: under `taskset -c SERVER_CPUS` when set. */
export function serverCommand(command: string, args: readonly string[]): [string, string[]] {
  const cpus = serverCpus();
  return cpus === undefined ? [command, [...args]] : ['taskset', ['-c', cpus, command, ...args]];
}

/** Moves a running server-side process (every thread) to SERVER_CPUS, when set. */
export function pinServer(pid: number): void {
  const cpus = serverCpus();
  if (cpus === undefined) return;
  execFileSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' });
}

/** Moves this process (every thread) to CLIENT_CPUS; processes it starts afterwards inherit it. */
export function pinClient(): void {
  const cpus = clientCpus();
  if (cpus === undefined) return;
  execFileSync('taskset', ['-a', '-p', '-c', cpus, String(process.pid)], { stdio: 'ignore' });
}

/**
 * Sets every thread of this process to `niceness` (threads it starts later inherit it). A load
 * generator that shares the client core with the client whose latencies are the measurement
 * lowers itself this way, so that the measuring client is not made to wait for the core by the
 * load it measures under (a separate machine's clients would not be).
 */
export function reniceThisProcess(niceness: number): void {
  for (const tid of readdirSync('/proc/self/task')) setPriority(Number(tid), niceness);
}

/** How the run was pinned, for the report. */
export function pinningLine(): string {
  const server = serverCpus();
  const client = clientCpus();
  return server === undefined && client === undefined
    ? 'cores: not pinned (server and clients share every core)'
    : `cores: server side (taskset -c) on ${server ?? 'any'}, clients on ${client ?? 'any'}`;
}
