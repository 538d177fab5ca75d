#!/usr/bin/env node
// Operator CLI entry of the built package (run `npm run build` first; `npm run cli --` works from source).
import '../dist/cli/main.js';
