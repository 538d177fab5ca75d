/**
 * The README's load balancer (deploy/nginx-two-nodes.conf) filled in for any number of nodes, as
 * the scale-out tests and `FRONT=nginx npm run bench:serve` run it.
 */
import { readFile } from 'node:fs/promises';

/** The config text: nginx's files under `prefix`, listening on `listen`, one upstream line per node (`host:port`). */
export async function nginxFrontConf(options: {
  prefix: string;
  listen: number;
  nodes: string[];
}): Promise<string> {
  const template = await readFile(new URL('../../deploy/nginx-two-nodes.conf', import.meta.url), 'utf8');
  const upstreams = options.nodes.map((node) => `    server ${node} max_fails=0;`).join('\n');
  return template
    .replace(/ {4}server \{\{NODE_A\}\}.*\n {4}server \{\{NODE_B\}\}.*\n/, `${upstreams}\n`)
    .replaceAll('{{PREFIX}}', options.prefix)
    .replaceAll('{{LISTEN}}', String(options.listen));
}
