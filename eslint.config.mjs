// Lint enforces the layering of CONVENTIONS.md: which folder may import what. Two halves, as in
// VS Code: the driver rules below (`no-restricted-imports`: which folder may use better-sqlite3,
// dockerode, electron, node:; VS Code's `local/code-layering`), and the rooms table (the local rule
// `corral/rooms` in eslint-rules/rooms.mjs: which room of src/main may import which; VS Code's
// `local/code-import-patterns`). test/unit/tooling/layering.test.ts proves each line bites;
// scripts/import-graph.mjs (the second half of `npm run lint`) checks the whole graph for circles.
import tseslint from 'typescript-eslint'
import globals from 'globals'
import corral from './eslint-rules/rooms.mjs'

const below = {
  // Everything under the orchestrator, highest first; each room's `may` is the rooms under it.
  orchestrator: ['harness', 'hands', 'api', 'vault', 'session', 'config', 'shared'],
  hands: ['api', 'vault', 'session', 'config', 'shared'],
}

/**
 * The rooms of src/main, highest first. A file may import its own room and what its room's `may`
 * lists (rooms, or single files where a room is seen only through one door); nothing else of
 * src/main or src/shared. Packages and drivers are the rules further down.
 */
export const rooms = {
  order: 'index.ts | cli/ → engine.ts, engine-hands.ts, doctor.ts → orchestrator → harness → hands → {api, vault} → session → {config.ts, src/shared}',
  rooms: [
    { room: 'desktop', holds: ['src/main/index.ts'], may: ['engine', ...below.orchestrator, 'orchestrator'] }, // the Electron shell never imports the CLI
    { room: 'cli', holds: ['src/main/cli/**'], may: ['engine', ...below.orchestrator, 'orchestrator'] },
    { room: 'engine', holds: ['src/main/engine.ts', 'src/main/engine-hands.ts', 'src/main/doctor.ts'], may: ['orchestrator', ...below.orchestrator] },
    { room: 'orchestrator', holds: ['src/main/orchestrator/**'], may: below.orchestrator },
    // The harness depends on interfaces: hands only through the tool-router contract, session only
    // through the log's and the journal's interfaces (the driver rules below also keep it off drivers).
    { room: 'harness', holds: ['src/main/harness/**'], may: ['src/main/hands/tool-router.ts', 'src/main/session/event-log.ts', 'src/main/session/tool-journal.ts', 'config', 'shared'] },
    { room: 'hands', holds: ['src/main/hands/**'], may: below.hands },
    { room: 'api', holds: ['src/main/api/**'], may: ['session', 'config', 'shared'] }, // a route appends to the log; the log wakes the brain
    { room: 'vault', holds: ['src/main/vault/**'], may: ['session', 'config', 'shared'] },
    { room: 'session', holds: ['src/main/session/**'], may: ['config', 'shared'] },
    { room: 'config', holds: ['src/main/config.ts'], may: ['shared'] },
    { room: 'shared', holds: ['src/shared/**'], may: [] },
  ],
  private: [
    { file: 'src/main/session/database.ts', why: 'nothing but session/ touches SQL or the Db type; ask a session store (or open and close the database through session/)' },
  ],
  // Known violations let through for now: { from, to, removedBy }. Issue #10 started with eleven
  // and ended with none; a new entry names who removes it, scripts/import-graph.mjs fails on an
  // entry no import needs any more, and layering.test.ts holds the list empty until one is argued for.
  allow: [],
}

const drivers = {
  sqlite: { name: 'better-sqlite3', message: 'better-sqlite3 is imported only under src/main/session/.' },
  docker: { name: 'dockerode', message: 'dockerode is imported only under src/main/hands/docker/.' },
  electron: { name: 'electron', message: 'electron is imported only in src/main/index.ts and src/preload/ (engine code runs in plain Node).' },
}
const nodeBuiltins = { group: ['node:*'], message: 'src/shared and the renderer are plain TypeScript: no node: modules.' }
const mainFromElsewhere = { group: ['**/main/**', '../main/*', '../../main/*'], message: 'the renderer never imports src/main; talk to it through src/renderer/src/api.' }

export default tseslint.config(
  { ignores: ['out/**', 'dist/**', 'node_modules/**', 'test-results/**', 'playwright-report/**', 'resources/**'] },
  {
    files: ['**/*.{ts,tsx,mts,mjs}'],
    languageOptions: { parser: tseslint.parser, globals: { ...globals.node } },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      'no-debugger': 'error',
      'no-dupe-keys': 'error',
      'no-unreachable': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    files: ['src/**/*.{ts,tsx}'],
    plugins: { corral },
    rules: {
      'corral/rooms': ['error', rooms],
      // CONVENTIONS.md: an index exports by name, so adding to it is adding public surface on purpose.
      'no-restricted-syntax': ['error', { selector: 'ExportAllDeclaration', message: 'export by name, not `export *` (CONVENTIONS.md: adding to a module\'s face is adding public surface).' }],
    },
  },
  {
    files: ['src/main/**/*.ts'],
    ignores: ['src/main/session/**', 'src/main/hands/docker/**', 'src/main/index.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: [drivers.sqlite, drivers.docker, drivers.electron] }] },
  },
  {
    files: ['src/main/session/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: [drivers.docker, drivers.electron] }] },
  },
  {
    files: ['src/main/hands/docker/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: [drivers.sqlite, drivers.electron] }] },
  },
  {
    files: ['src/main/index.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: [drivers.sqlite, drivers.docker] }] },
  },
  {
    files: ['src/main/harness/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [drivers.sqlite, drivers.docker, drivers.electron],
          patterns: [
            { group: ['**/hands/docker/**', '**/hands/bubblewrap/**', '**/session/sqlite-*', '**/session/database'], message: 'the harness depends on interfaces (EventLog, ToolRouter, ModelClient), never on a driver.' },
          ],
        },
      ],
    },
  },
  {
    files: ['src/shared/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { paths: [drivers.sqlite, drivers.docker, drivers.electron], patterns: [nodeBuiltins, { group: ['**/main/**', '**/renderer/**', '**/preload/**'], message: 'src/shared imports nothing from the processes.' }] },
      ],
    },
  },
  {
    files: ['src/renderer/**/*.{ts,tsx}'],
    languageOptions: { globals: { ...globals.browser } },
    rules: { 'no-restricted-imports': ['error', { paths: [drivers.sqlite, drivers.docker, drivers.electron], patterns: [nodeBuiltins, mainFromElsewhere] }] },
  },
  {
    files: ['src/preload/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: [drivers.sqlite, drivers.docker], patterns: [{ group: ['**/main/**'], message: 'the preload exposes the contract (src/shared), not main-process code.' }] }] },
  },
)
