import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../config/config.js';
import { chooseLogFormat, prettyLogStream, prettyMessage } from './log-format.js';
import { createHttpServer } from './server.js';

describe('log format', () => {
  it('is pretty on a terminal and JSON anywhere else, unless LOG_FORMAT says', () => {
    assert.equal(chooseLogFormat('auto', true), 'pretty');
    assert.equal(chooseLogFormat('auto', false), 'json');
    assert.equal(chooseLogFormat('auto', undefined), 'json');
    assert.equal(chooseLogFormat('json', true), 'json');
    assert.equal(chooseLogFormat('pretty', false), 'pretty');
    assert.equal(chooseLogFormat('pretty', undefined), 'pretty');
  });

  it('is read from LOG_FORMAT, auto by default, and refuses anything else', () => {
    assert.equal(loadConfig({}).logFormat, 'auto');
    assert.equal(loadConfig({ LOG_FORMAT: 'json' }).logFormat, 'json');
    assert.equal(loadConfig({ LOG_FORMAT: 'pretty' }).logFormat, 'pretty');
    assert.throws(
      () => loadConfig({ LOG_FORMAT: 'yaml' }),
      (err: unknown) => err instanceof ConfigError && /LOG_FORMAT/.test(err.message),
    );
  });

  it('puts a request on one short line', () => {
    const line = { req: { method: 'GET', url: '/api/voice' }, res: { statusCode: 200 }, responseTime: 3.14 };
    assert.equal(prettyMessage({ ...line, msg: 'request completed' }, 'msg'), 'GET /api/voice 200 3.1 ms');
    assert.equal(
      prettyMessage({ ...line, msg: 'request errored' }, 'msg'),
      'GET /api/voice 200 3.1 ms request errored',
    );
    assert.equal(prettyMessage({ msg: 'voice service ready' }, 'msg'), 'voice service ready');
    assert.equal(prettyMessage({ req: { method: 'GET' }, msg: 'odd' }, 'msg'), 'odd');
  });

  it('writes human lines through the real server, its redaction applied', async () => {
    const out = new PassThrough();
    let text = '';
    out.on('data', (chunk: Buffer) => (text += chunk.toString()));
    const app = createHttpServer(loadConfig({ LOG_LEVEL: 'info' }), {
      stream: await prettyLogStream(false, out),
    });
    try {
      await app.ready();
      app.log.info('voice service ready');
      await app.inject({ method: 'GET', url: '/nowhere?auth=Tok3n-secret-value' });
    } finally {
      await app.close();
    }
    const lines = text.trim().split('\n');
    assert.ok(
      lines.some((l) => /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: voice service ready$/.test(l)),
      text,
    );
    assert.ok(
      lines.some((l) => /INFO: GET \/nowhere\?auth=\[redacted\] 404 \d+\.\d ms$/.test(l)),
      text,
    );
    assert.ok(!text.includes('Tok3n-secret-value'), text);
    assert.ok(!lines.some((l) => l.startsWith('{')), 'no JSON line');
  });
});
