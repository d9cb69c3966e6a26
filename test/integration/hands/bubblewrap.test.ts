import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe } from 'vitest'
import { BubblewrapSandboxProvider } from '../../../src/main/hands/bubblewrap/bubblewrap-sandbox'
import { sandboxContract } from './sandbox.contract'
import { bwrapReq } from './support'

const bwrap = bwrapReq()

describe.skipIf(!bwrap.ok)('BubblewrapSandbox', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-bwrap-'))
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }))
  sandboxContract('bubblewrap', {
    provider: () => new BubblewrapSandboxProvider({ dataDir }),
    config: { type: 'cloud', networking: { type: 'limited' }, corral: { backend: 'bubblewrap' } },
    killRunner: async (sandbox) => {
      const live = (sandbox as unknown as { live?: { child: { kill: (s: string) => void } } }).live
      if (!live) throw new Error('no live bwrap process')
      live.child.kill('SIGKILL')
    },
    leftovers: async (sessionId) => (existsSync(join(dataDir, sessionId)) ? [`directory ${join(dataDir, sessionId)}`] : []),
  })
})
