/**
 * Seeds a data dir with an agent, an environment and an hourly deployment created three hours ago
 * whose instants since then never ran (as if Corral had been closed): the next `corral serve`
 * catches up the latest of them once. Run with tsx:
 *   tsx test/e2e/support/seed-schedules.ts <dataDir>
 * Prints `{"deploymentId": …}`.
 */
import { join } from 'node:path'
import { openStoresAt } from '../../../src/main/session/stores'

const [dataDir] = process.argv.slice(2)
if (!dataDir) throw new Error('usage: seed-schedules.ts <dataDir>')
const threeHoursAgo = () => new Date(Date.now() - 3 * 3_600_000)
const stores = openStoresAt(join(dataDir, 'corral.db'), { deploymentsClock: threeHoursAgo })
const agent = stores.agents.create({ name: 'Reporter', model: 'claude-sonnet-4-6' })
stores.environments.create({ name: 'Local sandbox', config: { type: 'cloud' } })
const d = stores.deployments.create({
  name: 'Hourly digest',
  agent: agent.id,
  environment_id: stores.environments.list({}).data[0].id,
  initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'Summarise the new tickets.' }] }],
  // hourly at the minute half an hour ago: instants were missed while "closed", and the next one is
  // 30 minutes off, so a test run that crosses it cannot see a second, regular run
  schedule: { type: 'cron', expression: `${new Date(Date.now() - 30 * 60_000).getUTCMinutes()} * * * *`, timezone: 'UTC' },
})
stores.close()
process.stdout.write(JSON.stringify({ deploymentId: d.id }) + '\n')
