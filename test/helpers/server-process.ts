/**
 * The real service as a child process (`node --import tsx src/main.ts`, as an operator runs it) on
 * a given DATA_DIR, for tests that kill it (`kill -9`) and start it again on the same data.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { readServerFile } from '../../src/http/server-file.js';
import { freePort } from './free-port.js';

/** A running service process. */
export interface ServerProcess {
  child: ChildProcess;
  /** Its base URL (from DATA_DIR/server.json). */
  url: string;
  /** What it wrote to stderr so far (for failure messages). */
  stderr(): string;
  /** What it wrote to stdout so far (the first-run banner; logs at LOG_LEVEL=warn are rare). */
  stdout(): string;
  /** `kill -9`, then waits until it is gone. */
  kill9(): Promise<void>;
  /** SIGTERM, then waits for its exit code (at most 60 s). */
  stop(): Promise<number | null>;
}

/** Variables of the test process that would point the child elsewhere (scale-out, tokens). */
const FOREIGN =
  /^(DATABASE_URL|ADMIN_TOKEN|VOICEGEN_URL|BOOTSTRAP_API_KEY|REDIS_URL|S3_.*|NODE_URL|PUBLIC_URL)$/;

/** Starts the service on `dataDir` with `env` and waits (at most 120 s) until /healthz answers. */
export async function startServerProcess(
  dataDir: string,
  env: Record<string, string> = {},
): Promise<ServerProcess> {
  const port = await freePort();
  const base: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) if (!FOREIGN.test(name)) base[name] = value;
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: { ...base, LOG_LEVEL: 'warn', ...env, DATA_DIR: dataDir, HOST: '127.0.0.1', PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  let stdout = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const exited = once(child, 'exit');
  exited.catch(() => undefined);
  const gone = async () => {
    if (child.exitCode === null && child.signalCode === null) await exited;
  };
  const deadline = AbortSignal.timeout(120_000);
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}: ${stderr}`);
    if (deadline.aborted) {
      child.kill('SIGKILL');
      await gone();
      throw new Error(`server did not come up within 120 s: ${stderr}`);
    }
    const info = await readServerFile(dataDir);
    if (info !== undefined && info.pid === child.pid) {
      const healthy = await fetch(`${info.url}/healthz`, { signal: AbortSignal.timeout(5000) }).then(
        async (res) => (await res.arrayBuffer(), res.ok),
        () => false,
      );
      if (healthy)
        return {
          child,
          url: info.url,
          stderr: () => stderr,
          stdout: () => stdout,
          kill9: async () => {
            child.kill('SIGKILL');
            await gone();
          },
          stop: async () => {
            child.kill('SIGTERM');
            const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
            await gone();
            clearTimeout(timer);
            return child.exitCode;
          },
        };
    }
    await sleep(100);
  }
}
