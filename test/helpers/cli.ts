/** Runs the `voicegen` CLI in a child process, isolated from whatever the test run's environment points at. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * The test run's environment without anything that would point the CLI at another database,
 * server, key or data dir; `extra` is added (DATA_DIR, ADMIN_TOKEN, …).
 */
export function isolatedCliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of Object.keys(env)) {
    if (
      /^(DATABASE_URL|ADMIN_TOKEN|VOICEGEN_URL|VOICEGEN_KEY|BOOTSTRAP_API_KEY|REDIS_URL|S3_.*|NODE_URL|PUBLIC_URL|DATA_DIR)$/.test(
        name,
      )
    )
      delete env[name];
  }
  return { ...env, LOG_LEVEL: 'silent', ...extra };
}

/** What a CLI run ended with. */
export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI with `extraEnv`; resolves with its exit code and output (never rejects on a non-zero exit). */
export async function runCli(
  extraEnv: Record<string, string>,
  args: string[],
  timeoutMs = 120_000,
): Promise<CliResult> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
      env: isolatedCliEnv(extraEnv),
      timeout: timeoutMs,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}
