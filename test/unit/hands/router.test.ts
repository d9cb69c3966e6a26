import { describe, expect, it } from 'vitest'
import { HandsRouter } from '../../../src/main/hands/router'
import { FakeToolRouter } from '../../support/fake-tool-router'

const call = (name: string, route?: 'toolset' | 'mcp') => ({ sessionId: 'sesn_1', toolUseId: `toolu_${name}`, name, input: {}, ...(route ? { route } : {}) })

describe('HandsRouter', () => {
  it('sends a call to the first backend of its route kind that serves it', async () => {
    const mcp = new FakeToolRouter('mcp', { serves: ['docs__echo', 'bash'] })
    const sandbox = new FakeToolRouter('sandbox', { serves: ['bash'] })
    const router = new HandsRouter({ backends: [{ route: 'mcp', hands: mcp }, { route: 'toolset', hands: sandbox }] })
    expect(await router.execute(call('bash', 'toolset'))).toEqual({ content: 'sandbox:bash', isError: false })
    expect(await router.execute(call('docs__echo', 'mcp'))).toEqual({ content: 'mcp:docs__echo', isError: false })
    expect(mcp.calls.map((c) => c.name)).toEqual(['docs__echo'])
    expect(sandbox.calls.map((c) => c.name)).toEqual(['bash'])
  })

  it('passes a call a backend declines to the next backend of the same route kind', async () => {
    const queue = new FakeToolRouter('queue', { serves: [] })
    const sandbox = new FakeToolRouter('sandbox')
    const router = new HandsRouter({ backends: [{ route: 'toolset', hands: queue }, { route: 'toolset', hands: sandbox }] })
    expect((await router.execute(call('read', 'toolset'))).content).toBe('sandbox:read')
    expect(queue.calls).toEqual([])
  })

  it('offers a call without a route kind to every backend in order', async () => {
    const mcp = new FakeToolRouter('mcp', { serves: ['docs__echo'] })
    const sandbox = new FakeToolRouter('sandbox')
    const router = new HandsRouter({ backends: [{ route: 'mcp', hands: mcp }, { route: 'toolset', hands: sandbox }] })
    expect((await router.execute(call('docs__echo'))).content).toBe('mcp:docs__echo')
    expect((await router.execute(call('grep'))).content).toBe('sandbox:grep')
  })

  it('answers a call no backend serves with an error naming the tool, and says its recovery is unknown', async () => {
    const mcp = new FakeToolRouter('mcp', { serves: ['docs__echo'] })
    const router = new HandsRouter({ backends: [{ route: 'mcp', hands: mcp }] })
    expect(await router.execute(call('gone__echo', 'mcp'))).toEqual({ content: 'unknown tool "gone__echo" (an MCP tool): none of this Corral\'s hands serves it', isError: true })
    expect(await router.execute(call('bash', 'toolset'))).toMatchObject({ isError: true, content: expect.stringContaining('unknown tool "bash" (a toolset tool)') })
    expect(await router.recover(call('bash', 'toolset'))).toEqual({ state: 'unknown' })
    expect(await router.serves(call('bash', 'toolset'))).toBe(false)
    expect(mcp.calls).toEqual([])
  })

  it("asks the serving backend why a tool cannot run, and nobody for a tool no backend serves", async () => {
    const sandbox = new FakeToolRouter('sandbox', { serves: ['bash'], unavailable: 'no sandbox backend is available' })
    const router = new HandsRouter({ backends: [{ route: 'toolset', hands: sandbox }] })
    expect(await router.unavailable('sesn_1', 'bash')).toBe('no sandbox backend is available')
    expect(await router.unavailable('sesn_1', 'docs__echo')).toBeUndefined()
  })

  it('releases the session on every backend once, and one failing backend does not keep the others from releasing', async () => {
    const mcp = new FakeToolRouter('mcp', { serves: ['docs__echo'] })
    const sandbox = new FakeToolRouter('sandbox')
    mcp.releaseError = new Error('connection close failed')
    const router = new HandsRouter({ backends: [{ route: 'mcp', hands: mcp }, { route: 'toolset', hands: sandbox }, { route: 'mcp', hands: sandbox }] })
    await expect(router.release('sesn_1', { removeWorkspace: true })).rejects.toThrow('connection close failed')
    expect(mcp.released).toEqual([{ sessionId: 'sesn_1', options: { removeWorkspace: true } }])
    expect(sandbox.released).toEqual([{ sessionId: 'sesn_1', options: { removeWorkspace: true } }])
  })
})
