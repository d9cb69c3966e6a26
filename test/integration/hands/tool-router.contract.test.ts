import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Docker from 'dockerode'
import { describe } from 'vitest'
import { engineToolRouter } from '../../../src/main/engine-hands'
import { BubblewrapSandboxProvider } from '../../../src/main/hands/bubblewrap/bubblewrap-sandbox'
import { DockerSandboxProvider } from '../../../src/main/hands/docker/provider'
import { McpToolRouter } from '../../../src/main/hands/mcp/router'
import type { SandboxProvider } from '../../../src/main/hands/sandbox'
import { SandboxToolRouter } from '../../../src/main/hands/sandbox-router'
import type { StoredCredential } from '../../../src/main/session/vault-store'
import { MemoryKeychain } from '../../../src/main/vault/memory-keychain'
import { KeychainSecretSink } from '../../../src/main/vault/vault-services'
import { RecordingToolRouter } from '../../support/harness-tool-router'
import { runToolRouterContract, type ToolRouterSubject } from '../../support/tool-router.contract'
import { BEARER, mcpTestServer } from '../../support/mcp-server'
import { bwrapReq, dockerReq } from './support'

// The ToolRouter contract (test/support/tool-router.contract.ts) on the routers over real
// components: the sandbox hands on Docker and on bubblewrap, the MCP hands against a real MCP
// server, the engine's composite over both, and the harness tests' RecordingToolRouter (a file).
// The in-memory ones run in test/unit/hands/tool-router.contract.test.ts.

const docker = dockerReq()
const bwrap = bwrapReq()

/** A SandboxToolRouter over one real backend, for a session of a plain environment. */
function sandboxHands(provider: SandboxProvider, backend: string): SandboxToolRouter {
  return new SandboxToolRouter({
    providers: [provider],
    resolveEnvironment: () => ({ environmentId: 'env_contract', config: { type: 'cloud', corral: { backend, pool_size: 0 } } }),
  })
}

const toolsetCalls = {
  served: { name: 'write', input: { file_path: 'contract.txt', content: 'x' } },
  failing: { name: 'bash', input: { command: 'exit 3' } },
  unserved: { name: 'docs__echo', input: { text: 'not a toolset tool' } },
}

describe.skipIf(!docker.ok)('on Docker', () => {
  runToolRouterContract({
    name: 'SandboxToolRouter (docker)',
    make: (): ToolRouterSubject => {
      const router = sandboxHands(new DockerSandboxProvider({ docker: new Docker() }), 'docker')
      return { router, sessionId: `sesn_trc_d${Date.now().toString(36)}`, ...toolsetCalls, dispose: () => router.dispose() }
    },
  })
})

function bubblewrapHands(): { router: SandboxToolRouter; dispose: () => Promise<void> } {
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-trc-bwrap-'))
  const router = sandboxHands(new BubblewrapSandboxProvider({ dataDir }), 'bubblewrap')
  return { router, dispose: async () => (await router.dispose(), rmSync(dataDir, { recursive: true, force: true })) }
}

describe.skipIf(!bwrap.ok)('on bubblewrap', () => {
  runToolRouterContract({
    name: 'SandboxToolRouter (bubblewrap)',
    make: (): ToolRouterSubject => {
      const { router, dispose } = bubblewrapHands()
      return { router, sessionId: `sesn_trc_b${Date.now().toString(36)}`, ...toolsetCalls, dispose }
    },
  })
})

/** The MCP hands over the test MCP server, its bearer token in a memory keychain (no OS keychain needed). */
async function mcpHands(): Promise<{ router: McpToolRouter; dispose: () => Promise<void> }> {
  const srv = await mcpTestServer()
  const keychain = new MemoryKeychain()
  await new KeychainSecretSink(keychain).put('vcrd_contract', 'static_bearer', { token: BEARER })
  const url = `${srv.url}/mcp`
  const credential = { id: 'vcrd_contract', type: 'vault_credential', vault_id: 'vlt_contract', auth: { type: 'static_bearer', mcp_server_url: url }, metadata: {}, created_at: '', updated_at: '', archived_at: null } as unknown as StoredCredential
  const router = new McpToolRouter({ keychain, connectAttempts: 1, serversFor: () => ({ servers: [{ name: 'docs', url }], credentials: [credential] }) })
  return { router, dispose: async () => (await router.dispose(), await srv.close()) }
}

runToolRouterContract({
  name: 'McpToolRouter',
  make: async (): Promise<ToolRouterSubject> => {
    const { router, dispose } = await mcpHands()
    return {
      router,
      sessionId: 'sesn_trc_mcp',
      served: { name: 'docs__echo', input: { text: 'hello' } },
      // the server refuses a call without its required argument
      failing: { name: 'docs__echo', input: {} },
      unserved: { name: 'bash', input: { command: 'true' } },
      dispose,
    }
  },
})

describe.skipIf(!bwrap.ok)('the engine composite on bubblewrap and MCP', () => {
  runToolRouterContract({
    name: 'HandsRouter (engineToolRouter over SandboxToolRouter and McpToolRouter)',
    make: async (): Promise<ToolRouterSubject> => {
      const sandbox = bubblewrapHands()
      const mcp = await mcpHands()
      return {
        router: engineToolRouter({ toolset: sandbox.router, mcp: mcp.router }),
        sessionId: `sesn_trc_c${Date.now().toString(36)}`,
        served: { name: 'docs__echo', input: { text: 'through the composite' }, route: 'mcp' },
        failing: { name: 'bash', input: { command: 'exit 3' }, route: 'toolset' },
        unserved: { name: 'gone__echo', input: {}, route: 'mcp' },
        dispose: async () => (await mcp.dispose(), await sandbox.dispose()),
      }
    },
  })
})

runToolRouterContract({
  name: 'RecordingToolRouter (the harness tests’ double)',
  make: (): ToolRouterSubject => {
    const dir = mkdtempSync(join(tmpdir(), 'corral-trc-rec-'))
    return {
      router: new RecordingToolRouter(join(dir, 'effects.log')),
      sessionId: 'sesn_trc_rec',
      served: { name: 'bash', input: { command: 'true' } },
      failing: { name: 'bash', input: { command: 'false' } },
      unserved: { name: 'docs__echo', input: {} },
      dispose: async () => rmSync(dir, { recursive: true, force: true }),
    }
  },
  skip: [
    { reason: 'a double whose every call succeeds: it records side effects, it does not run commands', tests: ['failure'] },
    { reason: 'it runs any name it is given: it stands in for whatever the harness routes to', tests: ['declines'] },
    { reason: 'it does not implement unavailable (the harness then asks nobody)', tests: ['unavailable'] },
  ],
})
