/**
 * The child process of the harness crash test: an engine with brains over `dataDir`, talking to
 * the parent's scripted model server, running tool calls through a RecordingToolRouter whose
 * side effects land in `effectsFile`. Prints `ready` once started; the parent kills it with
 * SIGKILL at random instants and starts it again.
 * Usage: node --import tsx harness-crash-child.ts <dataDir> <modelUrl> <effectsFile>
 */
import { Engine } from '../../src/main/engine'
import { RecordingToolRouter } from './harness-tool-router'

const [dataDir, modelUrl, effectsFile] = process.argv.slice(2)
if (!dataDir || !modelUrl || !effectsFile) {
  console.error('usage: harness-crash-child <dataDir> <modelUrl> <effectsFile>')
  process.exit(2)
}
const router = new RecordingToolRouter(effectsFile, { delayMs: () => Math.floor(Math.random() * 12) })
Engine.open({
  dataDir,
  token: 'crash-test',
  env: { ANTHROPIC_BASE_URL: modelUrl, ANTHROPIC_API_KEY: 'k' },
  toolRouter: router,
  harness: { leaseTtlMs: 10_000, backoffBaseMs: 5, backoffMaxMs: 20, stallTimeoutMs: 5_000, maxRetries: 20 },
  log: (m) => process.stderr.write(m + '\n'),
})
process.stdout.write('ready\n')
setInterval(() => {}, 1 << 30)
