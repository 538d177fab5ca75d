#!/usr/bin/env node
// An S3-compatible server for the scale-out tests (s3rver, a fake S3 from npm), on loopback.
// Usage: node scripts/s3-test-server.mjs PORT DIRECTORY. Production uses any real S3-compatible store.
// Signatures are not verified: s3rver's SigV4 check disagrees with current aws-sdk v3 requests;
// the service's S3 adapter signs every request normally.
import { createRequire } from 'node:module';
import { mkdirSync } from 'node:fs';

const require = createRequire(import.meta.url);
// Three s3rver flaws, patched so that it behaves like S3 where the contract tests look:
// 1. It encrypts ListObjectsV2 continuation tokens with single DES, which OpenSSL 3 keeps in its
//    legacy provider: every listing longer than one page (1000 keys) failed with a 500. Triple DES
//    with the key three times is the same cipher (E·D·E with one key is E), in the default provider.
const crypto = require('node:crypto');
for (const name of ['createCipheriv', 'createDecipheriv']) {
  const original = crypto[name];
  crypto[name] = (algorithm, key, ...rest) =>
    algorithm === 'des'
      ? original('des-ede3-cbc', Buffer.concat([key, key, key]), ...rest)
      : original(algorithm, key, ...rest);
}
const S3rver = require('@20minutes/s3rver');
const FilesystemStore = require('@20minutes/s3rver/lib/stores/filesystem');

/** Wraps an async method so calls with the same queue id run one after another. */
function serialize(method, queueId) {
  const tails = new Map();
  return function serialized(...args) {
    const id = queueId(...args);
    const done = (tails.get(id) ?? Promise.resolve()).then(() => method.apply(this, args));
    const tail = done.then(
      () => undefined,
      () => undefined,
    );
    tails.set(id, tail);
    void tail.then(() => tails.get(id) === tail && tails.delete(id));
    return done;
  };
}
// 2. DeleteObjects deletes its keys concurrently and each delete removes the folders it finds
//    empty: two deletes in one folder race (readdir of a removed folder → 500). One at a time.
FilesystemStore.prototype.deleteObject = serialize(FilesystemStore.prototype.deleteObject, () => 'all');
// 3. PUTs write straight into the object's file, so two PUTs of one key interleave their bytes
//    (S3 keeps one of them whole). PUTs of one key one after another.
FilesystemStore.prototype.putObject = serialize(
  FilesystemStore.prototype.putObject,
  (object) => `${object.bucket}/${object.key}`,
);

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
