/**
 * The child process of the harness crash test: the session log and the brains over `dataDir`
 * (what Engine.open builds for them, without the HTTP API, vault and hands, so a restart is
 * quick), talking to the parent's scripted model server, running tool calls through a
 * RecordingToolRouter whose side effects land in `effectsFile`. Wakes every session that needs
 * a brain, prints `ready`; the parent kills it with SIGKILL at random instants and starts it again.
 * Usage: node harness-crash-child.(ts|cjs) <dataDir> <modelUrl> <effectsFile>
 */
import { join } from 'node:path'
import { openStoresAt } from '../../src/main/session/stores'
import { Brains } from '../../src/main/orchestrator/brains'
import { RecordingToolRouter } from './harness-tool-router'

const [dataDir, modelUrl, effectsFile] = process.argv.slice(2)
if (!dataDir || !modelUrl || !effectsFile) {
  console.error('usage: harness-crash-child <dataDir> <modelUrl> <effectsFile>')
  process.exit(2)
}
const stores = openStoresAt(join(dataDir, 'corral.db'), { leases: { ttlMs: 10_000 } })
const brains = new Brains({
  log: stores.log,
  sessions: stores.sessions,
  leases: stores.leases,
  journal: stores.toolJournal,
  previews: { publish: () => {} },
  settings: {},
  env: { ANTHROPIC_BASE_URL: modelUrl, ANTHROPIC_API_KEY: 'k' },
  router: new RecordingToolRouter(effectsFile, { delayMs: () => Math.floor(Math.random() * 12) }),
  options: { leaseTtlMs: 10_000, backoffBaseMs: 5, backoffMaxMs: 20, stallTimeoutMs: 5_000, maxRetries: 20 },
  onError: (m) => process.stderr.write(m + '\n'),
})
brains.start()
process.stdout.write('ready\n')
setInterval(() => {}, 1 << 30)
