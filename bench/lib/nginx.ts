/**
 * nginx as the benchmarks' reference server: one worker, sendfile, access log on (as Debian ships
 * it), serving one file from a temporary root on a loopback port.
 */
import { spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
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
export async function serveFileWithNginx(bytes: Uint8Array): Promise<NginxFile> {
  const root = await mkdtemp(join(tmpdir(), 'voicegen-bench-nginx-'));
  const path = join(root, 'www', 'audio.mp3');
  try {
    // nginx's worker runs as `nobody` when started by root: the file must be world-readable.
    await chmod(root, 0o755);
    await mkdir(join(root, 'www'), { mode: 0o755 });
    await writeFile(path, bytes, { mode: 0o644 });
    const port = await freePort();
    const stopNginx = await startNginx(root, port);
    return {
      url: `http://127.0.0.1:${port}/audio.mp3`,
      root,
      path,
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
  const child = spawn('nginx', ['-c', conf, '-p', root], { stdio: 'inherit' });
  for (let i = 0; ; i++) {
    const status = await fetch(`http://127.0.0.1:${port}${probePath}`, { method: 'HEAD' }).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) break;
    if (i === 50) throw new Error(`nginx answers ${status} for the file (see ${root}/error.log)`);
    await sleep(100);
  }
  return async () => {
    child.kill('SIGQUIT');
    await new Promise((resolve) => child.once('exit', resolve));
  };
}
