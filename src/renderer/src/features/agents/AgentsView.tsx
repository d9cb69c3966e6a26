import { useState } from 'react'
import { useClient } from '../../api/context'
import type { Agent, Page } from '../../api/types'
import { Button, ChangedElsewhere, Empty, ErrorNote, Field, Icon } from '../../ui/components'
import { CodeBlock } from '../../ui/Code'
import { modelIdOf, relativeTime } from '../../ui/format'
import { useDraft, useQuery } from '../../ui/hooks'
import { useSessions } from '../sessions/SessionsProvider'
import { ResourceSidebar } from '../../ui/ResourceSidebar'
import { TOOLS, toolsetOf, type Policy, type ToolsetState } from './toolset'
import { SkillPicker, skillsOf, type SkillChoice } from './SkillPicker'
import { mcpParamsOf, mcpRowsOf, mcpRowsProblem, type McpPolicy, type McpRow } from './mcp-servers'
import { sameMcpUrl } from '../../../../shared/api/mcp-url'
import type { Credential, Vault } from '../../../../shared/api/types'

const MODELS = ['claude-sonnet-5-5', 'claude-opus-5-5', 'claude-haiku-5-5', 'claude-sonnet-4-6', 'claude-opus-4-6', 'claude-haiku-4-5']
/** A new agent's model: a current one (the SDK warns on every request to a deprecated model). */
const DEFAULT_MODEL = 'claude-sonnet-5-5'

interface Draft {
  name: string
  model: string
  description: string
  system: string
  toolset: ToolsetState
  /** MCP servers, each with the mcp_toolset that offers its tools (mcp-servers.ts). */
  mcp: McpRow[]
  /** The other tools (custom tools, toolsets of servers not listed), edited as JSON. */
  otherTools: string
  /** Custom skills: each by id, pinned to a version or following the latest (null). */
  skills: SkillChoice[]
}

function draftOf(agent: Agent | undefined): Draft {
  const mcp = mcpRowsOf(agent)
  return {
    name: agent?.name ?? '',
    model: modelIdOf(agent?.model) ?? DEFAULT_MODEL,
    description: agent?.description ?? '',
    system: agent?.system ?? '',
    toolset: toolsetOf(agent),
    mcp: mcp.rows,
    otherTools: JSON.stringify(mcp.otherTools, null, 2),
    skills: skillsOf(agent),
  }
}

function paramsOf(d: Draft): Record<string, unknown> {
  let other: unknown[]
  try {
    other = JSON.parse(d.otherTools || '[]')
  } catch (e) {
    throw new Error(`Other tools: not valid JSON (${(e as Error).message})`)
  }
  const problem = mcpRowsProblem(d.mcp)
  if (problem) throw new Error(`${problem} is needed`)
  const mcp = mcpParamsOf(d.mcp)
  const tools: unknown[] = []
  if (d.toolset.enabled) {
    tools.push({
      type: 'agent_toolset_20260401',
      default_config: { enabled: true, permission_policy: { type: d.toolset.defaultPolicy } },
      configs: TOOLS.map((name) => ({ name, enabled: d.toolset.tools[name].enabled, permission_policy: { type: d.toolset.tools[name].policy } })),
    })
  }
  tools.push(...mcp.tools, ...other)
  return { name: d.name.trim(), model: d.model.trim(), description: d.description.trim() || null, system: d.system || null, tools, mcp_servers: mcp.mcp_servers, skills: d.skills.map((k) => ({ type: 'custom', skill_id: k.skill_id, version: k.version })) }
}

/** Agents: list, create, edit (each save is a new version), archive, and the version history. */
export function AgentsView({ selectedId, onSelect }: { selectedId?: string; onSelect: (id: string) => void }) {
  const { agents, refresh } = useSessions()
  const creating = selectedId === 'new'
  const selected = creating ? undefined : agents.find((a) => a.id === selectedId)
  return (
    <div className="split">
      <ResourceSidebar
        title="Agents"
        items={agents}
        selectedId={selectedId}
        onSelect={onSelect}
        emptyText="No agents yet."
        meta={(a) => <span className="muted">v{a.version}</span>}
        detail={(a) => <span className="mono">{modelIdOf(a.model)}</span>}
      />
      <div className="pane">
        {creating || selected ? (
          <AgentEditor key={selected ? selected.id : 'new'} agent={selected} onSaved={(a) => { refresh(); onSelect(a.id) }} />
        ) : (
          <Empty icon="robot" title="Agents">
            An agent is a model, a system prompt and its tools. Every change makes a new version; a session keeps the version it started with.
          </Empty>
        )}
      </div>
    </div>
  )
}

function AgentEditor({ agent, onSaved }: { agent?: Agent; onSaved: (a: Agent) => void }) {
  const client = useClient()
  // a version saved elsewhere (the SDK, another window) while this one is edited does not wipe the edits
  const { draft, setDraft: setDraftOnly, base, dirty, newer, load, keep, saved: savedAs } = useDraft(agent, draftOf, (a) => a.version)
  const [err, setErr] = useState<unknown>()
  const [busy, setBusy] = useState(false)
  const [saved, setSaved] = useState(false)
  const versions = useQuery(() => (agent ? client.request<Page<Agent>>('agents.versions', { id: agent.id }, { limit: 50 }) : Promise.resolve({ data: [], next_page: null })), [agent?.id, agent?.version])
  const [viewing, setViewing] = useState<Agent>()

  const save = async () => {
    setBusy(true)
    setErr(undefined)
    try {
      const params = paramsOf(draft)
      const a = agent ? await client.request<Agent>('agents.update', { id: agent.id }, { ...params, version: (base ?? agent).version }) : await client.request<Agent>('agents.create', {}, params)
      if (agent) savedAs(a)
      setSaved(true)
      onSaved(a)
    } catch (e) {
      setErr(e)
    } finally {
      setBusy(false)
    }
  }
  // an edit makes "Saved." stale (not the draft's identity: a save sets it to the version saved)
  const setDraft: typeof setDraftOnly = (update) => {
    setSaved(false)
    setDraftOnly(update)
  }
  const set = (patch: Partial<Draft>) => setDraft((d) => ({ ...d, ...patch }))
  const setTool = (name: string, patch: Partial<{ enabled: boolean; policy: Policy }>) =>
    setDraft((d) => ({ ...d, toolset: { ...d.toolset, tools: { ...d.toolset.tools, [name]: { ...d.toolset.tools[name], ...patch } } } }))

  return (
    <div className="editor">
      <header className="editor-head">
        <div>
          <h1>{agent ? agent.name : 'New agent'}</h1>
          {agent && (
            <div className="thread-sub">
              <span className="mono">{agent.id}</span>
              <span>version {agent.version}</span>
              <span>updated {relativeTime(agent.updated_at)}</span>
            </div>
          )}
        </div>
        <div className="thread-actions">
          {agent && !agent.archived_at && (
            <Button
              variant="ghost"
              icon="archive"
              onClick={() => {
                if (window.confirm(`Archive ${agent.name}? Sessions that use it keep running.`))
                  void client.request<Agent>('agents.archive', { id: agent.id }).then(onSaved, setErr)
              }}
            >
              Archive
            </Button>
          )}
          <Button variant="primary" onClick={() => void save()} disabled={busy || !draft.name.trim() || (!!agent && !dirty)}>
            {agent ? 'Save as new version' : 'Create agent'}
          </Button>
        </div>
      </header>
      {saved && <div className="ok-note">Saved.</div>}
      {newer && base && (
        <ChangedElsewhere
          text={`This agent was saved elsewhere: version ${newer.version} is newer than version ${base.version}, which your edits started from.`}
          loadLabel={`Load version ${newer.version}`}
          onLoad={load}
          onKeep={keep}
        />
      )}
      <ErrorNote error={err} />
      <form className="form" onSubmit={(e) => { e.preventDefault(); void save() }}>
        <div className="form-row">
          <Field id="ag-name" label="Name">
            <input id="ag-name" value={draft.name} onChange={(e) => set({ name: e.target.value })} required maxLength={256} />
          </Field>
          <Field id="ag-model" label="Model" hint="Any model your endpoint serves.">
            <input id="ag-model" list="ag-models" value={draft.model} onChange={(e) => set({ model: e.target.value })} required />
            <datalist id="ag-models">
              {MODELS.map((m) => (
                <option key={m} value={m} />
              ))}
            </datalist>
          </Field>
        </div>
        <Field id="ag-desc" label="Description">
          <input id="ag-desc" value={draft.description} onChange={(e) => set({ description: e.target.value })} maxLength={2048} />
        </Field>
        <Field id="ag-system" label="System prompt">
          <textarea id="ag-system" rows={8} className="mono" value={draft.system} onChange={(e) => set({ system: e.target.value })} />
        </Field>
        <fieldset className="toolset">
          <legend>
            <label>
              <input type="checkbox" checked={draft.toolset.enabled} onChange={(e) => set({ toolset: { ...draft.toolset, enabled: e.target.checked } })} /> Agent toolset
            </label>
          </legend>
          {draft.toolset.enabled && (
            <p className="field-hint" id="ag-permissions-hint">
              New agents may read and search files (read, glob, grep) without asking; writing, editing, running commands and reaching the network ask you first. “Ask me” puts each call in
              the confirmation queue.
            </p>
          )}
          {draft.toolset.enabled && (
            <table className="tool-table" aria-describedby="ag-permissions-hint">
              <thead>
                <tr>
                  <th scope="col">Tool</th>
                  <th scope="col">Enabled</th>
                  <th scope="col">Permission</th>
                </tr>
              </thead>
              <tbody>
                {TOOLS.map((name) => (
                  <tr key={name}>
                    <th scope="row" className="mono">
                      {name}
                    </th>
                    <td>
                      <input type="checkbox" aria-label={`${name} enabled`} checked={draft.toolset.tools[name].enabled} onChange={(e) => setTool(name, { enabled: e.target.checked })} />
                    </td>
                    <td>
                      <select aria-label={`${name} permission`} value={draft.toolset.tools[name].policy} onChange={(e) => setTool(name, { policy: e.target.value as Policy })} disabled={!draft.toolset.tools[name].enabled}>
                        <option value="always_ask">Ask me</option>
                        <option value="always_allow">Always allow</option>
                      </select>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </fieldset>
        <SkillPicker value={draft.skills} onChange={(skills) => set({ skills })} />
        <McpServersEditor rows={draft.mcp} onChange={(mcp) => set({ mcp })} />
        <details className="advanced">
          <summary>Custom tools (JSON)</summary>
          <Field id="ag-tools" label="Custom tools and other tools" hint='[{"type":"custom","name":"lookup","description":"…","input_schema":{"type":"object"}}]'>
            <textarea id="ag-tools" rows={6} className="mono" value={draft.otherTools} onChange={(e) => set({ otherTools: e.target.value })} />
          </Field>
        </details>
      </form>
      {agent && (
        <section className="versions" aria-label="Versions">
          <h2>
            <Icon name="history" /> Versions
          </h2>
          <ol className="version-list">
            {(versions.data?.data ?? []).map((v) => (
              <li key={v.version}>
                <button type="button" className={`version-item${viewing?.version === v.version ? ' selected' : ''}`} onClick={() => setViewing(viewing?.version === v.version ? undefined : v)}>
                  <span>v{v.version}</span>
                  <span className="mono">{modelIdOf(v.model)}</span>
                  <span className="muted">{relativeTime(v.updated_at)}</span>
                  {v.version === agent.version && <span className="pill pill-done">current</span>}
                </button>
              </li>
            ))}
          </ol>
          {viewing && (
            <div className="version-view">
              <div className="queue-detail-head">
                <strong>Version {viewing.version}</strong>
                {viewing.version !== agent.version && (
                  <Button small onClick={() => setDraft(draftOf({ ...viewing, version: agent.version }))}>
                    Load into the editor
                  </Button>
                )}
              </div>
              <CodeBlock code={JSON.stringify({ model: viewing.model, system: viewing.system, tools: viewing.tools, mcp_servers: viewing.mcp_servers }, null, 2)} language="json" maxHeight={320} />
            </div>
          )}
        </section>
      )}
    </div>
  )
}

/**
 * The agent's MCP servers: a name and a URL each, whether the model is offered its tools and
 * whether their calls ask first. The server's token goes in a vault (the Vaults page); a session
 * uses the vaults picked when it starts.
 */
function McpServersEditor({ rows, onChange }: { rows: McpRow[]; onChange: (rows: McpRow[]) => void }) {
  const setRow = (i: number, patch: Partial<McpRow>) => onChange(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)))
  const held = useVaultCredentials(rows.length > 0)
  return (
    <fieldset className="mcp-servers">
      <legend>MCP servers</legend>
      <p className="field-hint">
        Remote MCP servers (streamable HTTP) whose tools the agent may call. Put a server&apos;s token or OAuth credential in a vault, and pick the vault when you start a session; a local sandbox&apos;s environment must allow the server&apos;s host (Allowed hosts, or Allow the agent&apos;s MCP servers).
      </p>
      {rows.map((r, i) => (
        <div key={i} className="resource-row mcp-row">
          <input aria-label={`MCP server ${i + 1} name`} placeholder="docs" value={r.name} onChange={(e) => setRow(i, { name: e.target.value })} maxLength={128} />
          <input aria-label={`MCP server ${i + 1} URL`} className="resource-main mono" type="url" placeholder="https://mcp.example.com/mcp" value={r.url} onChange={(e) => setRow(i, { url: e.target.value })} />
          <label className="check">
            <input type="checkbox" checked={r.offered} onChange={(e) => setRow(i, { offered: e.target.checked })} /> Offer its tools
          </label>
          <select aria-label={`MCP server ${i + 1} permission`} value={r.policy} disabled={!r.offered} onChange={(e) => setRow(i, { policy: e.target.value as McpPolicy })}>
            <option value="always_ask">Ask me</option>
            <option value="always_allow">Always allow</option>
          </select>
          <button type="button" className="icon-btn" aria-label={`Remove MCP server ${i + 1}`} onClick={() => onChange(rows.filter((_, j) => j !== i))}>
            <Icon name="x" />
          </button>
          {held && /^https?:\/\/./i.test(r.url.trim()) && <CredentialHint vaults={held.filter((h) => sameMcpUrl(h.url, r.url.trim())).map((h) => h.vault)} />}
        </div>
      ))}
      <div className="resource-add">
        <Button small icon="plus" onClick={() => onChange([...rows, { name: '', url: '', offered: true, policy: 'always_ask' }])}>
          MCP server
        </Button>
      </div>
    </fieldset>
  )
}

/** Which vaults hold a credential for the server: a session picks them to reach it. */
function CredentialHint({ vaults }: { vaults: string[] }) {
  return (
    <p className="field-hint mcp-credential">
      {vaults.length ? (
        <>Credential in {[...new Set(vaults)].join(', ')}: pick that vault when you start a session.</>
      ) : (
        <>
          No vault holds a credential for this URL; a server that needs one refuses the session. <a href="#/vaults">Add one in Vaults</a>.
        </>
      )}
    </p>
  )
}

/** The live MCP credentials of the live vaults (their URLs and vault names), once `enabled`. */
function useVaultCredentials(enabled: boolean): { url: string; vault: string }[] | undefined {
  const client = useClient()
  const q = useQuery(async () => {
    if (!enabled) return undefined
    const vaults = (await client.request<Page<Vault>>('vaults.list', {}, { limit: 100 })).data
    const lists = await Promise.all(vaults.map(async (v) => ({ v, creds: (await client.request<Page<Credential>>('credentials.list', { id: v.id }, { limit: 100 })).data })))
    return lists.flatMap(({ v, creds }) => creds.flatMap((c) => (c.auth.type === 'environment_variable' ? [] : [{ url: c.auth.mcp_server_url, vault: v.display_name }])))
  }, [enabled])
  return q.data
}
