// Load-balancer probes and metric scrapers ask every few seconds; at info their request lines would
// bury everything else. A successful /healthz, /readyz or /metrics request is logged at debug,
// every other request (a failing probe included) at info.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { startTestApp, type TestApp } from './helpers/test-app.js';

interface Line {
  level: number;
  msg: string;
  req?: { url: string };
}

const DEBUG = 20;
const INFO = 30;

describe('request lines of probes are at debug', () => {
  const apps: TestApp[] = [];
  after(async () => Promise.all(apps.map((a) => a.close())));

  const run = async (level: string): Promise<Line[]> => {
    const lines: Line[] = [];
    const t = await startTestApp({
      env: { LOG_LEVEL: level },
      logger: { stream: { write: (line: string) => lines.push(JSON.parse(line) as Line) } },
    });
    apps.push(t);
    for (const url of ['/healthz', '/readyz', '/healthz?x=1', '/api/account/info'])
      await t.app.http.inject({ method: 'GET', url });
    return lines.filter((l) => l.msg === 'request completed');
  };

  it('at info only the API request is logged; at debug the probes too, at debug level', async () => {
    const info = await run('info');
    assert.deepEqual(
      info.map((l) => [l.req?.url, l.level]),
      [['/api/account/info', INFO]],
    );
    const debug = await run('debug');
    assert.deepEqual(
      debug.map((l) => [l.req?.url, l.level]),
      [
        ['/healthz', DEBUG],
        ['/readyz', DEBUG],
        ['/healthz?x=[redacted]', DEBUG],
        ['/api/account/info', INFO],
      ],
    );
  });
});
