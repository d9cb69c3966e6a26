import { describe, expect, it } from 'vitest'
import type { ViewEvent } from '../../../src/main/harness/context/view'
import {
  ADVISOR_AGENT_NAME,
  ADVISOR_DEFINITION,
  ADVISOR_TOOL,
  adviceOf,
  consultationEndEvents,
  consultationRequest,
  consultationStartEvents,
  failureNotice,
  orphanedConsultations,
} from '../../../src/main/harness/advisor'

let seq = 0
const ev = (type: string, fields: Record<string, unknown> = {}): ViewEvent => {
  seq++
  return { seq, event: { id: (fields.id as string) ?? `sevt_${seq}`, type, ...fields } as ViewEvent['event'] }
}
const agent = { model: { id: 'claude-sonnet-4-6' }, system: 'You fix bugs.', tools: [{ type: 'agent_toolset_20260401' }] }

/** A primary conversation: a task, a bash call and its result, thinking, then text and the ant__advisor call. */
function conversation(): ViewEvent[] {
  seq = 0
  return [
    ev('user.message', { content: [{ type: 'text', text: 'Fix the failing test in src/a.ts' }] }),
    ev('agent.thinking', { thinking: 'let me look', signature: 'sig-of-the-executor' }),
    ev('agent.tool_use', { id: 'sevt_bash', name: 'bash', input: { command: 'npm test' }, evaluated_permission: 'allow' }),
    ev('span.model_request_end', { is_error: false }),
    ev('agent.tool_result', { tool_use_id: 'sevt_bash', content: [{ type: 'text', text: '1 failing: expected 2, got 3' }], is_error: true }),
    ev('agent.message', { content: [{ type: 'text', text: 'I will ask for a second opinion.' }] }),
    ev('agent.tool_use', { id: 'sevt_adv', name: ADVISOR_TOOL, input: { question: 'Patch the test or the code?' }, evaluated_permission: 'allow' }),
  ]
}

describe('the advisor consultation request', () => {
  it('runs on the advisor model with no tools array', () => {
    const req = consultationRequest(conversation(), { agent, advisorModel: 'claude-opus-4-8', callId: 'sevt_adv', question: 'Patch the test or the code?' })
    expect(req.model).toBe('claude-opus-4-8')
    expect('tools' in req).toBe(false)
    expect(req.tool_choice).toBeUndefined()
  })

  it("carries the primary's conversation so far with tool calls and results written as text", () => {
    const req = consultationRequest(conversation(), { agent, advisorModel: 'claude-opus-4-8', callId: 'sevt_adv', question: 'Patch the test or the code?' })
    const texts = req.messages.map((m) => ({ role: m.role, text: (m.content as { type: string; text?: string }[]).map((b) => b.text).join(' | ') }))
    expect(texts).toEqual([
      { role: 'user', text: 'Fix the failing test in src/a.ts' },
      { role: 'assistant', text: '[tool call bash {"command":"npm test"}]' },
      { role: 'user', text: '[result of bash (error)]\n1 failing: expected 2, got 3' },
      { role: 'assistant', text: 'I will ask for a second opinion.' },
      { role: 'user', text: '<advisor_request>\nThe agent asks the advisor: Patch the test or the code?\n</advisor_request>' },
    ])
  })

  it("leaves out the executor's thinking, the ant__advisor call itself and every tool block", () => {
    const req = consultationRequest(conversation(), { agent, advisorModel: 'claude-opus-4-8', callId: 'sevt_adv' })
    const blocks = req.messages.flatMap((m) => m.content as { type: string; text?: string }[])
    expect(blocks.every((b) => b.type === 'text')).toBe(true)
    expect(JSON.stringify(req.messages)).not.toContain('sig-of-the-executor')
    expect(JSON.stringify(req.messages)).not.toContain(ADVISOR_TOOL)
  })

  it("shows the advisor the agent's system prompt after its own instructions", () => {
    const req = consultationRequest(conversation(), { agent, advisorModel: 'claude-opus-4-8', callId: 'sevt_adv' })
    const system = (req.system as { text: string }[])[0].text
    expect(system).toMatch(/^You are an advisor to an AI agent/)
    expect(system).toContain('<agent_system_prompt>\nYou fix bugs.\n</agent_system_prompt>')
  })

  it('asks for a general review when the call has no question', () => {
    const req = consultationRequest(conversation(), { agent, advisorModel: 'claude-opus-4-8', callId: 'sevt_adv' })
    const last = req.messages[req.messages.length - 1]
    expect(last.role).toBe('user')
    expect(JSON.stringify(last.content)).toContain('advice on its work so far and its next steps')
  })

  it('offers the model a question field only, none of it required', () => {
    expect(ADVISOR_DEFINITION.name).toBe('ant__advisor')
    expect(ADVISOR_DEFINITION.input_schema).toEqual({ type: 'object', properties: { question: expect.objectContaining({ type: 'string' }) } })
  })
})

describe('the consultation events', () => {
  const ids = { threadId: 'sthr_adv', primaryThreadId: 'sthr_primary', advisorModel: 'claude-opus-4-8', spanId: 'sevt_span' }
  const usage = { input_tokens: 900, output_tokens: 40, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }

  it("start with the thread's creation naming anthropic.advisor, its running status and its request's span, all on the advisor thread", () => {
    const evs = consultationStartEvents(ids)
    expect(evs.map((e) => e.type)).toEqual(['session.thread_created', 'session.thread_status_running', 'span.model_request_start'])
    expect(evs[0]).toMatchObject({ session_thread_id: 'sthr_adv', agent_name: ADVISOR_AGENT_NAME, workflow_run_id: null, agent: { type: 'advisor', model: 'claude-opus-4-8' }, parent_thread_id: 'sthr_primary' })
    expect(evs.every((e) => e.session_thread_id === 'sthr_adv')).toBe(true)
  })

  it('end with the usage at the advisor model, the advice sent on the advisor thread and received on the primary, then idle end_turn and terminated', () => {
    const evs = consultationEndEvents({ ...ids, usage, advice: 'Fix the code.', stopReason: 'end_turn' })
    expect(evs.map((e) => e.type)).toEqual(['span.model_request_end', 'agent.thread_message_sent', 'agent.thread_message_received', 'session.thread_status_idle', 'session.thread_status_terminated'])
    expect(evs[0]).toMatchObject({ session_thread_id: 'sthr_adv', model: 'claude-opus-4-8', model_usage: usage, is_error: false, model_request_start_id: 'sevt_span' })
    expect(evs[1]).toMatchObject({ session_thread_id: 'sthr_adv', to_session_thread_id: 'sthr_primary', content: [{ type: 'text', text: 'Fix the code.' }] })
    expect(evs[2]).toMatchObject({ from_session_thread_id: 'sthr_adv', from_agent_name: ADVISOR_AGENT_NAME, content: [{ type: 'text', text: 'Fix the code.' }] })
    expect(evs[2].session_thread_id).toBeUndefined()
    expect(evs[3]).toMatchObject({ session_thread_id: 'sthr_adv', stop_reason: { type: 'end_turn' } })
  })

  it('deliver no message when the consultation was interrupted', () => {
    const evs = consultationEndEvents({ ...ids, usage, interrupted: true, stopReason: 'end_turn' })
    expect(evs.map((e) => e.type)).toEqual(['span.model_request_end', 'session.thread_status_idle', 'session.thread_status_terminated'])
    expect(evs[0]).toMatchObject({ is_error: true, interrupted: true })
  })

  it('find the advisor thread a dead process left running for the same call, and only that one', () => {
    const children = [
      { id: 'sthr_old', advisor: true, status: 'terminated' as const, createdSeq: 3 },
      { id: 'sthr_before', advisor: true, status: 'running' as const, createdSeq: 4 },
      { id: 'sthr_orphan', advisor: true, status: 'running' as const, createdSeq: 11 },
      { id: 'sthr_child', advisor: false, status: 'running' as const, createdSeq: 12 },
    ]
    expect(orphanedConsultations(children, 10)).toEqual(['sthr_orphan'])
  })
})

describe('the failure notice', () => {
  it('says in one sentence that no advice came, why, and that the turn goes on', () => {
    expect(failureNotice({ kind: 'model', message: 'HTTP 500' })).toBe("No advice: the advisor's model request failed (HTTP 500). Carry on without the advisor.")
    expect(failureNotice({ kind: 'interrupted', scope: 'consultation' })).toBe('No advice: the consultation was interrupted. Carry on without the advisor.')
    expect(failureNotice({ kind: 'pairing', problem: 'x is weaker than y' })).toBe("No advice: the advisor model may not advise this agent's model (x is weaker than y). Carry on without the advisor.")
  })

  it('takes the advice from text blocks only', () => {
    expect(adviceOf({ blocks: [{ type: 'thinking', thinking: 'hm', signature: 's' }, { type: 'text', text: ' Do X. ' }] })).toBe('Do X.')
    expect(adviceOf({ blocks: [{ type: 'thinking', thinking: 'hm', signature: 's' }] })).toBeUndefined()
  })
})
