// The import-boundary rules of eslint.config.js catch what they promise: an import up a floor, a
// domain folder importing http/ or Fastify, an adapter imported outside the composition root, a
// dynamic import dodging the checks; and they leave the root and tests alone. The real tree is
// checked by `npm run lint`; these probes are linted as text and never written.
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, it } from 'node:test';
import { ESLint, type Linter } from 'eslint';
import tseslint from 'typescript-eslint';

const root = join(import.meta.dirname, '..');

interface BoundaryConfig {
  floors: string[][];
  boundaries: Linter.Config[];
}

async function boundaryConfig(): Promise<BoundaryConfig> {
  // Loaded by URL: the config is plain JavaScript outside the TypeScript project.
  return (await import(pathToFileURL(join(root, 'eslint.config.js')).href)) as BoundaryConfig;
}

/** The boundary messages for `code` as if it stood at `filePath` (relative to the repository). */
async function lint(filePath: string, code: string): Promise<string[]> {
  const { boundaries } = await boundaryConfig();
  const eslint = new ESLint({
    cwd: root,
    overrideConfigFile: true,
    overrideConfig: [{ files: ['**/*.ts'], languageOptions: { parser: tseslint.parser } }, ...boundaries],
  });
  const [result] = await eslint.lintText(code, { filePath });
  return (result?.messages ?? []).map((message) => message.message);
}

void describe('import boundaries (eslint.config.js)', () => {
  void it('refuses an import from a higher floor, and from the same floor', async () => {
    const up = await lint('src/storage/probe.ts', "import { TaskStore } from '../tasks/task-store.js';\n");
    assert.equal(up.length, 1);
    assert.match(up[0] ?? '', /storage\/ stands on floor 2/);
    const beside = await lint('src/audio/engines/probe.ts', "import '../../storage/blob-store.js';\n");
    assert.equal(beside.length, 1, 'audio/ and storage/ share a floor');
  });

  void it('keeps http/ and Fastify out of the domain', async () => {
    const messages = await lint(
      'src/tasks/probe.ts',
      "import { envelope } from '../http/envelope.js';\nimport type { FastifyInstance } from 'fastify';\nimport cors from '@fastify/cors';\n",
    );
    assert.equal(messages.length, 3);
    assert.match(messages[1] ?? '', /Only http\/ knows Fastify/);
  });

  void it('lets only the composition root and tests import adapters', async () => {
    const adapter = "import { FsGrowingFile } from '../storage/growing-file.fs.js';\n";
    const fromStream = await lint('src/stream/probe.ts', adapter);
    assert.equal(fromStream.length, 1);
    assert.match(fromStream[0] ?? '', /Import the port/);
    assert.deepEqual(await lint('src/stream/probe.ts', "import '../storage/growing-file.js';\n"), []);
    const sqlStore = await lint('src/admin/probe.ts', "import '../accounts/account-store.sql.js';\n");
    assert.equal(sqlStore.length, 1, 'a store over SQL is an adapter too');
    assert.deepEqual(await lint('src/admin/probe.ts', "import '../accounts/account-store.js';\n"), []);
    assert.deepEqual(await lint('src/app.ts', "import './storage/growing-file.fs.js';\n"), []);
    assert.deepEqual(await lint('src/cli/probe.ts', "import '../adapters.js';\n"), []);
    assert.deepEqual(await lint('src/stream/probe.test.ts', adapter), []);
  });

  void it('refuses an import of the composition root and a dynamic import below it', async () => {
    assert.equal((await lint('src/http/probe.ts', "import { buildApp } from '../app.js';\n")).length, 1);
    const dynamic = await lint(
      'src/voices/probe.ts',
      "export const load = () => import('./voice-store.js');\n",
    );
    assert.equal(dynamic.length, 1);
    assert.match(dynamic[0] ?? '', /statically/);
  });

  void it('places every folder of src/ on a floor, or in the composition root', async () => {
    const { floors } = await boundaryConfig();
    const placed = new Set([...floors.flat(), 'cli']);
    const folders = readdirSync(join(root, 'src'), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name);
    assert.deepEqual(
      folders.filter((name) => !placed.has(name)),
      [],
      'a new folder needs its floor',
    );
    for (const name of placed) assert.ok(existsSync(join(root, 'src', name)), `src/${name} exists`);
  });
});
