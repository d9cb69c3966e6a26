/**
 * The child process of the dream crash test: the whole engine (API, brains, bubblewrap hands, the
 * dream runner) over `dataDir`, talking to the parent's scripted model server, with short session
 * leases so a restart takes over a killed process's sessions quickly. Prints `ready <url>`; the
 * parent kills it with SIGKILL at random instants and starts it again.
 * Usage: node --import tsx dream-crash-child.ts <dataDir> <modelUrl>
 */
import { Engine } from '../../src/main/engine'

const [dataDir, modelUrl] = process.argv.slice(2)
if (!dataDir || !modelUrl) {
  console.error('usage: dream-crash-child <dataDir> <modelUrl>')
  process.exit(2)
}
const engine = Engine.open({
  dataDir,
  token: 'crash-token',
  env: { PATH: process.env.PATH, ANTHROPIC_BASE_URL: modelUrl, ANTHROPIC_API_KEY: 'k' },
  harness: { leaseTtlMs: 1_000, backoffBaseMs: 5, backoffMaxMs: 20 },
  log: (m) => process.stderr.write(m + '\n'),
})
void engine.listen(0).then(({ url }) => process.stdout.write(`ready ${url}\n`))
