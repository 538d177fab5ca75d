// Adding model archives to MODELS_DIR: .tar.bz2 from a local HTTP server and .tar.gz from a file
// (archives of the tests' tiny VITS model, packed by Python's tarfile), a wrong hash, an entry
// outside the folder, a link, a truncated archive, one over the size limit and one that is no model
// are refused with nothing left behind; removal.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { isAppError } from '../../errors/app-error.js';
import { makeTinyVits } from '../../../test/helpers/tiny-vits.js';
import { installModel, removeModel } from './neural-install.js';

const work = mkdtempSync(join(tmpdir(), 'voicegen-install-'));
const served = new Map<string, Buffer>();
const server = createServer((req, res) => {
  const body = served.get(req.url ?? '');
  if (body === undefined) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(body);
});
let base = '';

/** Packs `entries` ([archive name, source path | text]) with tarfile; mode 'w:bz2' or 'w:gz'. */
function pack(
  out: string,
  mode: 'w:bz2' | 'w:gz',
  entries: [string, string][],
  links: [string, string][] = [],
) {
  const script = `
import io, json, sys, tarfile
out, mode, entries, links = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
with tarfile.open(out, mode) as tar:
    for name, src in entries:
        if src.startswith('text:'):
            data = src[5:].encode()
            info = tarfile.TarInfo(name); info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        else:
            tar.add(src, arcname=name)
    for name, target in links:
        info = tarfile.TarInfo(name); info.type = tarfile.SYMTYPE; info.linkname = target
        tar.addfile(info)
`;
  execFileSync('/usr/bin/python3', ['-c', script, out, mode, JSON.stringify(entries), JSON.stringify(links)]);
  return readFileSync(out);
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const isInvalid = (pattern: RegExp) => (err: unknown) =>
  isAppError(err) && err.code === 'VALIDATION_INVALID_VALUE' && pattern.test(err.message);

let tiny = '';
let bz2 = Buffer.alloc(0);

before(async () => {
  tiny = makeTinyVits(join(work, 'src'), 'tiny', 2);
  bz2 = pack(join(work, 'tiny.tar.bz2'), 'w:bz2', [['vits-tiny-en', tiny]]);
  served.set('/vits-tiny-en.tar.bz2', bz2);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  rmSync(work, { recursive: true, force: true });
});

describe('models add', () => {
  /** A fresh MODELS_DIR. */
  const modelsDir = () => mkdtempSync(join(work, 'models-'));
  /** Nothing but `names` in `dir` (no staging folder left). */
  const onlyHas = (dir: string, names: string[]) => assert.deepEqual(readdirSync(dir).sort(), names.sort());

  it('unpacks a .tar.bz2 from a URL with its hash into a folder named like the archive folder', async () => {
    const dir = modelsDir();
    const model = await installModel(`${base}/vits-tiny-en.tar.bz2`, {
      modelsDir: dir,
      maxBytes: 1 << 20,
      sha256: sha(bz2).toUpperCase(),
    });
    assert.deepEqual(
      [model.name, model.family, model.sampleRate, model.speakers],
      ['vits-tiny-en', 'vits', 16000, ['0', '1']],
    );
    onlyHas(dir, ['vits-tiny-en']);
    assert.deepEqual(readdirSync(join(dir, 'vits-tiny-en')).sort(), ['model.onnx', 'tokens.txt']);
    await assert.rejects(
      installModel(`${base}/vits-tiny-en.tar.bz2`, { modelsDir: dir, maxBytes: 1 << 20 }),
      (err) => isAppError(err) && err.code === 'VALIDATION_CONFLICT',
    );
    await assert.rejects(
      installModel(`${base}/missing.tar.bz2`, { modelsDir: dir, maxBytes: 1 << 20 }),
      isInvalid(/HTTP 404/),
    );
    onlyHas(dir, ['vits-tiny-en']);
  });

  it('unpacks a .tar.gz file with its files at the top under the given name', async () => {
    const dir = modelsDir();
    const gz = join(work, 'flat.tar.gz');
    pack(gz, 'w:gz', [
      ['model.onnx', join(tiny, 'model.onnx')],
      ['tokens.txt', join(tiny, 'tokens.txt')],
    ]);
    const model = await installModel(gz, { modelsDir: dir, maxBytes: 1 << 20, name: 'flat_voice' });
    assert.equal(model.name, 'flat_voice');
    onlyHas(dir, ['flat_voice']);
  });

  it('refuses a wrong hash, leaving nothing', async () => {
    const dir = modelsDir();
    await assert.rejects(
      installModel(`${base}/vits-tiny-en.tar.bz2`, {
        modelsDir: dir,
        maxBytes: 1 << 20,
        sha256: '0'.repeat(64),
      }),
      isInvalid(/SHA-256 is [0-9a-f]{64}, not the expected 0{64}/),
    );
    await assert.rejects(
      installModel(`${base}/vits-tiny-en.tar.bz2`, { modelsDir: dir, maxBytes: 1 << 20, sha256: 'abc' }),
      isInvalid(/64 hexadecimal digits/),
    );
    onlyHas(dir, []);
  });

  it('refuses an entry outside its folder and a link, writing nothing outside', async () => {
    const dir = modelsDir();
    const traversal = join(work, 'traversal.tar.bz2');
    pack(traversal, 'w:bz2', [
      ['m/model.onnx', join(tiny, 'model.onnx')],
      ['m/../../escaped.txt', 'text:owned'],
    ]);
    await assert.rejects(
      installModel(traversal, { modelsDir: dir, maxBytes: 1 << 20 }),
      isInvalid(/outside its folder/),
    );
    const absolute = join(work, 'absolute.tar.gz');
    pack(absolute, 'w:gz', [['/tmp/voicegen-escaped.txt', 'text:owned']]);
    await assert.rejects(
      installModel(absolute, { modelsDir: dir, maxBytes: 1 << 20 }),
      isInvalid(/outside its folder/),
    );
    const link = join(work, 'link.tar.gz');
    pack(link, 'w:gz', [['m/tokens.txt', join(tiny, 'tokens.txt')]], [['m/model.onnx', '/etc/passwd']]);
    await assert.rejects(installModel(link, { modelsDir: dir, maxBytes: 1 << 20 }), isInvalid(/link/));
    onlyHas(dir, []);
    assert.equal(existsSync(join(work, 'escaped.txt')), false);
    assert.equal(existsSync('/tmp/voicegen-escaped.txt'), false);
  });

  it('refuses a truncated archive, one over the size limit and one that is no model', async () => {
    const dir = modelsDir();
    for (const cut of [bz2.length >> 1, bz2.length - 20]) {
      const truncated = join(work, `truncated-${cut}.tar.bz2`);
      writeFileSync(truncated, bz2.subarray(0, cut));
      await assert.rejects(
        installModel(truncated, { modelsDir: dir, maxBytes: 1 << 20 }),
        isInvalid(/could not be unpacked/),
      );
    }
    await assert.rejects(
      installModel(`${base}/vits-tiny-en.tar.bz2`, { modelsDir: dir, maxBytes: 100 }),
      isInvalid(/larger than MODELS_MAX_ARCHIVE_BYTES/),
    );
    const notModel = join(work, 'notes.tar.gz');
    pack(notModel, 'w:gz', [['notes/readme.txt', 'text:hello']]);
    await assert.rejects(
      installModel(notModel, { modelsDir: dir, maxBytes: 1 << 20 }),
      isInvalid(/not a model this service runs: no \.onnx model file/),
    );
    const plain = join(work, 'plain.txt');
    writeFileSync(plain, 'not an archive');
    await assert.rejects(
      installModel(plain, { modelsDir: dir, maxBytes: 1 << 20 }),
      isInvalid(/neither \.tar\.bz2 nor \.tar\.gz/),
    );
    await assert.rejects(
      installModel(join(work, 'nope.tar.gz'), { modelsDir: dir, maxBytes: 1 << 20 }),
      isInvalid(/cannot read/),
    );
    onlyHas(dir, []);
  });

  it('removes a model folder; an unknown one is RESOURCE_NOT_FOUND', async () => {
    const dir = modelsDir();
    await installModel(`${base}/vits-tiny-en.tar.bz2`, { modelsDir: dir, maxBytes: 1 << 20 });
    await removeModel(dir, 'vits-tiny-en');
    onlyHas(dir, []);
    for (const name of ['vits-tiny-en', '..', '../models']) {
      await assert.rejects(
        removeModel(dir, name),
        (err) => isAppError(err) && err.code === 'RESOURCE_NOT_FOUND',
      );
    }
  });
});
