/**
 * Delegation, the primary thread's platform tools when subagents are enabled (issue #11, spec
 * §4.1; Corral's contract is in docs/multiagent.md): `list_agents` shows the roster and the
 * session's child threads, `send_to_agent` starts a child thread or sends a follow-up to one.
 * Both answer at once; the child's report arrives later as an `agent.thread_message_received` on
 * the primary (harness.ts).
 */
import { ADVISOR_AGENT_NAME } from '../../shared/api/advisor-tiers'
import { newId } from '../../shared/api/ids'
import type { EventInput } from '../session/event-log'
import type { PlatformOfferContext, PlatformTool, PlatformToolResult, ThreadAgent } from './platform-tools'
import { MAX_LIVE_CHILD_THREADS as MAX_LIVE_CHILDREN } from '../../shared/api/thread-slots'

export const LIST_AGENTS_TOOL = 'list_agents'
export const SEND_TO_AGENT_TOOL = 'send_to_agent'

const offeredToLead = (ctx: PlatformOfferContext) => ctx.threadKey === null && ctx.roster?.subagents.enabled === true

const fail = (text: string): PlatformToolResult => ({ outcome: { content: text, isError: true } })

/** Whether a roster entry is the session agent's own `self` copy. */
const isSelf = (a: ThreadAgent, ctx: PlatformOfferContext) => (a.id !== undefined && a.id === ctx.sessionAgent.id) || (a.id === undefined && a.name === ctx.sessionAgent.name)

export const listAgentsTool: PlatformTool = {
  name: LIST_AGENTS_TOOL,
  definition: {
    name: LIST_AGENTS_TOOL,
    description:
      'List the agents you can delegate to with send_to_agent (their name, description and kind: a predefined agent, or "self", a copy of you without delegation), ' +
      'whether you may define inline agents, and the threads you have started with their status.',
    input_schema: { type: 'object', properties: {} },
  },
  offered: offeredToLead,
  async run(ctx) {
    const roster = ctx.roster!
    const agents = roster.subagents.agents.map((a) => ({ name: a.name, description: a.description ?? null, kind: isSelf(a, ctx) ? 'self' : 'predefined' }))
    // the advisor is invisible to delegation (spec §7.1): its consultations are not listed
    const threads = [...ctx.threads.children.values()].filter((c) => !c.advisor && c.workflowRunId === null).map((c) => ({ session_thread_id: c.id, agent_name: c.agentName, status: c.status }))
    const body = {
      agents,
      inline_agents_allowed: roster.subagents.inlineAgents,
      threads,
      live_threads_limit: MAX_LIVE_CHILDREN,
    }
    return { outcome: { content: JSON.stringify(body), isError: false } }
  },
}

export const sendToAgentTool: PlatformTool = {
  name: SEND_TO_AGENT_TOOL,
  definition: {
    name: SEND_TO_AGENT_TOOL,
    description:
      'Give an agent a task in a thread of its own, or send a follow-up to a thread you started. Give exactly one of `agent` (starts a NEW thread: a name from list_agents, ' +
      'or a new name together with `system` for an inline agent when inline agents are allowed) and `session_thread_id` (a follow-up; the thread remembers its earlier turns). ' +
      'Returns at once with {"session_thread_id": "sthr_…"}; the agent\'s report arrives later as a message from it. Threads share your files but not your conversation: ' +
      'say everything the agent needs (paths, constraints, the report you expect).',
    input_schema: {
      type: 'object',
      properties: {
        agent: { type: 'string', description: 'The agent to start a new thread with (a name from list_agents, or a new inline agent name with `system`)' },
        session_thread_id: { type: 'string', description: 'A thread you started: send it a follow-up instead' },
        message: { type: 'string', description: 'The task or follow-up' },
        system: { type: 'string', description: 'An inline agent only: its system prompt' },
        description: { type: 'string', description: 'An inline agent only: what it does' },
      },
      required: ['message'],
    },
  },
  offered: offeredToLead,
  async run(ctx) {
    const input = ctx.call.input
    const str = (k: string) => (typeof input[k] === 'string' ? (input[k] as string) : undefined)
    for (const k of ['agent', 'session_thread_id', 'message', 'system', 'description']) {
      if (input[k] !== undefined && typeof input[k] !== 'string') return fail(`send_to_agent: ${k} must be a string.`)
    }
    const message = str('message')
    if (!message || !message.trim()) return fail('send_to_agent: message is required and must not be empty.')
    const agentName = str('agent')
    const threadId = str('session_thread_id')
    if ((agentName === undefined) === (threadId === undefined)) return fail('send_to_agent: give exactly one of agent (a new thread) and session_thread_id (a follow-up).')
    const content = [{ type: 'text' as const, text: message }]
    const primaryId = ctx.threads.primaryId
    if (threadId !== undefined) {
      if (str('system') !== undefined) return fail('send_to_agent: system starts an inline agent; a follow-up (session_thread_id) cannot change a thread\'s agent.')
      const child = ctx.threads.children.get(threadId)
      if (!child || child.advisor) return fail(`send_to_agent: session_thread_id ${threadId} is not a thread you started in this session.`)
      if (child.workflowRunId !== null) return fail(`send_to_agent: thread ${threadId} is an agent of workflow run ${child.workflowRunId}; a run's threads take no follow-ups (check the run with ant__workflow_run_status).`)
      if (child.status === 'terminated') return fail(`send_to_agent: thread ${threadId} (${child.agentName}) is terminated (archived or failed) and accepts no messages; start a new thread with agent instead.`)
      const events: EventInput[] = [{ type: 'agent.thread_message_sent', to_session_thread_id: threadId, to_agent_name: child.agentName, content }]
      // an idle child runs again; a running one gets the follow-up after its current turn
      if (child.status !== 'running') events.push({ type: 'session.thread_status_running', session_thread_id: threadId, agent_name: child.agentName })
      events.push({ type: 'agent.thread_message_received', session_thread_id: threadId, from_session_thread_id: primaryId, from_agent_name: null, content })
      return { outcome: { content: JSON.stringify({ session_thread_id: threadId }), isError: false }, events }
    }
    const roster = ctx.roster!
    const live = ctx.threads.liveChildCount()
    if (live >= MAX_LIVE_CHILDREN) {
      return fail(`send_to_agent: this session already has ${live} child threads, the limit is ${MAX_LIVE_CHILDREN} at a time (idle ones count until archived). Send a follow-up to one of them with session_thread_id instead.`)
    }
    if (agentName === ADVISOR_AGENT_NAME) return fail(`send_to_agent: ${ADVISOR_AGENT_NAME} is the advisor's name, reserved; consult the advisor with ant__advisor when it is enabled, or give an inline agent another name.`)
    const listed = roster.subagents.agents.find((a) => a.name === agentName)
    let agent: ThreadAgent
    if (listed) {
      if (str('system') !== undefined) return fail(`send_to_agent: ${agentName} is a listed agent with its own system prompt; system is only for an inline agent with a new name.`)
      agent = listed
    } else {
      const system = str('system')
      const names = roster.subagents.agents.map((a) => a.name).join(', ') || 'none'
      if (!roster.subagents.inlineAgents) return fail(`send_to_agent: agent ${JSON.stringify(agentName)} is not on this session's roster (listed: ${names}) and inline agents are not enabled.`)
      if (system === undefined || !system.trim()) return fail(`send_to_agent: agent ${JSON.stringify(agentName)} is not on this session's roster (listed: ${names}); an inline agent needs system.`)
      const lead = ctx.sessionAgent
      agent = {
        type: 'inline',
        name: agentName!,
        description: str('description') ?? null,
        model: lead.model,
        system,
        tools: lead.tools ?? [],
        mcp_servers: lead.mcp_servers ?? [],
        skills: lead.skills ?? [],
      }
    }
    const { multiagent: _m, ...snapshot } = agent as ThreadAgent & { multiagent?: unknown }
    const tid = newId('thread')
    const events: EventInput[] = [
      { type: 'session.thread_created', session_thread_id: tid, agent_name: agent.name, workflow_run_id: null, agent: snapshot, parent_thread_id: primaryId },
      { type: 'agent.thread_message_sent', to_session_thread_id: tid, to_agent_name: agent.name, content },
      { type: 'session.thread_status_running', session_thread_id: tid, agent_name: agent.name },
      { type: 'agent.thread_message_received', session_thread_id: tid, from_session_thread_id: primaryId, from_agent_name: null, content },
    ]
    return { outcome: { content: JSON.stringify({ session_thread_id: tid }), isError: false }, events }
  },
}

export const DELEGATION_TOOLS: readonly PlatformTool[] = [listAgentsTool, sendToAgentTool]

