import { HandsRouter } from '../../../src/main/hands/router'
import { NoHandsToolRouter } from '../../../src/main/hands/tool-router'
import { FakeToolRouter } from '../../support/fake-tool-router'
import { runToolRouterContract } from '../../support/tool-router.contract'

// The in-memory routers; the ones over real sandboxes, MCP servers and files run in
// test/integration/hands/tool-router.contract.test.ts.

runToolRouterContract({
  name: 'NoHandsToolRouter',
  make: () => ({
    router: new NoHandsToolRouter(),
    sessionId: 'sesn_nohands',
    served: { name: 'bash', input: { command: 'true' } },
    failing: { name: 'bash', input: { command: 'false' } },
    unserved: { name: 'docs__echo', input: {} },
  }),
  skip: [
    { reason: 'it serves no call: every call is answered that no sandbox backend is configured', tests: ['serves'] },
    { reason: 'it has no backend to ask, so it does not implement unavailable', tests: ['unavailable'] },
  ],
})

runToolRouterContract({
  name: 'HandsRouter over a toolset backend and NoHandsToolRouter',
  make: () => ({
    router: new HandsRouter({
      backends: [
        { route: 'toolset', hands: new FakeToolRouter('sandbox', { serves: ['read'] }) },
        { route: 'toolset', hands: new NoHandsToolRouter() },
      ],
    }),
    sessionId: 'sesn_composite',
    served: { name: 'read', input: { file_path: 'a.txt' }, route: 'toolset' },
    failing: { name: 'bash', input: { command: 'true' }, route: 'toolset' },
    unserved: { name: 'docs__echo', input: {}, route: 'mcp' },
  }),
})
