/**
 * nginx as the benchmarks' reference server: one worker, sendfile, access log on (as Debian ships
 * it), serving one file from a temporary root on a loopback port; and nginx as the README's load
 * balancer in front of the service (`FRONT=nginx`).
 */
import { spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { nginxFrontConf } from '../../test/helpers/nginx-front.js';
import { serverCommand } from './pinning.js';
import { freePort } from './server.js';

/** A file nginx serves as `/audio.mp3`. */
export interface NginxFile {
  /** `http://127.0.0.1:<port>/audio.mp3` */
  url: string;
  /** The temporary root (the benchmark may keep its own files there); removed by stop(). */
  root: string;
  /** The served file's path. */
  path: string;
  /** Stops nginx and removes the root. */
  stop(): Promise<void>;
}

/** Writes `bytes` into a new temporary root and serves them with nginx as `/audio.mp3`. */
export function serveFileWithNginx(bytes: Uint8Array): Promise<NginxFile> {
  return inNginxRoot('voicegen-bench-nginx-', async (root) => {
    const path = join(root, 'www', 'audio.mp3');
    // The worker (`nobody` when nginx is started by root) must be able to read the file.
    await mkdir(join(root, 'www'), { mode: 0o755 });
    await writeFile(path, bytes, { mode: 0o644 });
    const port = await freePort();
    const stopNginx = await startNginx(root, port);
    return { fields: { url: `http://127.0.0.1:${port}/audio.mp3`, root, path }, stopNginx };
  });
}

/**
 * Runs `start` in a new temporary root that nginx's worker can enter (it runs as `nobody` when
 * nginx is started by root); the result's stop() stops nginx and removes the root, as a failed
 * start does.
 */
async function inNginxRoot<T>(
  prefix: string,
  start: (root: string) => Promise<{ fields: T; stopNginx: () => Promise<void> }>,
): Promise<T & { stop(): Promise<void> }> {
  const root = await mkdtemp(join(tmpdir(), prefix));
  try {
    await chmod(root, 0o755);
    const { fields, stopNginx } = await start(root);
    return {
      ...fields,
      stop: async () => {
        await stopNginx();
        await rm(root, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await rm(root, { recursive: true, force: true });
    throw err;
  }
}

/** Starts nginx on `<root>/www` and waits until it answers `probePath`; resolves with its stop function. */
async function startNginx(
  root: string,
  port: number,
  probePath = '/audio.mp3',
): Promise<() => Promise<void>> {
  const conf = join(root, 'nginx.conf');
  await writeFile(
    conf,
    `worker_processes 1;
daemon off;
pid ${root}/nginx.pid;
error_log ${root}/error.log warn;
events { worker_connections 16384; }
http {
  sendfile on;
  keepalive_requests 1000000;
  access_log ${root}/access.log;
  client_body_temp_path ${root}/body; proxy_temp_path ${root}/proxy; fastcgi_temp_path ${root}/fastcgi;
  uwsgi_temp_path ${root}/uwsgi; scgi_temp_path ${root}/scgi;
  types { audio/mpeg mp3; }
  server { listen 127.0.0.1:${port}; root ${root}/www; }
}
`,
  );
  return launchNginx(root, conf, `http://127.0.0.1:${port}${probePath}`);
}

/** Runs nginx with the config file `conf` until `probeUrl` answers 200; resolves with its stop function. */
async function launchNginx(root: string, conf: string, probeUrl: string): Promise<() => Promise<void>> {
  // On the server side's cores when the run is pinned; its worker inherits them.
  const [command, args] = serverCommand('nginx', ['-c', conf, '-p', root]);
  const child = spawn(command, args, { stdio: 'inherit' });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGQUIT');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  };
  for (let i = 0; ; i++) {
    const status = await fetch(probeUrl, { method: 'HEAD' }).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) break;
    if (i === 50) {
      await stop();
      throw new Error(`nginx answers ${status} for ${probeUrl} (see ${root}/error.log)`);
    }
    await sleep(100);
  }
  return stop;
}

/** nginx as the README's load balancer in front of the service's nodes (deploy/nginx-two-nodes.conf). */
export interface NginxFront {
  /** `http://127.0.0.1:<port>` */
  origin: string;
  /** Stops nginx and removes its files. */
  stop(): Promise<void>;
}

/** Starts deploy/nginx-two-nodes.conf in front of `nodes` (`host:port` each). */
export function startNginxFront(nodes: string[]): Promise<NginxFront> {
  return inNginxRoot('voicegen-bench-front-', async (root) => {
    const port = await freePort();
    const conf = join(root, 'nginx.conf');
    await writeFile(conf, await nginxFrontConf({ prefix: root, listen: port, nodes }));
    const origin = `http://127.0.0.1:${port}`;
    return { fields: { origin }, stopNginx: await launchNginx(root, conf, `${origin}/healthz`) };
  });
}
