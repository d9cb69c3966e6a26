/**
 * A process that records a deployment run and dies (SIGKILL, no clean-up) before the run's session
 * is created: the seam is DeploymentStoreOptions.afterRunRecorded. argv: <database path> <mode>,
 * mode `schedule` (the fire of the schedule's next instant, the top of the next hour) or `manual` (run now). Prints the
 * deployment id on stdout before it dies.
 */
import { openStoresAt } from '../../src/main/session/stores'

const [path, mode] = process.argv.slice(2)
const stores = openStoresAt(path, { afterDeploymentRunRecorded: () => process.kill(process.pid, 'SIGKILL') })
const agent = stores.agents.create({ name: 'reporter', model: 'claude-sonnet-4-6' })
const env = stores.environments.create({ name: 'local' })
const deployment = stores.deployments.create({
  name: 'nightly',
  agent: agent.id,
  environment_id: env.id,
  initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'Compile the report.' }] }],
  schedule: { type: 'cron', expression: '0 * * * *', timezone: 'UTC' },
})
process.stdout.write(deployment.id + '\n', () => {
  const fire = mode === 'manual' ? stores.deployments.run(deployment.id) : stores.deployments.fireScheduled({ deploymentId: deployment.id, scheduledAt: new Date(Math.ceil(Date.now() / 3_600_000) * 3_600_000) })
  void fire.then(() => {
    process.stderr.write('the run completed: the kill did not happen\n')
    process.exit(3)
  })
})
