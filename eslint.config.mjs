// Lint enforces the layering of CONVENTIONS.md: which folder may import what.
// (VS Code does the same with its `local/code-layering` rule.)
import tseslint from 'typescript-eslint'
import globals from 'globals'

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
