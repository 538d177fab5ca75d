// Strict type-aware lint: no floating promises, exhaustive switches, no `any`, no focused tests;
// and the floors of src/ (docs/architecture.md, "Floors and boundaries").
import tseslint from 'typescript-eslint';

const noFocusedTests = [
  {
    selector: "CallExpression[callee.object.name=/^(it|test|describe)$/][callee.property.name='only']",
    message: 'No focused tests.',
  },
  {
    selector: "CallExpression[callee.object.name=/^(it|test|describe)$/][callee.property.name='skip']",
    message: 'No skipped tests.',
  },
];

/**
 * The floors of src/, ground first. A folder imports only folders on lower floors (never one on
 * its own floor: two folders that need each other belong on different floors, or together). The
 * composition root stands above them all and is not listed: src/app.ts, src/adapters.ts,
 * src/main.ts, src/database-warm-up.ts (it uses every domain's store) and src/cli/ (the CLI's
 * entry points).
 */
export const floors = [
  ['common', 'errors', 'config', 'text'],
  ['storage', 'audio'],
  ['voices', 'splitter'],
  ['tasks'],
  ['stream', 'accounts', 'openai'],
  ['admin', 'wyoming'],
  ['http'],
];

/**
 * Adapter files, by the technology in their name: the composition root picks them, everything
 * else imports the port they implement. Tests may import them.
 */
const adapterFile = String.raw`\.(?:fs|s3|redis|pglite|postgres|bullmq|memory|http|native|wasm|cached|prom|sql)\.js$`;

/** Files below the root that may import adapters anyway, and why. */
const adapterImporters = {
  // The LAME build is a property of the machine: the port opens the native addon when it loads
  // there, else the wasm build (the encoder workers ask it, not the root).
  'src/audio/lame-stream.ts': 'picks the LAME build that loads',
  // One opener serves the service's root, the CLI and tests, and loads only the engine it opens
  // (a scale-out node never loads PGlite, an embedded one never pg).
  'src/storage/database.ts': 'opens the database adapter on demand',
  // An adapter built on another of the same kind: files in a folder of growing files, piece
  // audio as growing files, Redis events fanned out locally through the in-memory events.
  'src/storage/growing-file.fs.ts': 'a folder of growing files is a run directory',
  'src/tasks/piece-audio.fs.ts': 'piece audio is kept as growing files',
  'src/tasks/queue/task-events.redis.ts': 'wakes local waiters through the in-memory events',
  // @fastify/rate-limit builds its store itself from the choice the root made ({ kind }).
  'src/http/rate-limit.ts': 'builds the rate-limit store the root chose',
  // The metrics registry is the health routes' dependency: its type comes with its adapter.
  'src/http/routes/health.routes.ts': 'serves the metrics registry',
};

/** The import rules of one folder on floor `level` (its index in `floors`). */
function boundaryRules(folder, level, { mayImportAdapters }) {
  const above = [
    ...floors
      .slice(level)
      .flat()
      .filter((name) => name !== folder),
    'cli',
  ];
  const below = floors.slice(0, level).flat();
  const patterns = [
    {
      regex: String.raw`^(?:\.\./)+(?:(?:${above.join('|')})/|(?:app|adapters|main)\.js$)`,
      message: `${folder}/ stands on floor ${level + 1}: it imports only ${below.length === 0 ? 'packages' : `${below.join(', ')}`}, never a floor above, its own floor or the composition root.`,
    },
  ];
  if (folder !== 'http')
    patterns.push({ regex: '^(?:fastify|@fastify/)', message: 'Only http/ knows Fastify.' });
  if (!mayImportAdapters)
    patterns.push({
      regex: adapterFile,
      message: 'Import the port: the composition root (src/app.ts, src/adapters.ts) picks the adapter.',
    });
  return {
    'no-restricted-imports': ['error', { patterns }],
    'no-restricted-syntax': [
      'error',
      ...noFocusedTests,
      ...(mayImportAdapters
        ? []
        : [
            {
              selector: String.raw`ImportExpression[source.value=/^\./]`,
              message:
                'Import project modules statically (the floors are checked on those); only the root loads on demand.',
            },
          ]),
    ],
  };
}

/** One config block per folder of src/ (tests excepted), and one per listed exception. */
export const boundaries = floors.flatMap((names, level) =>
  names.flatMap((folder) => {
    const exceptions = Object.keys(adapterImporters).filter((file) => file.startsWith(`src/${folder}/`));
    return [
      {
        files: [`src/${folder}/**/*.ts`],
        ignores: ['**/*.test.ts', ...exceptions],
        rules: boundaryRules(folder, level, { mayImportAdapters: false }),
      },
      ...exceptions.map((file) => ({
        files: [file],
        rules: boundaryRules(folder, level, { mayImportAdapters: true }),
      })),
    ];
  }),
);

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      'data/**',
      'scratch/**',
      'bin/**',
      'native/**',
      'eslint.config.js',
    ],
  },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        // node:test's describe/it return promises the runner itself awaits.
        {
          allowForKnownSafeCalls: [
            { from: 'package', name: ['describe', 'it', 'test', 'suite'], package: 'node:test' },
          ],
        },
      ],
      '@typescript-eslint/switch-exhaustiveness-check': [
        'error',
        { considerDefaultExhaustiveForUnions: true },
      ],
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/require-await': 'off',
      'no-restricted-syntax': ['error', ...noFocusedTests],
    },
  },
  ...boundaries,
  {
    // Node scripts and the web console's browser modules: linted without type information.
    files: ['scripts/**/*.mjs', 'web/**/*.js'],
    ...tseslint.configs.disableTypeChecked,
  },
);
