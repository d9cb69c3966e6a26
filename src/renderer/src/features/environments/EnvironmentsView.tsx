import { useState } from 'react'
import { useClient } from '../../api/context'
import type { Environment } from '../../api/types'
import { Button, ChangedElsewhere, Empty, ErrorNote, Field } from '../../ui/components'
import { useDraft } from '../../ui/hooks'
import { relativeTime } from '../../ui/format'
import { useSessions } from '../sessions/SessionsProvider'
import { ResourceSidebar } from '../../ui/ResourceSidebar'
import { draftOf, hasPackages, paramsOf, type Draft } from './draft'
import { PackagesStatus } from './PackagesStatus'
import { WorkersPanel } from './WorkersPanel'

/** Environments: where sessions' hands run (a local sandbox or a self-hosted worker queue). */
export function EnvironmentsView({ selectedId, onSelect }: { selectedId?: string; onSelect: (id: string) => void }) {
  const { environments, refresh } = useSessions()
  const creating = selectedId === 'new'
  const selected = creating ? undefined : environments.find((e) => e.id === selectedId)
  return (
    <div className="split">
      <ResourceSidebar
        title="Environments"
        items={environments}
        selectedId={selectedId}
        onSelect={onSelect}
        emptyText="No environments yet."
        detail={(e) => <span>{e.config.type === 'self_hosted' ? 'self-hosted' : 'local sandbox'}</span>}
      />
      <div className="pane">
        {creating || selected ? (
          <EnvironmentEditor key={selected ? selected.id : 'new'} env={selected} onSaved={(e) => { refresh(); onSelect(e.id) }} onDeleted={() => { refresh(); onSelect('') }} />
        ) : (
          <Empty icon="box" title="Environments">
            An environment says where a session&apos;s tools run: a local sandbox (Docker or bubblewrap, no network unless you allow hosts) or a self-hosted worker.
          </Empty>
        )}
      </div>
    </div>
  )
}

function EnvironmentEditor({ env, onSaved, onDeleted }: { env?: Environment; onSaved: (e: Environment) => void; onDeleted: () => void }) {
  const client = useClient()
  // a change saved elsewhere (the SDK, another window) while this one is edited does not wipe the edits
  const { draft: d, setDraft: setD, newer, load, keep, saved: savedAs } = useDraft(env, draftOf, (e) => e.updated_at)
  const [err, setErr] = useState<unknown>()
  const [busy, setBusy] = useState(false)
  const set = (patch: Partial<Draft>) => setD((x) => ({ ...x, ...patch }))
  const save = async () => {
    setBusy(true)
    setErr(undefined)
    try {
      const p = paramsOf(d, env)
      const saved = env ? await client.request<Environment>('environments.update', { id: env.id }, p) : await client.request<Environment>('environments.create', {}, p)
      // Install the packages now, so the environment's first session does not wait for them.
      if (hasPackages(saved)) await client.request('environments.packages.prepare', { id: saved.id }).catch(() => undefined)
      if (env) savedAs(saved)
      onSaved(saved)
    } catch (e) {
      setErr(e)
    } finally {
      setBusy(false)
    }
  }
  return (
    <div className="editor">
      <header className="editor-head">
        <div>
          <h1>{env ? env.name : 'New environment'}</h1>
          {env && (
            <div className="thread-sub">
              <span className="mono">{env.id}</span>
              <span>updated {relativeTime(env.updated_at)}</span>
            </div>
          )}
        </div>
        <div className="thread-actions">
          {env && !env.archived_at && (
            <Button variant="ghost" icon="archive" onClick={() => void client.request<Environment>('environments.archive', { id: env.id }).then(onSaved, setErr)}>
              Archive
            </Button>
          )}
          {env && (
            <Button
              variant="ghost"
              onClick={() => {
                if (window.confirm(`Delete ${env.name}?`)) void client.request('environments.delete', { id: env.id }).then(onDeleted, setErr)
              }}
            >
              Delete
            </Button>
          )}
          <Button variant="primary" disabled={busy || !d.name.trim()} onClick={() => void save()}>
            {env ? 'Save' : 'Create environment'}
          </Button>
        </div>
      </header>
      {newer && (
        <ChangedElsewhere
          text={`This environment was saved elsewhere (${relativeTime(newer.updated_at)}) after your edits began; saving now writes your edits over that change.`}
          loadLabel="Load the saved version"
          onLoad={load}
          onKeep={keep}
        />
      )}
      <ErrorNote error={err} />
      <form className="form" onSubmit={(e) => { e.preventDefault(); void save() }}>
        <div className="form-row">
          <Field id="env-name" label="Name">
            <input id="env-name" value={d.name} onChange={(e) => set({ name: e.target.value })} required />
          </Field>
          <Field id="env-type" label="Kind">
            <select id="env-type" value={d.type} onChange={(e) => set({ type: e.target.value as Draft['type'] })}>
              <option value="cloud">Local sandbox</option>
              <option value="self_hosted">Self-hosted workers</option>
            </select>
          </Field>
        </div>
        <Field id="env-desc" label="Description">
          <input id="env-desc" value={d.description} onChange={(e) => set({ description: e.target.value })} />
        </Field>
        {env && env.config.type === 'self_hosted' && <WorkersPanel environmentId={env.id} />}
        {d.type === 'cloud' && (
          <>
            <fieldset>
              <legend>Sandbox</legend>
              <div className="form-row">
                <Field id="env-backend" label="Backend">
                  <select id="env-backend" value={d.backend} onChange={(e) => set({ backend: e.target.value as Draft['backend'] })}>
                    <option value="auto">Automatic (Docker when it answers, else a VM, else bubblewrap)</option>
                    <option value="docker">Docker</option>
                    <option value="vm">VM (QEMU, Linux)</option>
                    <option value="bubblewrap">bubblewrap (Linux)</option>
                  </select>
                </Field>
                <Field id="env-image" label="Image (Docker)">
                  <input id="env-image" value={d.image} onChange={(e) => set({ image: e.target.value })} placeholder="corral-sandbox:latest" />
                </Field>
              </div>
              <div className="form-row">
                <Field id="env-mem" label="Memory (MB)">
                  <input id="env-mem" inputMode="numeric" value={d.memoryMb} onChange={(e) => set({ memoryMb: e.target.value })} placeholder="default" />
                </Field>
                <Field id="env-cpus" label="CPUs">
                  <input id="env-cpus" inputMode="decimal" value={d.cpus} onChange={(e) => set({ cpus: e.target.value })} placeholder="default" />
                </Field>
              </div>
            </fieldset>
            <fieldset>
              <legend>Network</legend>
              <div className="radio-row" role="radiogroup" aria-label="Network access">
                {(
                  [
                    ['none', 'No network'],
                    ['limited', 'Allowed hosts only'],
                    ['unrestricted', 'Unrestricted (through the proxy)'],
                  ] as const
                ).map(([v, label]) => (
                  <label key={v}>
                    <input type="radio" name="env-net" value={v} checked={d.networking === v} onChange={() => set({ networking: v })} /> {label}
                  </label>
                ))}
              </div>
              {d.networking === 'limited' && (
                <>
                  <Field id="env-hosts" label="Allowed hosts" hint="One per line; *.example.com for subdomains.">
                    <textarea id="env-hosts" rows={3} className="mono" value={d.allowedHosts} onChange={(e) => set({ allowedHosts: e.target.value })} />
                  </Field>
                  <label className="check">
                    <input type="checkbox" checked={d.allowPackageManagers} onChange={(e) => set({ allowPackageManagers: e.target.checked })} /> Allow package registries (apt, npm, PyPI, …)
                  </label>
                  <label className="check">
                    <input type="checkbox" checked={d.allowMcp} onChange={(e) => set({ allowMcp: e.target.checked })} /> Allow the agent&apos;s MCP servers
                  </label>
                </>
              )}
            </fieldset>
            <fieldset>
              <legend>Packages (installed once per environment, cached)</legend>
              {env && <PackagesStatus environmentId={env.id} version={env.updated_at} />}
              <div className="form-row three">
                <Field id="env-apt" label="apt">
                  <input id="env-apt" className="mono" value={d.apt} onChange={(e) => set({ apt: e.target.value })} placeholder="ripgrep jq" />
                </Field>
                <Field id="env-npm" label="npm">
                  <input id="env-npm" className="mono" value={d.npm} onChange={(e) => set({ npm: e.target.value })} />
                </Field>
                <Field id="env-pip" label="pip">
                  <input id="env-pip" className="mono" value={d.pip} onChange={(e) => set({ pip: e.target.value })} />
                </Field>
              </div>
            </fieldset>
          </>
        )}
      </form>
    </div>
  )
}
