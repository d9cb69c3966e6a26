import { mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { Engine } from '../../../src/main/engine'

/*
 * A start that fails on a bad settings file stops with a message naming the file, and leaves
 * nothing of the data directory open in this process (a desktop shell that shows the error and
 * lets the user fix the file must not keep corral.db locked behind it).
 */

/** The file descriptors of this process that point into `dir`. */
function openFilesUnder(dir: string): string[] {
  const out: string[] = []
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const target = readlinkSync(join('/proc/self/fd', fd))
      if (target.startsWith(dir)) out.push(target)
    } catch {
      // the fd of the readdir itself is gone by now
    }
  }
  return out
}

describe.skipIf(process.platform !== 'linux')('an engine start that fails on its settings', () => {
  const dirs: string[] = []
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  })
  const dataDir = () => {
    const d = mkdtempSync(join(tmpdir(), 'corral-open-fail-'))
    dirs.push(d)
    mkdirSync(d, { recursive: true })
    return d
  }
  const open = (dir: string) => Engine.open({ dataDir: dir, token: 'test-token', env: { PATH: process.env.PATH, ANTHROPIC_API_KEY: 'k' }, defaultHands: false, log: () => {} })

  it('names a bad advisor tier of settings.json and holds no file of the data directory open', () => {
    const dir = dataDir()
    writeFileSync(join(dir, 'settings.json'), JSON.stringify({ advisorTiers: { 'my-model': 'high' } }))
    expect(() => open(dir)).toThrow(/settings file .*settings\.json.*my-model/)
    expect(openFilesUnder(dir)).toEqual([])
  })

  it('names a dream time limit of settings.json that is not a positive number of minutes', () => {
    for (const bad of [0, -5, 10_081, '30', true]) {
      const dir = dataDir()
      writeFileSync(join(dir, 'settings.json'), JSON.stringify({ dreamTimeLimitMinutes: bad }))
      expect(() => open(dir)).toThrow(new RegExp(`settings file .*settings\\.json: dreamTimeLimitMinutes must be a positive number of minutes, at most 10080 \\(a week\\) \\(got ${JSON.stringify(bad)}\\)`))
      expect(openFilesUnder(dir)).toEqual([])
    }
  })

  it('names a settings file that is not JSON and holds no file of the data directory open', () => {
    const dir = dataDir()
    writeFileSync(join(dir, 'settings.json'), '{ not json')
    expect(() => open(dir)).toThrow(/settings\.json is not valid JSON/)
    expect(openFilesUnder(dir)).toEqual([])
  })

  it('opens once the file is fixed, in the same process', async () => {
    const dir = dataDir()
    writeFileSync(join(dir, 'settings.json'), '{ not json')
    expect(() => open(dir)).toThrow()
    writeFileSync(join(dir, 'settings.json'), JSON.stringify({ advisorTiers: { 'my-model': 3 } }))
    const engine = open(dir)
    expect(openFilesUnder(dir).some((f) => f.endsWith('corral.db'))).toBe(true)
    await engine.close()
    expect(openFilesUnder(dir)).toEqual([])
  })
})
