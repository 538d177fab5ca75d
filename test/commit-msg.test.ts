// The commit-subject rule: `npm run prepare` installs the versioned hooks in a git checkout (and
// does nothing without one), the commit-msg hook refuses a subject over 72 characters, and the CI
// check lists every commit after the baseline whose subject is too long. Runs in a throwaway
// repository holding copies of the scripts, never in this one.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

const root = join(import.meta.dirname, '..');
const long = `Add ${'x'.repeat(69)}`; // 73 characters
const limit = `Add ${'x'.repeat(68)}`; // 72 characters

let dir: string;

function run(command: string, args: string[], cwd = dir) {
  return spawnSync(command, args, {
    cwd,
    encoding: 'utf8',
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@example.org',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@example.org',
      GIT_CONFIG_GLOBAL: '/dev/null',
      GIT_CONFIG_NOSYSTEM: '1',
    },
  });
}

function copyTooling(into: string): void {
  mkdirSync(join(into, 'scripts'), { recursive: true });
  mkdirSync(join(into, '.githooks'), { recursive: true });
  for (const file of [
    'scripts/check-commit-msg.mjs',
    'scripts/install-git-hooks.mjs',
    '.githooks/commit-msg',
  ])
    copyFileSync(join(root, file), join(into, file));
  chmodSync(join(into, '.githooks/commit-msg'), 0o755);
}

/** Commits an empty change with `message`; the hook runs unless `verify` is false. */
function commit(message: string, verify = true) {
  return run('git', ['commit', '--allow-empty', '-q', ...(verify ? [] : ['--no-verify']), '-m', message]);
}

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'commit-msg-'));
  assert.equal(run('git', ['init', '-q']).status, 0);
  copyTooling(dir);
});

after(() => {
  rmSync(dir, { recursive: true, force: true });
});

void describe('commit subjects', () => {
  void it('prepare installs the hooks, which refuse a subject over 72 characters', () => {
    assert.equal(run('node', ['scripts/install-git-hooks.mjs']).status, 0);
    assert.equal(run('git', ['config', 'core.hooksPath']).stdout.trim(), '.githooks');
    const refused = commit(`${long}\n\nThe why.`);
    assert.notEqual(refused.status, 0);
    assert.match(refused.stderr, /73 characters; at most 72/);
    assert.equal(commit(`${limit}\n\nThe why.`).status, 0);
    // A first paragraph of two lines is one subject, as `git log` shows it.
    assert.notEqual(
      commit('Add a subject that goes on\nover a second line of the same paragraph, too long').status,
      0,
    );
  });

  void it('the CI check lists the long subjects after the baseline and passes without them', () => {
    const base = run('git', ['rev-parse', 'HEAD']).stdout.trim();
    assert.equal(run('node', ['scripts/check-commit-msg.mjs', '--new-commits', base]).status, 0);
    assert.equal(commit(long, false).status, 0);
    const checked = run('node', ['scripts/check-commit-msg.mjs', '--new-commits', base]);
    assert.equal(checked.status, 1);
    assert.match(checked.stderr, new RegExp(long));
    const missing = run('node', ['scripts/check-commit-msg.mjs', '--new-commits', '0'.repeat(40)]);
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, /not in this clone/);
  });

  void it('prepare does nothing and succeeds where there is no git checkout', () => {
    const bare = mkdtempSync(join(tmpdir(), 'commit-msg-nogit-'));
    try {
      copyTooling(bare);
      writeFileSync(join(bare, 'package.json'), '{}');
      const result = run('node', ['scripts/install-git-hooks.mjs'], bare);
      assert.equal(result.status, 0);
      assert.equal(result.stderr, '');
    } finally {
      rmSync(bare, { recursive: true, force: true });
    }
  });
});
