#!/usr/bin/env node
// Operator CLI entry: the compiled CLI (dist/cli/main.js), after checking that dist/ is a build of
// the sources beside it (`npm run build` makes one; `npm ci` does it once at install).
import { join } from 'node:path';
import { requireFreshBuild } from '../scripts/build-stamp.mjs';

requireFreshBuild(join(import.meta.dirname, '..'));
await import('../dist/cli/main.js');
