import { useMemo, useState } from 'react'
import { useClient } from '../../api/context'
import type { Deployment, DeploymentRun, Page } from '../../api/types'
import { Button, ChangedElsewhere, Empty, ErrorNote, Field, Spinner } from '../../ui/components'
import { relativeTime } from '../../ui/format'
import { useAction, useDraft, useQuery } from '../../ui/hooks'
import { ResourceSidebar } from '../../ui/ResourceSidebar'
import { VaultPicker } from '../vaults/VaultPicker'
import { useSessions } from '../sessions/SessionsProvider'
import { CRON_PRESETS, fromNow, instantWords, nextRunsInWords, runTriggerWords, type RunLike } from './schedule-words'

type Run = DeploymentRun & RunLike

const localZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC'

/** Why a deployment is paused, in words. */
function pausedWords(d: Deployment): string | null {
  if (d.status !== 'paused' || !d.paused_reason) return null
  if (d.paused_reason.type === 'manual') return 'Paused'
  const type = d.paused_reason.error.type
  const what: Record<string, string> = {
    agent_archived_error: 'its agent was archived',
    environment_archived_error: 'its environment was archived',
    environment_not_found_error: 'its environment no longer exists',
    vault_archived_error: 'one of its vaults was archived',
    vault_not_found_error: 'one of its vaults no longer exists',
    file_not_found_error: 'one of its files no longer exists',
    memory_store_archived_error: 'one of its memory stores was archived',
    session_resource_not_found_error: 'one of its resources no longer exists',
    self_hosted_resources_unsupported_error: 'its self-hosted environment cannot mount its files or repositories',
    mcp_egress_blocked_error: "its environment's networking blocks an MCP server of its agent",
  }
  return `Paused: ${what[type] ?? type.replace(/_/g, ' ')}`
}

function scheduleOf(d: Deployment): { expression: string; timezone: string; upcoming: string[]; last: string | null } | null {
  const s = d.schedule
  if (!s || s.type !== 'cron') return null
  return { expression: s.expression, timezone: s.timezone, upcoming: s.upcoming_runs_at ?? [], last: s.last_run_at ?? null }
}

/** Schedules: deployments that start a session on a cron, or when asked; their runs and sessions. */
export function SchedulesView({ selectedId, onSelect }: { selectedId?: string; onSelect: (id: string) => void }) {
  const client = useClient()
  const list = useQuery(() => client.request<Page<Deployment>>('deployments.list', {}, { include_archived: true, limit: 100 }), [], 10_000)
  const deployments = list.data?.data ?? []
  const creating = selectedId === 'new'
  const selected = creating ? undefined : deployments.find((d) => d.id === selectedId)
  const now = new Date()
  return (
    <div className="split">
      <ResourceSidebar
        title="Schedules"
        items={deployments}
        selectedId={selectedId}
        onSelect={onSelect}
        emptyText="No schedules yet."
        detail={(d) => {
          const s = scheduleOf(d)
          const paused = pausedWords(d)
          if (paused) return <span className="pill pill-warn">{paused}</span>
          if (d.archived_at || !s) return <span>{s ? s.expression : 'run on demand'}</span>
          return <span>next {s.upcoming[0] ? fromNow(new Date(s.upcoming[0]), now) : '—'}</span>
        }}
      />
      <div className="pane">
        {creating ? (
          <ScheduleForm
            key="new"
            onSaved={(d) => {
              list.reload()
              onSelect(d.id)
            }}
          />
        ) : selected ? (
          <ScheduleDetail key={selected.id} deployment={selected} onChanged={list.reload} />
        ) : list.loading && !list.data ? (
          <Spinner label="Loading schedules" />
        ) : (
          <Empty icon="history" title="Schedules">
            A schedule starts a session from an agent on a cron in your time zone (every weekday at 9:00, every hour, …), or when you press Run now. Each start is a run, with a link to its session. Schedules fire while Corral runs; after the computer slept, the latest missed run starts once.
            <ErrorNote error={list.error} />
          </Empty>
        )}
      </div>
    </div>
  )
}

function ScheduleDetail({ deployment: d, onChanged }: { deployment: Deployment; onChanged: () => void }) {
  const client = useClient()
  const action = useAction()
  const busy = action.busy !== undefined
  const runs = useQuery(() => client.request<Page<Run>>('deploymentRuns.list', {}, { deployment_id: d.id, limit: 50 }), [d.id, d.updated_at], 5_000)
  const s = scheduleOf(d)
  const now = new Date()
  const act = (op: 'deployments.pause' | 'deployments.unpause' | 'deployments.archive' | 'deployments.run') =>
    action.run(async () => {
      await client.request(op, { id: d.id })
      onChanged()
      runs.reload()
    })
  const paused = pausedWords(d)
  return (
    <div className="editor">
      <header className="editor-head">
        <div>
          <h1>{d.name}</h1>
          <div className="thread-sub">
            <span className="mono">{d.id}</span>
            {d.archived_at ? <span className="pill">archived</span> : paused ? <span className="pill pill-warn">{paused}</span> : <span className="pill pill-good">Active</span>}
            <span>updated {relativeTime(d.updated_at)}</span>
          </div>
        </div>
        {!d.archived_at && (
          <div className="thread-actions">
            {d.status === 'paused' ? (
              <Button disabled={busy} onClick={() => void act('deployments.unpause')}>
                Resume
              </Button>
            ) : (
              <Button disabled={busy} onClick={() => void act('deployments.pause')}>
                Pause
              </Button>
            )}
            <Button variant="ghost" icon="archive" disabled={busy} onClick={() => void act('deployments.archive')}>
              Archive
            </Button>
            <Button variant="primary" disabled={busy} onClick={() => void act('deployments.run')}>
              Run now
            </Button>
          </div>
        )}
      </header>
      <ErrorNote error={action.error} />
      <section className="schedule-section" aria-label="Schedule">
        <h2>Schedule</h2>
        {s ? (
          <>
            <p>
              <code>{s.expression}</code> in {s.timezone}
              {s.last ? <> · last scheduled run {relativeTime(s.last)}</> : null}
            </p>
            {!d.archived_at && (
              <>
                <p className="muted">{d.status === 'paused' ? 'Would run next (resume to let it):' : 'Next runs (each starts up to 30 s after its time):'}</p>
                <ol className="schedule-next">
                  {s.upcoming.map((at) => (
                    <li key={at}>
                      {instantWords(new Date(at), s.timezone, now)}, {fromNow(new Date(at), now)}
                    </li>
                  ))}
                </ol>
              </>
            )}
          </>
        ) : (
          <p className="muted">No schedule: it runs when you press Run now.</p>
        )}
      </section>
      <section className="schedule-section" aria-label="Runs">
        <h2>Runs</h2>
        <ErrorNote error={runs.error} />
        {runs.data && runs.data.data.length === 0 && <p className="muted">No runs yet.</p>}
        <ul className="schedule-runs">
          {(runs.data?.data ?? []).map((r) => (
            <li key={r.id} className={`schedule-run${r.error ? ' failed' : ''}${r.corral?.catch_up ? ' missed' : ''}`}>
              <div className="schedule-run-what">{runTriggerWords(r, s?.timezone ?? localZone(), now)}</div>
              <div className="schedule-run-outcome">
                <span className="muted">started {relativeTime(r.created_at)}</span>
                {r.session_id ? (
                  <a href={`#/sessions/${r.session_id}`}>Open session</a>
                ) : (
                  <span className="schedule-run-error" role="note">
                    {r.error?.type.replace(/_/g, ' ')}: {r.error?.message}
                  </span>
                )}
              </div>
            </li>
          ))}
        </ul>
      </section>
      {!d.archived_at && (
        <section className="schedule-section" aria-label="Edit">
          <h2>Edit</h2>
          <ScheduleForm deployment={d} onSaved={onChanged} embedded />
        </section>
      )}
    </div>
  )
}

/** The text of a deployment's first user.message (what each session is asked). */
function taskOf(d?: Deployment): string {
  const m = d?.initial_events.find((e) => e.type === 'user.message') as { content?: { type: string; text?: string }[] } | undefined
  return m?.content?.find((b) => b.type === 'text')?.text ?? ''
}

/** What the schedule form edits, as one draft (useDraft): '' for an agent or environment is "the first live one". */
interface ScheduleDraft {
  name: string
  agentId: string
  envId: string
  task: string
  scheduled: boolean
  expression: string
  timezone: string
  /** The vault ids in order, comma-joined (a string, so that an unchanged list compares equal). */
  vaults: string
}

function scheduleDraftOf(d: Deployment | undefined): ScheduleDraft {
  const s = d ? scheduleOf(d) : null
  return {
    name: d?.name ?? '',
    agentId: d?.agent.id ?? '',
    envId: d?.environment_id ?? '',
    task: taskOf(d),
    scheduled: d ? s !== null : true,
    expression: s?.expression ?? '0 9 * * 1-5',
    timezone: s?.timezone ?? localZone(),
    vaults: (d?.vault_ids ?? []).join(','),
  }
}

/**
 * A deployment's version as this form sees it: the fields it edits. A pause, a resume or a run
 * (each moves updated_at) is not a newer version of them, so it neither replaces nor announces
 * anything; a change of what the form edits, saved elsewhere, is.
 */
const editedFieldsOf = (d: Deployment): string => JSON.stringify(scheduleDraftOf(d))

/** The fields of `draft` that differ from `from` (what was edited since the version the draft started from). */
function editedSince(draft: ScheduleDraft, from: ScheduleDraft): Partial<ScheduleDraft> {
  return Object.fromEntries(Object.entries(draft).filter(([k, v]) => v !== from[k as keyof ScheduleDraft]))
}

function ScheduleForm({ deployment, onSaved, embedded }: { deployment?: Deployment; onSaved: (d: Deployment) => void; embedded?: boolean }) {
  const client = useClient()
  const { agents, environments } = useSessions()
  const liveAgents = agents.filter((a) => !a.archived_at)
  const liveEnvs = environments.filter((e) => !e.archived_at)
  // the deployments list is polled: a change saved elsewhere (the SDK, another window) keeps what was typed
  const { draft, setDraft, base, newer, load, keep, saved: savedAs } = useDraft(deployment, scheduleDraftOf, editedFieldsOf)
  const { name, task, scheduled, expression, timezone } = draft
  const set = (patch: Partial<ScheduleDraft>) => setDraft((x) => ({ ...x, ...patch }))
  // keeping the edits over a newer version: its fields, with the ones edited here on top
  const keepEdits = () => {
    if (!newer || !base) return keep()
    const edited = editedSince(draft, scheduleDraftOf(base))
    keep()
    setDraft({ ...scheduleDraftOf(newer), ...edited })
  }
  const [err, setErr] = useState<unknown>()
  const [busy, setBusy] = useState(false)
  const preview = useMemo(() => nextRunsInWords(expression, timezone, new Date()), [expression, timezone])
  const agent = draft.agentId || liveAgents[0]?.id || ''
  const env = draft.envId || liveEnvs[0]?.id || ''
  const ready = name.trim() && agent && env && task.trim() && (!scheduled || 'runs' in preview)
  const vaultIds = draft.vaults ? draft.vaults.split(',') : []
  const save = async () => {
    setBusy(true)
    setErr(undefined)
    try {
      const schedule = scheduled ? { type: 'cron', expression: expression.trim(), timezone } : null
      const initial_events = [{ type: 'user.message', content: [{ type: 'text', text: task }] }]
      let saved: Deployment
      if (deployment) {
        // only what was edited since the version the draft was made from: a field changed elsewhere
        // and not here keeps that change
        const edited = editedSince(draft, scheduleDraftOf(base ?? deployment))
        const scheduleEdited = 'scheduled' in edited || 'expression' in edited || 'timezone' in edited
        saved = await client.request<Deployment>('deployments.update', { id: deployment.id }, {
          ...('name' in edited ? { name } : {}),
          ...(scheduleEdited ? { schedule } : {}),
          ...('agentId' in edited ? { agent } : {}),
          ...('envId' in edited ? { environment_id: env } : {}),
          ...('task' in edited ? { initial_events } : {}),
          ...('vaults' in edited ? { vault_ids: vaultIds } : {}),
        })
        savedAs(saved)
      } else saved = await client.request<Deployment>('deployments.create', {}, { name, agent, environment_id: env, initial_events, schedule, ...(vaultIds.length ? { vault_ids: vaultIds } : {}) })
      onSaved(saved)
    } catch (e) {
      setErr(e)
    } finally {
      setBusy(false)
    }
  }
  return (
    <div className={embedded ? '' : 'editor'}>
      {!embedded && (
        <header className="editor-head">
          <h1>New schedule</h1>
        </header>
      )}
      {newer && (
        <ChangedElsewhere
          text={`This schedule was changed elsewhere (${relativeTime(newer.updated_at)}) after your edits began. Saving sends only the fields you edited: the others keep that change.`}
          loadLabel="Load the saved schedule"
          onLoad={load}
          onKeep={keepEdits}
        />
      )}
      <form
        className="form"
        onSubmit={(e) => {
          e.preventDefault()
          if (ready) void save()
        }}
      >
        <div className="form-row">
          <Field id="sched-name" label="Name">
            <input id="sched-name" value={name} onChange={(e) => set({ name: e.target.value })} placeholder="Daily order report" required />
          </Field>
          <Field id="sched-agent" label="Agent">
            <select id="sched-agent" value={agent} onChange={(e) => set({ agentId: e.target.value })}>
              {liveAgents.length === 0 && <option value="">No agent yet</option>}
              {liveAgents.map((a) => (
                <option key={a.id} value={a.id}>
                  {a.name}
                </option>
              ))}
            </select>
          </Field>
          <Field id="sched-env" label="Environment">
            <select id="sched-env" value={env} onChange={(e) => set({ envId: e.target.value })}>
              {liveEnvs.length === 0 && <option value="">No environment yet</option>}
              {liveEnvs.map((x) => (
                <option key={x.id} value={x.id}>
                  {x.name}
                </option>
              ))}
            </select>
          </Field>
        </div>
        <Field id="sched-task" label="Task" hint="The message each session starts with. Nobody is there when it runs: tools that ask for confirmation will wait for you.">
          <textarea id="sched-task" rows={3} value={task} onChange={(e) => set({ task: e.target.value })} placeholder="Compile yesterday's orders into report.md." />
        </Field>
        <VaultPicker selected={vaultIds} onChange={(ids) => set({ vaults: ids.join(',') })} />
        <label className="check">
          <input type="checkbox" checked={scheduled} onChange={(e) => set({ scheduled: e.target.checked })} /> Run on a schedule (otherwise only when you press Run now)
        </label>
        {scheduled && (
          <fieldset className="cron-helper">
            <legend>When</legend>
            <div className="radio-row" role="group" aria-label="Common schedules">
              {CRON_PRESETS.map((p) => (
                <Button key={p.expression} small variant={p.expression === expression.trim() ? 'primary' : 'default'} onClick={() => set({ expression: p.expression })}>
                  {p.label}
                </Button>
              ))}
            </div>
            <div className="form-row">
              <Field id="sched-cron" label="Cron expression" hint="minute hour day-of-month month day-of-week, e.g. 0 9 * * 1-5">
                <input id="sched-cron" className="mono" value={expression} onChange={(e) => set({ expression: e.target.value })} aria-describedby="sched-preview" />
              </Field>
              <Field id="sched-tz" label="Time zone">
                <input id="sched-tz" value={timezone} onChange={(e) => set({ timezone: e.target.value })} placeholder="Europe/Berlin" />
              </Field>
            </div>
            <div id="sched-preview" className="cron-preview" aria-live="polite">
              {'problem' in preview ? (
                <p className="error-text" role="alert">
                  {preview.problem}
                </p>
              ) : (
                <>
                  <p className="muted">The next five runs:</p>
                  <ol className="schedule-next">
                    {preview.runs.map((r) => (
                      <li key={r.at}>{r.words}</li>
                    ))}
                  </ol>
                </>
              )}
            </div>
          </fieldset>
        )}
        <ErrorNote error={err} />
        <div className="thread-actions">
          <Button type="submit" variant="primary" disabled={busy || !ready}>
            {deployment ? 'Save' : 'Create schedule'}
          </Button>
        </div>
      </form>
    </div>
  )
}
