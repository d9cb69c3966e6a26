import { describe, expect, it } from 'vitest'
import { ESLint } from 'eslint'

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
