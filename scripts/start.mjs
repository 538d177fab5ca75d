#!/usr/bin/env node
// `npm start`: runs the compiled service (dist/main.js) in this process, after checking that
// dist/ is a build of the sources beside it (a hash, no compile: see build-stamp.mjs).
import { join } from 'node:path';
import { requireFreshBuild } from './build-stamp.mjs';

requireFreshBuild(join(import.meta.dirname, '..'));
await import('../dist/main.js');
