/**
 * The child process of the workflow crash and lease tests: the session log, the brains and the
 * workflow runs over `dataDir` (what Engine.open builds for them, without the HTTP API, vault
 * and hands, so a restart is quick), talking to the scripted model server at `modelUrl`. Wakes
 * every session that needs a brain, replays (or waits to drive) every open run, prints `ready`;
 * the parent kills it with SIGKILL and starts it again.
 * Usage: node workflow-crash-child.(ts|cjs) <dataDir> <modelUrl> [maxConcurrentAgents] [leaseTtlMs] [apiKey]
 * (`apiKey`, default 'k', is the API key its model requests carry: a test tells one life's from another's by it).
 */
import { join } from 'node:path'
import { openStoresAt } from '../../src/main/session/stores'
import { Brains } from '../../src/main/orchestrator/brains'

const [dataDir, modelUrl, concurrent, ttl, apiKey] = process.argv.slice(2)
if (!dataDir || !modelUrl) {
  console.error('usage: workflow-crash-child <dataDir> <modelUrl> [maxConcurrentAgents] [leaseTtlMs] [apiKey]')
  process.exit(2)
}
const leaseTtlMs = Number(ttl ?? 10_000)
const stores = openStoresAt(join(dataDir, 'corral.db'), { leases: { ttlMs: leaseTtlMs } })
const brains = new Brains({
  log: stores.log,
  sessions: stores.sessions,
  leases: stores.leases,
  journal: stores.toolJournal,
  workflows: stores.workflows,
  previews: { publish: () => {} },
  settings: {},
  env: { ANTHROPIC_BASE_URL: modelUrl, ANTHROPIC_API_KEY: apiKey || 'k' },
  options: { leaseTtlMs, backoffBaseMs: 5, backoffMaxMs: 20, stallTimeoutMs: 5_000, maxRetries: 20, workflows: { maxConcurrentAgents: Number(concurrent ?? 64) } },
  onError: (m) => process.stderr.write(m + '\n'),
})
brains.start()
process.stdout.write('ready\n')
setInterval(() => {}, 1 << 30)
