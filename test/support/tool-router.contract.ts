import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ToolCall, ToolRouter } from '../../src/main/hands/tool-router'

/**
 * The contract every ToolRouter passes, the way Hono's routers share one case file
 * (`src/router/common.case.test.ts`): the composite HandsRouter, the sandbox hands on each
 * backend, the MCP hands, NoHandsToolRouter and the test double RecordingToolRouter all run it
 * (test/unit/hands/tool-router.contract.test.ts, test/integration/hands/tool-router.contract.test.ts).
 * An implementation that cannot pass a case names it in `skip` with the reason; the skipped case
 * shows in the report with that reason.
 */
export type ToolRouterCase = 'serves' | 'failure' | 'declines' | 'recover' | 'release' | 'unavailable'

/** A call as the subject's session would make it (the session id is the subject's). */
export type ContractCall = Pick<ToolCall, 'name' | 'input' | 'route'>

export interface ToolRouterSubject {
  router: ToolRouter
  /** A session the router can serve calls for. */
  sessionId: string
  /** A call it serves and runs without error. */
  served: ContractCall
  /** A call it serves whose failure the model should see (a failed command, a bad argument). */
  failing: ContractCall
  /** A call it does not serve. */
  unserved: ContractCall
  /** Stops what `make` started (servers, providers, directories). */
  dispose?(): Promise<void>
}

export interface ToolRouterContractParams {
  name: string
  make: () => Promise<ToolRouterSubject> | ToolRouterSubject
  skip?: readonly { reason: string; tests: readonly ToolRouterCase[] }[]
}

let seq = 0
const toolUseId = () => `toolu_contract_${Date.now().toString(36)}_${(seq++).toString(36)}`

export function runToolRouterContract(p: ToolRouterContractParams): void {
  describe(`${p.name}: ToolRouter contract`, () => {
    let s: ToolRouterSubject
    const call = (c: ContractCall): ToolCall => ({ sessionId: s.sessionId, toolUseId: toolUseId(), ...c })
    const skipped = (c: ToolRouterCase) => p.skip?.find((x) => x.tests.includes(c))?.reason
    const test = (c: ToolRouterCase, title: string, fn: () => Promise<void>, timeout?: number) => {
      const reason = skipped(c)
      if (reason) it.skip(`${title} (skipped: ${reason})`, fn)
      else it(title, fn, timeout)
    }

    beforeAll(async () => {
      s = await p.make()
    }, 120_000)

    afterAll(async () => {
      await s?.router.release(s.sessionId, { removeWorkspace: true })
      await s?.dispose?.()
    })

    test('serves', 'answers a call it serves with a content string and isError false', async () => {
      const r = await s.router.execute(call(s.served))
      expect(typeof r.content).toBe('string')
      expect(r.isError).toBe(false)
      if (s.router.serves) expect(await s.router.serves({ sessionId: s.sessionId, ...s.served })).toBe(true)
    }, 60_000)

    test('failure', 'answers a failure the model should see as an isError outcome with a content string, never a throw', async () => {
      const r = await s.router.execute(call(s.failing))
      expect(r.isError).toBe(true)
      expect(typeof r.content).toBe('string')
      expect(r.content.length).toBeGreaterThan(0)
    }, 60_000)

    test('declines', 'declines a call it does not serve: an isError outcome naming the tool, and serves() false when it has one', async () => {
      const r = await s.router.execute(call(s.unserved))
      expect(r.isError).toBe(true)
      expect(r.content).toContain(s.unserved.name)
      if (s.router.serves) expect(await s.router.serves({ sessionId: s.sessionId, ...s.unserved })).toBe(false)
    })

    test('recover', 'says unknown or not_started when asked to recover a call it never saw', async () => {
      const { signal: _signal, onOutput: _onOutput, ...c } = call(s.served)
      const r = await s.router.recover(c)
      expect(['unknown', 'not_started']).toContain(r.state)
    }, 60_000)

    test('release', 'releases a session twice and one it never saw without failing, and serves the session again afterwards', async () => {
      await expect(s.router.release(s.sessionId)).resolves.toBeUndefined()
      await expect(s.router.release(s.sessionId)).resolves.toBeUndefined()
      await expect(s.router.release(`sesn_never_${toolUseId()}`, { removeWorkspace: true })).resolves.toBeUndefined()
      // hands are cattle: a released session gets fresh hands on its next call
      if (!skipped('serves')) expect((await s.router.execute(call(s.served))).isError).toBe(false)
    }, 60_000)

    test('unavailable', 'says nothing stops a call it serves and can run (unavailable is undefined)', async () => {
      expect(s.router.unavailable).toBeTypeOf('function')
      expect(await s.router.unavailable!(s.sessionId, s.served.name)).toBeUndefined()
    }, 60_000)
  })
}
