#!/usr/bin/env node
// npm `prepare`: points git at the versioned hooks (.githooks) of this checkout. Does nothing where
// there is no git checkout (an unpacked tarball, a build without .git) or no git at all, so it never
// fails an install.
import { execFileSync } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { join } from 'node:path';

const root = realpathSync(join(import.meta.dirname, '..'));
function git(...args) {
  return execFileSync('git', args, {
    cwd: root,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  }).trim();
}

try {
  // Only where this package is the checkout itself, not a folder inside another repository.
  if (existsSync(join(root, '.githooks')) && git('rev-parse', '--show-toplevel') === root) {
    git('config', 'core.hooksPath', '.githooks');
  }
} catch {
  // Not a git checkout, or git is missing: no hooks to install.
}
