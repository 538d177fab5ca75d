#!/usr/bin/env node
// An S3-compatible server for the scale-out tests (s3rver, a fake S3 from npm), on loopback.
// Usage: node scripts/s3-test-server.mjs PORT DIRECTORY. Production uses any real S3-compatible store.
// Signatures are not verified: s3rver's SigV4 check disagrees with current aws-sdk v3 requests;
// the service's S3 adapter signs every request normally.
import { createRequire } from 'node:module';
import { mkdirSync } from 'node:fs';

const require = createRequire(import.meta.url);
const S3rver = require('@20minutes/s3rver');
const [port = '54569', directory = '/tmp/voicegen-s3'] = process.argv.slice(2);
mkdirSync(directory, { recursive: true });
const server = new S3rver({
  address: '127.0.0.1',
  port: Number(port),
  directory,
  silent: true,
  allowMismatchedSignatures: true,
});
const { address, port: bound } = await server.run();
console.log(`s3rver listening on http://${address}:${bound} (data in ${directory})`);
for (const signal of ['SIGINT', 'SIGTERM'])
  process.on(signal, () => void server.close().then(() => process.exit(0)));
