// Compiled once, started at once: the build check the launchers run (a hash of the sources against
// dist/build-stamp.json), and the real launchers on a build made in a throwaway copy of the
// project — `voicegen --help` from dist/, `npm start`'s launcher up to a healthy /healthz, and the
// clear refusal of a missing or stale build. Never touches this checkout's own dist/.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildProblem, buildState, sourceHash, STAMP_FILE } from '../scripts/build-stamp.mjs';
import { freePort } from './helpers/free-port.js';
import { isolatedCliEnv } from './helpers/cli.js';

const root = join(import.meta.dirname, '..');

void describe('the build check', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'voicegen-stamp-'));
    mkdirSync(join(dir, 'src', 'http'), { recursive: true });
    writeFileSync(join(dir, 'src', 'main.ts'), 'export const a = 1;\n');
    writeFileSync(join(dir, 'src', 'http', 'server.ts'), 'export const b = 2;\n');
    writeFileSync(join(dir, 'tsconfig.json'), '{}\n');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const stamp = (hash: string) => {
    mkdirSync(join(dir, 'dist'), { recursive: true });
    writeFileSync(join(dir, 'dist', STAMP_FILE), JSON.stringify({ sourceHash: hash }));
  };

  void it('says missing without a stamp, fresh with one of these sources, stale after an edit', () => {
    assert.equal(buildState(dir), 'missing');
    assert.match(buildProblem(dir) ?? '', /not built .*run `npm run build`/);
    stamp(sourceHash(dir));
    assert.equal(buildState(dir), 'fresh');
    assert.equal(buildProblem(dir), undefined);

    // A test file is not compiled into dist/: adding one changes nothing.
    writeFileSync(join(dir, 'src', 'main.test.ts'), 'test\n');
    assert.equal(buildState(dir), 'fresh');

    appendFileSync(join(dir, 'src', 'http', 'server.ts'), 'export const c = 3;\n');
    assert.equal(buildState(dir), 'stale');
    assert.match(buildProblem(dir) ?? '', /built from other sources .*run `npm run build`/);
    stamp(sourceHash(dir));
    assert.equal(buildState(dir), 'fresh');

    // So do a compiler setting, a new source and a removed one.
    writeFileSync(join(dir, 'tsconfig.json'), '{"compilerOptions":{}}\n');
    assert.equal(buildState(dir), 'stale');
    stamp(sourceHash(dir));
    writeFileSync(join(dir, 'src', 'extra.ts'), 'export {};\n');
    assert.equal(buildState(dir), 'stale');
    rmSync(join(dir, 'src', 'extra.ts'));
    assert.equal(buildState(dir), 'fresh');

    // A garbled stamp is no build.
    writeFileSync(join(dir, 'dist', STAMP_FILE), '{not json');
    assert.equal(buildState(dir), 'missing');
  });

  void it('runs an installed package that ships dist/ without src/', () => {
    const installed = mkdtempSync(join(tmpdir(), 'voicegen-installed-'));
    try {
      assert.equal(buildState(installed), 'missing');
      mkdirSync(join(installed, 'dist'));
      assert.equal(buildState(installed), 'no-sources');
      assert.equal(buildProblem(installed), undefined);
    } finally {
      rmSync(installed, { recursive: true, force: true });
    }
  });
});

void describe('the compiled launchers', () => {
  let project: string;
  let dataDir: string;

  const node = (args: string[], timeoutMs = 120_000) =>
    spawnSync(process.execPath, args, {
      cwd: project,
      encoding: 'utf8',
      env: isolatedCliEnv({ DATA_DIR: dataDir }),
      timeout: timeoutMs,
    });

  before(() => {
    // What a clone holds, with this checkout's installed dependencies: a build of its own.
    project = mkdtempSync(join(tmpdir(), 'voicegen-build-'));
    dataDir = join(project, 'data');
    for (const path of ['src', 'scripts', 'bin', 'package.json', 'tsconfig.json', 'tsconfig.build.json'])
      cpSync(join(root, path), join(project, path), { recursive: true });
    for (const path of ['node_modules', 'web']) symlinkSync(join(root, path), join(project, path));
  });
  after(() => rmSync(project, { recursive: true, force: true }));

  void it('refuse to run before the build, with one clear line', () => {
    for (const launcher of ['bin/voicegen.js', 'scripts/start.mjs']) {
      const result = node([launcher, '--help']);
      assert.equal(result.status, 1, launcher);
      assert.equal(result.stdout, '');
      assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
      assert.match(result.stderr, /voicegen is not built .*`npm run build`/);
    }
  });

  void it('`npm run build` compiles and stamps; the CLI answers --help from dist/', () => {
    // A compile and the database template: a minute on a quiet machine, far more on a busy one.
    const built = node(['scripts/build.mjs'], 900_000);
    assert.equal(built.status, 0, built.stderr + built.stdout);
    assert.equal(buildState(project), 'fresh');
    assert.ok(existsSync(join(project, 'dist', 'pglite-template.tar.gz')), 'the database template');
    const help = node(['bin/voicegen.js', '--help']);
    assert.equal(help.status, 0, help.stderr);
    assert.match(help.stdout, /^Usage: voicegen \[options\] \[command\]/);
    assert.match(help.stdout, /synth \[options\] <text>/);
    assert.equal(help.stderr, '');
  });

  void it("`npm start`'s launcher serves /healthz on a new DATA_DIR, and refuses once a source changed", async () => {
    const port = await freePort();
    const child = spawn(process.execPath, ['scripts/start.mjs'], {
      cwd: project,
      env: isolatedCliEnv({
        DATA_DIR: dataDir,
        HOST: '127.0.0.1',
        PORT: String(port),
        LOG_LEVEL: 'warn',
        FIRST_RUN_ACCOUNT: 'false',
      }),
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = once(child, 'exit');
    try {
      const deadline = Date.now() + 120_000;
      for (;;) {
        assert.equal(child.exitCode, null, `the service exited: ${stderr}`);
        assert.ok(Date.now() < deadline, `no healthy /healthz within 120 s: ${stderr}`);
        const healthy = await fetch(`http://127.0.0.1:${port}/healthz`).then(
          (res) => res.status === 200,
          () => false,
        );
        if (healthy) break;
        await sleep(100);
      }
    } finally {
      child.kill('SIGTERM');
      await exited;
    }

    appendFileSync(join(project, 'src', 'main.ts'), '\n// an edit after the build\n');
    const stale = node(['scripts/start.mjs']);
    assert.equal(stale.status, 1);
    assert.match(stale.stderr, /built from other sources .*`npm run build`/);
  });
});
