/**
 * Locating and starting worker modules the same way from source (tests and dev run `.ts` under
 * tsx) and from the compiled `dist/` (`.js`). Node 20 does not apply `--import` loader hooks
 * inside worker threads, so under tsx a worker gets tsx's require hook instead and loads the
 * TypeScript module with `require` (tsx compiles it to CommonJS on the fly).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker, type TransferListItem } from 'node:worker_threads';

/** URL of `<baseName>.<ext of importMetaUrl>` in the directory of `importMetaUrl`. */
export function siblingModuleUrl(importMetaUrl: string, baseName: string): URL {
  const ext = extname(fileURLToPath(importMetaUrl));
  return new URL(`./${baseName}${ext}`, importMetaUrl);
}

/** Whether `url` is TypeScript source, i.e. the service runs under tsx. */
function isTypeScript(url: URL): boolean {
  return url.pathname.endsWith('.ts');
}

/** Node options of this process that a worker or child process must not repeat: its script, an inspector port, test runner and watch modes. */
const NOT_FOR_A_CHILD = /^(-e|--eval|-p|--print|--input-type|--inspect|--debug|--test|--watch)/;
/** Those of them that take the next argument as their value. */
const WITH_A_VALUE = new Set(['-e', '--eval', '-p', '--print', '--input-type']);

/** This process's node options a worker or child running a module file repeats (tsx's loader flags under tsx). */
function inheritedExecArgv(): string[] {
  const kept: string[] = [];
  const args = process.execArgv;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    if (!NOT_FOR_A_CHILD.test(arg)) kept.push(arg);
    else if (WITH_A_VALUE.has(arg)) i++;
  }
  return kept;
}

/** execArgv a worker needs to load `url`: undefined (inherit) for `.js`; plus tsx's require hook for `.ts`. */
export function workerExecArgv(url: URL): string[] | undefined {
  if (!isTypeScript(url)) return undefined;
  // Without `--input-type=module` (a parent run with `-e`), which would make the worker's CommonJS loader line a module.
  return [...inheritedExecArgv(), '--require', createRequire(import.meta.url).resolve('tsx/cjs')];
}

/** Starts a plain worker thread running the module at `url` (`transferList`: ports moved into workerData). */
export function startModuleWorker(
  url: URL,
  workerData?: unknown,
  transferList?: readonly TransferListItem[],
): Worker {
  const transfer = transferList === undefined ? {} : { transferList: [...transferList] };
  if (!isTypeScript(url)) return new Worker(url, { workerData, ...transfer });
  return new Worker(`require(${JSON.stringify(fileURLToPath(url))});`, {
    eval: true,
    execArgv: workerExecArgv(url),
    workerData,
    ...transfer,
  });
}

/**
 * Starts the module at `url` in a child process of its own with `args` (under tsx, with this
 * process's loader flags): for work whose memory should leave with it. stderr is piped, and stdin
 * when `input` is set (data for the child to read); the child is killed after `timeoutMs` (0: never).
 */
export function forkModule(
  url: URL,
  args: readonly string[],
  timeoutMs: number,
  { input = false, stdout = 'ignore', stderr = 'pipe', serialization = 'json' }: ForkOptions = {},
): ChildProcess {
  return fork(fileURLToPath(url), [...args], {
    execArgv: inheritedExecArgv(),
    stdio: [input ? 'pipe' : 'ignore', stdout, stderr, 'ipc'],
    serialization,
    // 0: no time limit (a child that lives as long as the service).
    ...(timeoutMs > 0 && { timeout: timeoutMs }),
    killSignal: 'SIGKILL',
  });
}

/**
 * Asks a long-lived child to end (`askToEnd`, e.g. a close message), holds the event loop until it
 * has exited, and kills it when it has not within `waitMs`.
 */
export async function endChildProcess(
  child: ChildProcess,
  askToEnd: () => void,
  waitMs: number,
): Promise<void> {
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  askToEnd();
  child.ref();
  const timer = setTimeout(() => child.kill('SIGKILL'), waitMs);
  await exited;
  clearTimeout(timer);
}

/** How forkModule starts a child beyond its module and arguments. */
export interface ForkOptions {
  /** Pipe stdin (data for the child to read). */
  input?: boolean;
  /** 'ignore' (default) or 'inherit' (a child that writes log lines to the service's standard output). */
  stdout?: 'ignore' | 'inherit';
  /** 'pipe' (default: the parent reads it) or 'inherit' (a long-lived child writes to the service's stderr). */
  stderr?: 'pipe' | 'inherit';
  /** IPC encoding: 'json' (default) or 'advanced' (structured clone: typed arrays cross as bytes). */
  serialization?: 'json' | 'advanced';
}
