import { describe, expect, it } from 'vitest'
import { ESLint } from 'eslint'
import { dirname, relative, sep } from 'node:path'

// The lint config enforces CONVENTIONS.md's import boundaries; these cases prove each rule bites.
const eslint = new ESLint({ cwd: process.cwd() })

async function violations(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath })
  return result.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message)
}

describe('import layering', () => {
  it('refuses better-sqlite3 outside src/main/session', async () => {
    expect(await violations('src/main/harness/loop.ts', "import Database from 'better-sqlite3'\nexport const d = Database\n")).toHaveLength(1)
    expect(await violations('src/main/session/x.ts', "import Database from 'better-sqlite3'\nexport const d = Database\n")).toHaveLength(0)
  })

  it('refuses dockerode outside src/main/hands/docker', async () => {
    expect(await violations('src/main/hands/router.ts', "import Docker from 'dockerode'\nexport const d = Docker\n")).toHaveLength(1)
    expect(await violations('src/main/hands/docker/sandbox.ts', "import Docker from 'dockerode'\nexport const d = Docker\n")).toHaveLength(0)
  })

  it('refuses electron in engine code and allows it in the shell and preload', async () => {
    expect(await violations('src/main/engine.ts', "import { app } from 'electron'\nexport const a = app\n")).toHaveLength(1)
    expect(await violations('src/main/index.ts', "import { app } from 'electron'\nexport const a = app\n")).toHaveLength(0)
    expect(await violations('src/preload/index.ts', "import { ipcRenderer } from 'electron'\nexport const i = ipcRenderer\n")).toHaveLength(0)
  })

  it('keeps the renderer away from src/main and node modules', async () => {
    expect(await violations('src/renderer/src/App.tsx', "import { Engine } from '../../main/engine'\nexport const e = Engine\n")).toHaveLength(1)
    expect(await violations('src/renderer/src/App.tsx', "import { readFileSync } from 'node:fs'\nexport const r = readFileSync\n")).toHaveLength(1)
  })

  it('keeps src/shared free of node modules and process code', async () => {
    expect(await violations('src/shared/api/x.ts', "import { join } from 'node:path'\nexport const j = join\n")).toHaveLength(1)
    expect(await violations('src/shared/api/x.ts', "import { Engine } from '../../main/engine'\nexport const e = Engine\n")).toHaveLength(1)
  })

  it('keeps the harness off driver implementations', async () => {
    expect(await violations('src/main/harness/loop.ts', "import { SqliteEventLog } from '../session/sqlite-event-log'\nexport const s = SqliteEventLog\n")).toHaveLength(1)
    expect(await violations('src/main/harness/loop.ts', "import type { EventLog } from '../session/event-log'\nexport type E = EventLog\n")).toHaveLength(0)
  })
})

// The rooms of src/main (CONVENTIONS.md), written here independently of eslint.config.mjs's table:
// engine / cli / index → orchestrator → harness → hands → {api, vault} → session → shared, with
// config.ts beside shared at the bottom. A probe stands in each room and imports one file of every
// other room; each forbidden seam must fail lint and each allowed one must pass.
const ROOMS = {
  desktop: { probe: 'src/main/index.ts', target: 'src/main/index.ts' },
  cli: { probe: 'src/main/cli/probe.ts', target: 'src/main/cli/main.ts' },
  engine: { probe: 'src/main/engine.ts', target: 'src/main/engine.ts' },
  orchestrator: { probe: 'src/main/orchestrator/probe.ts', target: 'src/main/orchestrator/scheduler.ts' },
  harness: { probe: 'src/main/harness/probe.ts', target: 'src/main/harness/harness.ts' },
  hands: { probe: 'src/main/hands/probe.ts', target: 'src/main/hands/docker/probe.ts' },
  api: { probe: 'src/main/api/probe.ts', target: 'src/main/api/server.ts' },
  vault: { probe: 'src/main/vault/probe.ts', target: 'src/main/vault/vault.ts' },
  session: { probe: 'src/main/session/probe.ts', target: 'src/main/session/session-store.ts' },
  config: { probe: 'src/main/config.ts', target: 'src/main/config.ts' },
  shared: { probe: 'src/shared/api/probe.ts', target: 'src/shared/errors.ts' },
} as const
type Room = keyof typeof ROOMS
const UNDER_ORCHESTRATOR: Room[] = ['harness', 'hands', 'api', 'vault', 'session', 'config', 'shared']
const MAY: Record<Room, Room[]> = {
  desktop: ['engine', 'orchestrator', ...UNDER_ORCHESTRATOR],
  cli: ['engine', 'orchestrator', ...UNDER_ORCHESTRATOR],
  engine: ['orchestrator', ...UNDER_ORCHESTRATOR],
  orchestrator: UNDER_ORCHESTRATOR,
  harness: ['config', 'shared'], // and hands/session only through their interface files (below)
  hands: ['api', 'vault', 'session', 'config', 'shared'],
  api: ['session', 'config', 'shared'],
  vault: ['session', 'config', 'shared'],
  session: ['config', 'shared'],
  config: ['shared'],
  shared: [],
}

/** A relative specifier from one repository file to another, as code writes it ('../hands/sandbox'). */
function specifier(from: string, to: string): string {
  const rel = relative(dirname(from), to.replace(/\.ts$/, '')).split(sep).join('/')
  return rel.startsWith('.') ? rel : `./${rel}`
}

async function roomViolations(filePath: string, code: string, linter = eslint): Promise<string[]> {
  const [result] = await linter.lintText(code, { filePath })
  return result.messages.filter((m) => m.ruleId === 'corral/rooms').map((m) => m.message)
}
const importOf = (from: string, to: string) => `import { x } from '${specifier(from, to)}'\nexport const y = x\n`

/** The rooms table as lint runs it (the options of `corral/rooms` for a file of src/main). */
async function roomsTable(): Promise<{ allow: { from: string; to: string; removedBy: string }[] }> {
  const config = await eslint.calculateConfigForFile('src/main/engine.ts')
  return config.rules['corral/rooms'][1]
}

describe('the rooms of src/main', () => {
  const pairs = (Object.keys(ROOMS) as Room[]).flatMap((a) => (Object.keys(ROOMS) as Room[]).filter((b) => b !== a).map((b) => [a, b] as const))
  it.each(pairs.filter(([a, b]) => !MAY[a].includes(b)))('refuses an import from %s up or across to %s', async (a, b) => {
    const [message] = await roomViolations(ROOMS[a].probe, importOf(ROOMS[a].probe, ROOMS[b].target))
    expect(message).toMatch(/^corral\/rooms: .* may import only /)
  })
  it.each(pairs.filter(([a, b]) => MAY[a].includes(b)))('lets %s import %s below it', async (a, b) => {
    expect(await roomViolations(ROOMS[a].probe, importOf(ROOMS[a].probe, ROOMS[b].target))).toEqual([])
  })

  it('names the rule and the allowed targets in the message', async () => {
    expect(await roomViolations('src/main/session/probe.ts', "import { Harness } from '../harness/harness'\nexport const h = Harness\n")).toEqual([
      expect.stringMatching(/^corral\/rooms: session\/ may import only config\.ts, src\/shared\/; harness\/harness is harness\//),
    ])
  })

  it('judges type-only imports, re-exports and dynamic imports like any other import', async () => {
    const probe = 'src/main/vault/probe.ts'
    expect(await roomViolations(probe, "import type { ToolRouter } from '../harness/tool-router'\nexport type T = ToolRouter\n")).toHaveLength(1)
    expect(await roomViolations(probe, "export { Harness } from '../harness/harness'\n")).toHaveLength(1)
    expect(await roomViolations(probe, "export const load = () => import('../harness/harness')\n")).toHaveLength(1)
    expect(await roomViolations(probe, "export type H = import('../harness/harness').Harness\n")).toHaveLength(1)
  })

  it('lets a room import anything of its own', async () => {
    expect(await roomViolations('src/main/hands/probe.ts', "import { x } from './docker/provider'\nimport { y } from '../hands/sandbox'\nexport const z = [x, y]\n")).toEqual([])
  })

  it('shows the harness the hands only through the tool-router contract', async () => {
    const probe = 'src/main/harness/probe.ts'
    expect(await roomViolations(probe, "import type { ToolRouter } from '../hands/tool-router'\nexport type T = ToolRouter\n")).toEqual([])
    expect(await roomViolations(probe, "import { TOOLSET } from '../hands'\nexport const t = TOOLSET\n")).toHaveLength(1) // the index is not the door
    expect(await roomViolations(probe, "import { SandboxToolRouter } from '../hands/router'\nexport const r = SandboxToolRouter\n")).toHaveLength(1)
  })

  it('shows the harness the session only through the log and the tool journal interfaces', async () => {
    const probe = 'src/main/harness/probe.ts'
    expect(await roomViolations(probe, "import type { EventLog } from '../session/event-log'\nimport type { ToolJournal } from '../session/tool-journal'\nexport type T = [EventLog, ToolJournal]\n")).toEqual([])
    expect(await roomViolations(probe, "import type { ThreadStore } from '../session/thread-store'\nexport type T = ThreadStore\n")).toHaveLength(1)
  })

  it('keeps SQL and the Db type inside session/', async () => {
    const dbImport = (from: string) => `import type { Db } from '${specifier(from, 'src/main/session/database.ts')}'\nexport type D = Db\n`
    for (const probe of ['src/main/orchestrator/probe.ts', 'src/main/engine-hands.ts', 'src/main/api/probe.ts', 'src/main/cli/probe.ts']) {
      expect(await roomViolations(probe, dbImport(probe))).toEqual([expect.stringMatching(/session\/database is private to session\//)])
    }
    expect(await roomViolations('src/main/session/log/probe.ts', dbImport('src/main/session/log/probe.ts'))).toEqual([])
  })

  it('keeps the Electron shell off the CLI and the CLI off the shell', async () => {
    expect(await roomViolations('src/main/index.ts', "import { RENDERER_CSP } from './cli/serve-renderer'\nexport const c = RENDERER_CSP\n")).toHaveLength(1)
    expect(await roomViolations('src/main/cli/probe.ts', "import { x } from '../index'\nexport const y = x\n")).toHaveLength(1)
  })

  it('refuses export * (a module exports by name)', async () => {
    const [result] = await eslint.lintText("export * from './sandbox'\n", { filePath: 'src/main/hands/index.ts' })
    expect(result.messages.filter((m) => m.ruleId === 'no-restricted-syntax').map((m) => m.message)).toEqual([expect.stringContaining('export by name')])
    const [named] = await eslint.lintText("export { type Sandbox } from './sandbox'\n", { filePath: 'src/main/hands/index.ts' })
    expect(named.messages).toEqual([])
  })

  it('refuses a file of src/main that stands in no room', async () => {
    expect(await roomViolations('src/main/settings.ts', 'export const s = 1\n')).toEqual([expect.stringMatching(/^corral\/rooms: src\/main\/settings\.ts stands in no room/)])
  })

  it('leaves files outside src/main and src/shared to the process rules', async () => {
    expect(await roomViolations('test/unit/probe.test.ts', "import { Db } from '../../src/main/session/database'\nexport const d = Db\n")).toEqual([])
  })

  it('lets an allow-listed import through from its named file only', async () => {
    const rooms = await roomsTable()
    const listed = new ESLint({
      cwd: process.cwd(),
      overrideConfig: [{ files: ['src/**/*.ts'], rules: { 'corral/rooms': ['error', { ...rooms, allow: [{ from: 'src/main/vault/listed.ts', to: 'src/main/harness/harness.ts', removedBy: 'this test' }] }] } }],
    })
    const code = "import { Harness } from '../harness/harness'\nexport const h = Harness\n"
    expect(await roomViolations('src/main/vault/listed.ts', code, listed)).toEqual([])
    expect(await roomViolations('src/main/vault/other.ts', code, listed)).toHaveLength(1)
  })

  it('lets no known violation through any more (issue #10 emptied the allow-list)', async () => {
    expect((await roomsTable()).allow).toEqual([])
  })
})
