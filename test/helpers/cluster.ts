/**
 * A real scale-out cluster for tests: N voicegen nodes as separate processes (`src/main.ts`, as an
 * operator runs them) sharing a fresh PostgreSQL database, a Redis key prefix and an S3 bucket on
 * the test servers, behind a real nginx round-robin load balancer that keeps finished audio
 * (deploy/nginx-two-nodes.conf).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshPostgresDatabase, freshRedis, freshS3Bucket } from './servers.js';
import { freePort } from './free-port.js';
import { nginxFrontConf } from './nginx-front.js';

/** Polls `url` until it answers 200, the process exits, or the deadline passes. */
async function waitHealthy(url: string, child: ChildProcess | undefined, deadlineMs: number): Promise<void> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    if (child !== undefined && child.exitCode !== null)
      throw new Error(`process exited with ${String(child.exitCode)}`);
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await response.arrayBuffer();
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > until) throw new Error(`${url} did not become healthy in ${String(deadlineMs)} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** One node process of the cluster. */
export interface ClusterNode {
  name: string;
  /** The node's own base URL (bypassing the load balancer). */
  url: string;
  dataDir: string;
  child: ChildProcess;
  /** What the process wrote to stderr/stdout (for failure messages). */
  output(): string;
  /** The node's /metrics as name → value. */
  metrics(): Promise<Record<string, number>>;
  /** Kills the process with `signal` and waits for it to exit. */
  kill(signal: NodeJS.Signals): Promise<void>;
  /** Starts the node again (same port, data dir and settings) after it exited. */
  restart(): Promise<void>;
}

/** A running cluster. */
export interface Cluster {
  nodes: ClusterNode[];
  /** The load balancer's base URL (nginx, round robin). */
  url: string;
  adminToken: string;
  /** Environment every node runs with (DATABASE_URL, REDIS_URL, S3_*, …). */
  env: Record<string, string>;
  /** What nginx's access log holds so far. */
  accessLog(): Promise<string>;
  close(): Promise<void>;
}

/** Starts `count` nodes and nginx in front of them; `env` adds settings for every node. */
export async function startCluster(
  options: { count?: number; env?: Record<string, string> } = {},
): Promise<Cluster> {
  const count = options.count ?? 2;
  const root = await mkdtemp(join(tmpdir(), 'voicegen-cluster-'));
  const database = await freshPostgresDatabase();
  const redis = freshRedis();
  const s3 = await freshS3Bucket();
  const lbPort = await freePort();
  const adminToken = randomBytes(24).toString('base64url');
  const env: Record<string, string> = {
    DATABASE_URL: database.url,
    REDIS_URL: redis.url,
    REDIS_PREFIX: redis.prefix,
    S3_ENDPOINT: s3.endpoint,
    S3_BUCKET: s3.bucket,
    S3_REGION: s3.region,
    S3_ACCESS_KEY_ID: s3.accessKeyId,
    S3_SECRET_ACCESS_KEY: s3.secretAccessKey,
    S3_FORCE_PATH_STYLE: 'true',
    ADMIN_TOKEN: adminToken,
    PUBLIC_URL: `http://127.0.0.1:${String(lbPort)}`,
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    TASK_LEASE_MS: '3000',
    SESSION_LEASE_MS: '3000',
    SYNTHESIS_THREADS: '1',
    ENCODER_THREADS: '1',
    ...options.env,
  };

  const nodes: ClusterNode[] = [];
  const prefix = join(root, 'nginx');
  let nginx: ChildProcess | undefined;
  const close = async () => {
    nginx?.kill('SIGTERM');
    await Promise.all(nodes.map((n) => n.kill('SIGTERM').catch(() => undefined)));
    await database.drop().catch(() => undefined);
    await rm(root, { recursive: true, force: true });
  };

  try {
    for (let n = 0; n < count; n++)
      nodes.push(await startNode(`node-${String.fromCharCode(97 + n)}`, root, env));
    await Promise.all(nodes.map((node) => waitHealthy(`${node.url}/healthz`, node.child, 90_000)));

    // nginx started by root runs its worker as `nobody`, which writes the finished-audio cache.
    await chmod(root, 0o755);
    await mkdir(prefix, { recursive: true, mode: 0o755 });
    const conf = await nginxFrontConf({
      prefix,
      listen: lbPort,
      nodes: nodes.map((node) => new URL(node.url).host),
    });
    await writeFile(join(prefix, 'nginx.conf'), conf);
    nginx = spawn('nginx', ['-p', prefix, '-c', join(prefix, 'nginx.conf')], { stdio: 'ignore' });
    await waitHealthy(`${env.PUBLIC_URL ?? ''}/healthz`, nginx, 20_000);
  } catch (err) {
    const logs = nodes.map((n) => `--- ${n.name}\n${n.output()}`).join('\n');
    await close();
    throw new Error(`cluster did not start: ${err instanceof Error ? err.message : String(err)}\n${logs}`);
  }
  const accessLog = () => readFile(join(prefix, 'access.log'), 'utf8');
  return { nodes, url: env.PUBLIC_URL ?? '', adminToken, env, accessLog, close };
}

async function startNode(name: string, root: string, env: Record<string, string>): Promise<ClusterNode> {
  const port = await freePort();
  const dataDir = join(root, name);
  let output = '';
  const nodeEnv = { ...process.env, ...env, PORT: String(port), DATA_DIR: dataDir };
  const launch = (): ChildProcess => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      env: nodeEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-20_000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    return child;
  };
  const node: ClusterNode = {
    name,
    url: `http://127.0.0.1:${String(port)}`,
    dataDir,
    child: launch(),
    output: () => output,
    metrics: async () => {
      const text = await (await fetch(`${node.url}/metrics`)).text();
      const values: Record<string, number> = {};
      for (const line of text.split('\n')) {
        const match = /^([a-z_]+) ([0-9.e+-]+)$/.exec(line);
        if (match) values[match[1] ?? ''] = Number(match[2]);
      }
      return values;
    },
    kill: async (signal) => {
      const { child } = node;
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill(signal);
      await exited;
    },
    restart: async () => {
      node.child = launch();
      await waitHealthy(`${node.url}/healthz`, node.child, 90_000);
    },
  };
  return node;
}
