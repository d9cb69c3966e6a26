import { useEffect, useState } from 'react'
import { useClient } from '../../api/context'
import type { Environment, Session } from '../../api/types'
import { Button, Dialog, ErrorNote, Field, Icon } from '../../ui/components'
import { modelIdOf } from '../../ui/format'
import { DropArea, UploadList, useUploads } from '../files/uploads'
import { fileMountPath } from '../../../../shared/api/file-paths'
import { useSessions } from './SessionsProvider'
import { useFormFill, useQuery } from '../../ui/hooks'
import type { MemoryStore } from '../../../../shared/api/types'
import { VaultPicker } from '../vaults/VaultPicker'
import { useSetup } from '../setup/SetupProvider'
import { parseUsd, usdText } from '../budgets/budget'
import { isDreamsOwn } from '../../../../shared/api/dreams'

type ResourceRow =
  | { type: 'github_repository'; url: string; mount_path: string; branch: string; token: string }
  | { type: 'file'; file_id: string; mount_path: string }
  | { type: 'memory_store'; memory_store_id: string; access: 'read_write' | 'read_only'; instructions: string }
  | { type: 'host_folder'; host_path: string; mount_path: string; read_only: boolean }

function resourceParams(r: ResourceRow): Record<string, unknown> {
  if (r.type === 'github_repository') {
    return {
      type: r.type,
      url: r.url.trim(),
      ...(r.mount_path.trim() ? { mount_path: r.mount_path.trim() } : {}),
      ...(r.branch.trim() ? { checkout: { type: 'branch', name: r.branch.trim() } } : {}),
      // Goes to the keychain; the engine never stores it in the session or shows it to the sandbox.
      ...(r.token.trim() ? { authorization_token: r.token.trim() } : {}),
    }
  }
  if (r.type === 'host_folder') return { type: r.type, host_path: r.host_path.trim(), ...(r.mount_path.trim() ? { mount_path: r.mount_path.trim() } : {}), ...(r.read_only ? { read_only: true } : {}) }
  if (r.type === 'file') return { type: r.type, file_id: r.file_id.trim(), ...(r.mount_path.trim() ? { mount_path: r.mount_path.trim() } : {}) }
  return { type: r.type, memory_store_id: r.memory_store_id.trim(), access: r.access, ...(r.instructions.trim() ? { instructions: r.instructions.trim() } : {}) }
}

/** A new session: agent, environment, first message, resources. */
export function NewSessionDialog({ onClose, onCreated, onGo }: { onClose: () => void; onCreated: (s: Session) => void; onGo: (path: string) => void }) {
  const client = useClient()
  const { agents, environments, refresh, upsert } = useSessions()
  // (not the agent and environment Corral keeps for dreams)
  const liveAgents = agents.filter((a) => !a.archived_at && !isDreamsOwn(a))
  const liveEnvs = environments.filter((e) => !e.archived_at && !isDreamsOwn(e))
  const [agentId, setAgentId] = useState(liveAgents[0]?.id ?? '')
  const [envId, setEnvId] = useState(liveEnvs[0]?.id ?? '')
  // lists that arrive after the dialog opened (a slow first load) still choose the first agent and
  // environment: the selects show them, and Start must not stay disabled behind an empty choice
  const firstAgent = liveAgents[0]?.id
  const firstEnv = liveEnvs[0]?.id
  useEffect(() => {
    if (!agentId && firstAgent) setAgentId(firstAgent)
  }, [agentId, firstAgent])
  useEffect(() => {
    if (!envId && firstEnv) setEnvId(firstEnv)
  }, [envId, firstEnv])
  const [title, setTitle] = useState('')
  const [message, setMessage] = useState('')
  const [resources, setResources] = useState<ResourceRow[]>([])
  // the Settings' default budget for new sessions, when there is one (the field can still be cleared)
  const defaultBudget = useSetup().settings?.default_budget
  const [budget, setBudget] = useState('')
  // settings read after the dialog opened still fill the field, unless the person typed in it
  const budgetFill = useFormFill(defaultBudget?.max_list_cost.amount || undefined, (amount) => setBudget(usdText(amount)))
  const [busy, setBusy] = useState(false)
  const [err, setErr] = useState<unknown>()
  // The stores a session can attach (archived ones cannot); without any, the id is typed.
  const stores = useQuery(() => client.request<{ data: MemoryStore[] }>('memoryStores.list', {}, { limit: 100 }), [])
  const memoryStores = stores.data?.data ?? []
  // The vaults whose credentials the session's MCP servers and sandbox may use, in the order ticked (the first wins a clash).
  const [vaultIds, setVaultIds] = useState<string[]>([])

  const createDefaultEnv = async () => {
    setErr(undefined)
    try {
      const env = await client.request<Environment>('environments.create', {}, { name: 'Local sandbox', description: 'No network; the default sandbox backend.', config: { type: 'cloud', networking: { type: 'limited' } } })
      setEnvId(env.id)
      refresh()
    } catch (e) {
      setErr(e)
    }
  }

  const submit = async () => {
    setBusy(true)
    setErr(undefined)
    try {
      const text = message.trim()
      const session = await client.request<Session>('sessions.create', {}, {
        agent: agentId,
        environment_id: envId,
        title: title.trim() || (text ? text.split('\n')[0].slice(0, 80) : null),
        ...(resources.length ? { resources: resources.map(resourceParams) } : {}),
        ...(vaultIds.length ? { vault_ids: vaultIds } : {}),
        // The API's amounts are in minor units: "500" is $5.00.
        ...(budget.trim() ? { budget: { type: 'limit', max_list_cost: { amount: budgetCents(budget), currency: 'USD' } } } : {}),
        ...(text ? { initial_events: [{ type: 'user.message', content: [{ type: 'text', text }] }] } : {}),
      })
      upsert(session)
      onCreated(session)
    } catch (e) {
      setErr(e)
    } finally {
      setBusy(false)
    }
  }

  const pickFolder = client.pickFolder
  const choose = async (i: number) => {
    if (!pickFolder) return
    try {
      const path = await pickFolder()
      if (path) setRow(i, { host_path: path })
    } catch (e) {
      setErr(e)
    }
  }

  // A dropped file is uploaded now and becomes a file row, included when the session is created.
  const uploads = useUploads(async (file, name) => {
    setResources((rs) => [...rs, { type: 'file', file_id: file.id, mount_path: name }])
    return `will be at ${fileMountPath(name, file.id) ?? name}`
  })
  const uploading = uploads.rows.some((r) => r.state === 'uploading' || r.state === 'attaching')

  const setRow = (i: number, patch: Partial<ResourceRow>) => setResources((rs) => rs.map((r, j) => (j === i ? ({ ...r, ...patch } as ResourceRow) : r)))

  return (
    <Dialog title="New session" onClose={onClose} wide>
      <form
        className="dialog-body form"
        onSubmit={(e) => {
          e.preventDefault()
          void submit()
        }}
      >
        <div className="form-row">
          <Field id="ns-agent" label="Agent" hint={liveAgents.length === 0 ? <button type="button" className="link-btn" onClick={() => onGo('/agents/new')}>Create an agent first</button> : undefined}>
            <select id="ns-agent" value={agentId} onChange={(e) => setAgentId(e.target.value)} required>
              {liveAgents.length === 0 && <option value="">No agents yet</option>}
              {liveAgents.map((a) => (
                <option key={a.id} value={a.id}>
                  {a.name} · {modelIdOf(a.model)} · v{a.version}
                </option>
              ))}
            </select>
          </Field>
          <Field
            id="ns-env"
            label="Environment"
            hint={
              liveEnvs.length === 0 ? (
                <button type="button" className="link-btn" onClick={() => void createDefaultEnv()}>
                  Create a local sandbox environment
                </button>
              ) : undefined
            }
          >
            <select id="ns-env" value={envId} onChange={(e) => setEnvId(e.target.value)} required>
              {liveEnvs.length === 0 && <option value="">No environments yet</option>}
              {liveEnvs.map((e) => (
                <option key={e.id} value={e.id}>
                  {e.name} · {e.config.type === 'self_hosted' ? 'self-hosted' : 'local sandbox'}
                </option>
              ))}
            </select>
          </Field>
        </div>
        <div className="form-row">
          <Field id="ns-title" label="Title (optional)">
            <input id="ns-title" value={title} onChange={(e) => setTitle(e.target.value)} placeholder="Defaults to the first line of your message" />
          </Field>
          <Field id="ns-budget" label="Budget in USD (optional)" hint="The agent stops when its list cost reaches this.">
            <input
              id="ns-budget"
              inputMode="decimal"
              pattern="\d+(\.\d{1,2})?"
              value={budget}
              onChange={(e) => {
                budgetFill.edited()
                setBudget(e.target.value)
              }}
              placeholder="no limit"
            />
          </Field>
        </div>
        <Field id="ns-message" label="First message">
          <textarea
            id="ns-message"
            rows={6}
            value={message}
            onChange={(e) => setMessage(e.target.value)}
            placeholder="What should the agent do?"
            onKeyDown={(e) => {
              if (e.key === 'Enter' && (e.metaKey || e.ctrlKey)) {
                e.preventDefault()
                void submit()
              }
            }}
          />
        </Field>
        <fieldset className="resources">
          <legend>Resources</legend>
          {resources.length === 0 && <p className="muted">A folder of this machine, repositories, files or memory stores to mount in the sandbox.</p>}
          {resources.some((r) => r.type === 'host_folder' && !r.read_only) && (
            <p className="muted resource-note">The agent works on the folder itself. Corral records what it changes so you can review and revert it in the session's Changes view; system folders, your home folder itself and Corral's own data are refused.</p>
          )}
          {resources.map((r, i) => (
            <div key={i} className="resource-row">
              <span className="resource-kind">{r.type === 'github_repository' ? 'Repository' : r.type === 'file' ? 'File' : r.type === 'host_folder' ? 'Folder' : 'Memory store'}</span>
              {r.type === 'github_repository' && (
                <>
                  <input aria-label="Repository URL" className="resource-main" placeholder="https://github.com/owner/repo" value={r.url} onChange={(e) => setRow(i, { url: e.target.value })} required />
                  <input aria-label="Branch" placeholder="branch" value={r.branch} onChange={(e) => setRow(i, { branch: e.target.value })} />
                  <input aria-label="Mount path" placeholder="mount path" value={r.mount_path} onChange={(e) => setRow(i, { mount_path: e.target.value })} />
                  <input aria-label="Access token" type="password" autoComplete="off" placeholder="token" value={r.token} onChange={(e) => setRow(i, { token: e.target.value })} />
                </>
              )}
              {r.type === 'file' && (
                <>
                  <input aria-label="File id" className="resource-main" placeholder="file_…" value={r.file_id} onChange={(e) => setRow(i, { file_id: e.target.value })} required />
                  <input aria-label="Mount path" placeholder="mount path" value={r.mount_path} onChange={(e) => setRow(i, { mount_path: e.target.value })} />
                </>
              )}
              {r.type === 'host_folder' && (
                <>
                  <input aria-label="Folder on this machine" className="resource-main" placeholder="/home/you/project" value={r.host_path} onChange={(e) => setRow(i, { host_path: e.target.value })} required />
                  {pickFolder && (
                    <Button small onClick={() => void choose(i)}>
                      Choose…
                    </Button>
                  )}
                  <input aria-label="Folder mount path" placeholder="/workspace" value={r.mount_path} onChange={(e) => setRow(i, { mount_path: e.target.value })} />
                  <label className="check">
                    <input type="checkbox" checked={r.read_only} onChange={(e) => setRow(i, { read_only: e.target.checked })} /> read-only
                  </label>
                </>
              )}
              {r.type === 'memory_store' && (
                <>
                  {memoryStores.length ? (
                    <select aria-label="Memory store" className="resource-main" value={r.memory_store_id} onChange={(e) => setRow(i, { memory_store_id: e.target.value })} required>
                      <option value="">Choose a memory store…</option>
                      {memoryStores.map((m) => (
                        <option key={m.id} value={m.id}>
                          {m.name}
                        </option>
                      ))}
                    </select>
                  ) : (
                    <input aria-label="Memory store id" className="resource-main" placeholder="memstore_…" value={r.memory_store_id} onChange={(e) => setRow(i, { memory_store_id: e.target.value })} required />
                  )}
                  <select aria-label="Memory store access" value={r.access} onChange={(e) => setRow(i, { access: e.target.value as 'read_write' | 'read_only' })}>
                    <option value="read_write">read and write</option>
                    <option value="read_only">read only</option>
                  </select>
                  <input aria-label="Memory store instructions" placeholder="instructions for the agent (optional)" value={r.instructions} maxLength={4096} onChange={(e) => setRow(i, { instructions: e.target.value })} />
                </>
              )}
              <button type="button" className="icon-btn" aria-label="Remove resource" onClick={() => setResources((rs) => rs.filter((_, j) => j !== i))}>
                <Icon name="x" />
              </button>
            </div>
          ))}
          {uploads.available && <DropArea onFiles={uploads.add}>Drop files here to upload them into the session (read-only at /mnt/session/uploads),</DropArea>}
          <UploadList rows={uploads.rows} />
          <div className="resource-add">
            <Button small icon="plus" onClick={() => setResources((rs) => [...rs, { type: 'host_folder', host_path: '', mount_path: '', read_only: false }])}>
              Folder
            </Button>
            <Button small icon="plus" onClick={() => setResources((rs) => [...rs, { type: 'github_repository', url: '', mount_path: '', branch: '', token: '' }])}>
              Repository
            </Button>
            <Button small icon="plus" onClick={() => setResources((rs) => [...rs, { type: 'file', file_id: '', mount_path: '' }])}>
              File
            </Button>
            <Button small icon="plus" onClick={() => setResources((rs) => [...rs, { type: 'memory_store', memory_store_id: '', access: 'read_write', instructions: '' }])}>
              Memory store
            </Button>
          </div>
        </fieldset>
        <VaultPicker selected={vaultIds} onChange={setVaultIds} onCreate={() => onGo('/vaults/new')} />
        <ErrorNote error={err} />
        <footer className="dialog-foot">
          <span className="muted">Ctrl+Enter to start</span>
          <Button variant="ghost" onClick={onClose}>
            Cancel
          </Button>
          <Button type="submit" variant="primary" disabled={busy || uploading || !agentId || !envId}>
            Start session
          </Button>
        </footer>
      </form>
    </Dialog>
  )
}

/** Dollars typed in the budget field → the API's whole cents (the engine names a bad amount). */
function budgetCents(text: string): string {
  const r = parseUsd(text)
  return 'cents' in r ? r.cents : text.trim()
}
