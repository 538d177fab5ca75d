/**
 * nginx as the benchmarks' reference server: one worker, sendfile, access log on (as Debian ships
 * it), serving `<root>/www` on a loopback port from a configuration written into `root`.
 */
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** Starts nginx and waits until it answers `probePath`; resolves with its stop function. */
export async function startNginx(
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
