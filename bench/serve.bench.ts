/**
 * Finished-audio Range serving vs nginx: `npm run bench:serve`
 * (env: SECONDS_PER_RUN, 10; CONNECTIONS, 64; RUNS, 2; LOG_LEVEL of the service, info;
 * SERVER_NODE_ARGS, extra node flags of the service such as "--cpu-prof --cpu-prof-dir=/tmp/prof";
 * SERVER_ENV, "K=V,K=V" extra variables of the service such as FINISHED_AUDIO_PROCESS=off).
 * The service (embedded defaults) generates one task; its stored MP3 is downloaded and served by
 * nginx (one worker, sendfile, access log on, as Debian ships it) from a temporary root; `wrk`
 * (one thread, CONNECTIONS connections) asks both for random 64 KiB ranges of the same file, runs
 * alternating, and a bare node:http server answering the same ranges from memory
 * (bench/lib/bare-range-server.ts: the platform's ceiling, no framework, auth or logs). Prints
 * requests/s, non-206 answers and the ratios; exits 1 below 0.6× nginx.
 * Pinned by default: the service, nginx and the bare server on core 1 (`taskset -c 1`), this
 * process and `wrk` on core 0, the same in every run; SERVER_CPUS / CLIENT_CPUS choose other
 * cores (empty: not pinned). The shared scale-out test servers are not moved.
 * SCALE_OUT=1 NODES=2: a second node of the same cluster serves the same task; `wrk` runs against
 * both nodes at once (CONNECTIONS/2 each) and their requests/s are added up.
 * FRONT=nginx: `wrk` asks the README's load balancer (deploy/nginx-two-nodes.conf, which keeps
 * finished audio) in front of the node(s) instead of the nodes themselves.
 */
import { execFile, fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pinByDefault, pinClient, pinningLine, pinServer } from './lib/pinning.js';
import { serveFileWithNginx, startNginxFront, type NginxFile, type NginxFront } from './lib/nginx.js';
import {
  treeCpuSeconds,
  ensureDebianPackages,
  finishedTask,
  freePort,
  report,
  runBench,
  serverNodeArgsFromProcess,
  serverEnvFromProcess,
  startServer,
  type BenchServer,
} from './lib/server.js';

const SECONDS = Number(process.env.SECONDS_PER_RUN ?? 10);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 64);
const RUNS = Number(process.env.RUNS ?? 2);
const NODES = Number(process.env.NODES ?? 1);
const FRONT = process.env.FRONT ?? '';
const RANGE = 65_536;
const TEXT =
  'The old lighthouse keeper climbed the spiral stairs every evening, counting each step as his father had taught him. ' +
  'From the lamp room he could see the whole bay, the fishing boats returning in a slow line, and the storm clouds gathering beyond the cape. ';

interface WrkResult {
  rps: number;
  requests: number;
  bad: number;
  socketErrors: string;
}

function wrkScript(size: number, path: string): string {
  return `math.randomseed(42)
request = function()
  local start = math.random(0, ${size - RANGE})
  return wrk.format("GET", "${path}", { ["Range"] = "bytes=" .. start .. "-" .. (start + ${RANGE - 1}) })
end
local bad = 0
response = function(status, headers, body)
  if status ~= 206 then bad = bad + 1 end
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %f\\n", summary.requests, summary.requests / (summary.duration / 1e6)))
end
`;
}

async function wrk(url: string, scriptPath: string, connections = CONNECTIONS): Promise<WrkResult> {
  const out = await promisify(execFile)(
    'wrk',
    ['-t1', `-c${connections}`, `-d${SECONDS}s`, '-s', scriptPath, url],
    { encoding: 'utf8' },
  ).catch((err: unknown) => {
    throw new Error(`wrk failed: ${String((err as { stderr?: string }).stderr ?? err)}`);
  });
  const result = /RESULT (\d+) ([\d.]+)/.exec(out.stdout);
  if (result === null) throw new Error(`no wrk result in:\n${out.stdout}`);
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out.stdout)?.[1];
  return {
    requests: Number(result[1]),
    rps: Number(result[2]),
    // wrk counts non-2xx/3xx itself; a 200 (whole file) instead of 206 would show as bytes, so the
    // script's status check is the stricter one but is per-thread state: use wrk's count too.
    bad: Number(non2xx ?? 0),
    socketErrors: /Socket errors: (.*)/.exec(out.stdout)?.[1] ?? 'none',
  };
}

/** `wrk` against every node at once (the connections split between them); the results added up. */
async function wrkNodes(origins: string[], scriptPath: string): Promise<WrkResult> {
  const each = Math.max(1, Math.floor(CONNECTIONS / origins.length));
  const results = await Promise.all(origins.map((origin) => wrk(origin, scriptPath, each)));
  return {
    rps: results.reduce((n, r) => n + r.rps, 0),
    requests: results.reduce((n, r) => n + r.requests, 0),
    bad: results.reduce((n, r) => n + r.bad, 0),
    socketErrors: results.map((r) => r.socketErrors).join('; '),
  };
}

async function main(): Promise<number> {
  ensureDebianPackages({ nginx: 'nginx', wrk: 'wrk' });
  if (FRONT !== '' && FRONT !== 'nginx') throw new Error(`FRONT=${FRONT}: only FRONT=nginx is known`);
  // The load client on its own core: a one-process client sharing the server's core measures both.
  pinByDefault('1', '0');
  pinClient();
  console.log(pinningLine());
  const server = await startServer(
    {
      RATE_LIMIT_MAX: '1000000',
      STREAM_RATE_LIMIT_MAX: '1000000',
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
      ...serverEnvFromProcess(),
    },
    serverNodeArgsFromProcess(),
  );
  if (NODES !== 1 && (NODES !== 2 || server.scaleOutEnv.REDIS_URL === undefined))
    throw new Error('NODES=2 needs SCALE_OUT=1 (a cluster shares PostgreSQL, Redis and S3)');
  let second: BenchServer | undefined;
  let nginx: NginxFile | undefined;
  let front: NginxFront | undefined;
  let bare: ChildProcess | undefined;
  try {
    if (NODES === 2) {
      second = await startServer(
        {
          RATE_LIMIT_MAX: '1000000',
          STREAM_RATE_LIMIT_MAX: '1000000',
          LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
          ...serverEnvFromProcess(),
        },
        serverNodeArgsFromProcess(),
        server,
      );
    }
    const nodes = second === undefined ? [server] : [server, second];
    if (FRONT === 'nginx') front = await startNginxFront(nodes.map((node) => new URL(node.url).host));
    // Where `wrk` sends our requests: the nodes themselves, or the load balancer in front of them.
    const origins = front === undefined ? nodes.map((node) => new URL(node.url).origin) : [front.origin];
    const task = await finishedTask(server, TEXT.repeat(3));
    const audio = Buffer.from(await (await fetch(task.audioUrl)).arrayBuffer());
    nginx = await serveFileWithNginx(audio);
    const { root } = nginx;
    const barePort = await freePort();
    bare = fork(
      new URL('./lib/bare-range-server.ts', import.meta.url).pathname,
      [nginx.path, String(barePort)],
      { execArgv: ['--import', 'tsx'] },
    );
    await once(bare, 'message');
    pinServer(bare.pid ?? 0);
    const ours = new URL(task.audioUrl);
    // A running deployment's load balancer has the file already: fill its copy before timing.
    if (front !== undefined)
      await (await fetch(`${front.origin}${ours.pathname}${ours.search}`)).arrayBuffer();
    const oursScript = join(root, 'ours.lua');
    const nginxScript = join(root, 'nginx.lua');
    await writeFile(oursScript, wrkScript(audio.length, `${ours.pathname}${ours.search}`));
    await writeFile(nginxScript, wrkScript(audio.length, '/audio.mp3'));
    console.log(
      `file ${(audio.length / 1024 / 1024).toFixed(2)} MiB; wrk -t1 -c${CONNECTIONS} -d${SECONDS}s, random ${RANGE / 1024} KiB ranges, ${RUNS} runs each, alternating` +
        (nodes.length > 1 ? `; ours on ${nodes.length} nodes of one cluster` : '') +
        (front !== undefined
          ? '; ours through the nginx load balancer that keeps finished audio (deploy/nginx-two-nodes.conf)'
          : nodes.length > 1
            ? `, ${CONNECTIONS / nodes.length} connections each`
            : ''),
    );
    const oursRuns: WrkResult[] = [];
    const nginxRuns: WrkResult[] = [];
    const bareRuns: WrkResult[] = [];
    let oursCpu = 0;
    let childCpu = 0;
    for (let run = 0; run < RUNS; run++) {
      nginxRuns.push(await wrk(new URL(nginx.url).origin, nginxScript));
      bareRuns.push(await wrk(`http://127.0.0.1:${barePort}`, nginxScript));
      // The service's processes: each node's and its child processes' (the finished-audio process).
      const cpu = () =>
        nodes.reduce(
          (n, node) => {
            const { own, children } = treeCpuSeconds(node.pid);
            return { own: n.own + own, children: n.children + children };
          },
          { own: 0, children: 0 },
        );
      const before = cpu();
      oursRuns.push(await wrkNodes(origins, oursScript));
      const after = cpu();
      oursCpu += after.own - before.own + after.children - before.children;
      childCpu += after.children - before.children;
      console.log(
        `run ${run + 1}: nginx ${nginxRuns[run]!.rps.toFixed(0)} req/s (non-2xx ${nginxRuns[run]!.bad}, socket errors ${nginxRuns[run]!.socketErrors}); ` +
          `bare node:http ${bareRuns[run]!.rps.toFixed(0)} req/s; ` +
          `ours ${oursRuns[run]!.rps.toFixed(0)} req/s (non-2xx ${oursRuns[run]!.bad}, socket errors ${oursRuns[run]!.socketErrors})`,
      );
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const oursRps = median(oursRuns.map((r) => r.rps));
    const nginxRps = median(nginxRuns.map((r) => r.rps));
    const ratio = oursRps / nginxRps;
    const bareRps = median(bareRuns.map((r) => r.rps));
    const bad = oursRuns.reduce((n, r) => n + r.bad, 0);
    const totalRequests = oursRuns.reduce((n, r) => n + r.requests, 0);
    return report('Finished-audio Range serving (64 KiB random ranges)', [
      {
        metric: 'requests/s (median of runs)',
        ours: oursRps.toFixed(0),
        reference: `nginx ${nginxRps.toFixed(0)}`,
        ratio: `${ratio.toFixed(2)}×`,
        target: '≥ 0.6× nginx',
        pass: ratio >= 0.6,
      },
      {
        metric: 'requests/s vs bare node:http',
        ours: oursRps.toFixed(0),
        reference: `bare ${bareRps.toFixed(0)}`,
        ratio: `${(oursRps / bareRps).toFixed(2)}×`,
        target: '(the platform: bare / nginx ' + (bareRps / nginxRps).toFixed(2) + '×)',
        pass: true,
      },
      {
        metric: 'answers other than 206',
        ours: String(bad),
        reference: String(nginxRuns.reduce((n, r) => n + r.bad, 0)),
        ratio: '',
        target: '0',
        pass: bad === 0,
      },
      {
        metric: 'service CPU-ms per request (its child processes included)',
        ours: ((oursCpu * 1000) / totalRequests).toFixed(3),
        reference: `child processes ${((childCpu * 1000) / totalRequests).toFixed(3)}`,
        ratio: '',
        target: '',
        pass: true,
      },
    ]);
  } finally {
    await front?.stop();
    await nginx?.stop();
    bare?.kill();
    await second?.stop();
    await server.stop();
  }
}

runBench(main);
