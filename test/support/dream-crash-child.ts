/**
 * The child process of the dream crash test: the whole engine (API, brains, bubblewrap hands, the
 * dream runner) over `dataDir`, talking to the parent's scripted model server, with short session
 * leases so a restart takes over a killed process's sessions quickly. Prints `ready <url>`; the
 * parent kills it with SIGKILL at random instants and starts it again.
 * With CORRAL_TEST_KILL_AFTER_DREAM_ARCHIVE=1 it kills itself as soon as it has archived a dream's
 * session, before that session's hands are released.
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
// The kill inside a window: right after a dream's session is archived, before its hands are released.
if (process.env.CORRAL_TEST_KILL_AFTER_DREAM_ARCHIVE === '1') {
  const sessions = engine.stores.sessions
  const archive = sessions.archive.bind(sessions)
  sessions.archive = (id: string) => {
    const done = archive(id)
    if (sessions.retrieve(id).metadata?.corral_dream_id) process.kill(process.pid, 'SIGKILL')
    return done
  }
}
void engine.listen(0).then(({ url }) => process.stdout.write(`ready ${url}\n`))
