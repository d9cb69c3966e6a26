import { useState } from 'react'
import type { BetaManagedAgentsCredentialValidation as CredentialValidation } from '@anthropic-ai/sdk/resources/beta/vaults/credentials'
import { useClient } from '../../api/context'
import type { Page } from '../../api/types'
import type { Credential, Vault } from '../../../../shared/api/types'
import { Button, Empty, ErrorNote, Field, Icon } from '../../ui/components'
import { relativeTime } from '../../ui/format'
import { useAction, useQuery } from '../../ui/hooks'
import { ResourceSidebar } from '../../ui/ResourceSidebar'
import { useSetup } from '../setup/SetupProvider'
import { checkWords, createBody, credentialTitle, emptyDraft, KIND_LABELS, kindText, missing, replaceBody, targetText, type CredentialDraft, type CredentialKind, type Replacement } from './credential-draft'

/**
 * Vaults (spec resources.md §14): the credentials a session's MCP servers and sandbox use. A
 * vault holds credentials; a session names its vaults at creation (the new-session dialog). The
 * secrets go to the OS keychain and are never shown again: this page sends them and reads back
 * only what they are for. An MCP OAuth credential can be checked against its server.
 */
export function VaultsView({ selectedId, onSelect }: { selectedId?: string; onSelect: (id: string) => void }) {
  const client = useClient()
  const vaults = useQuery(() => client.request<Page<Vault>>('vaults.list', {}, { limit: 100, include_archived: true }), [])
  const list = (vaults.data?.data ?? []).map((v) => ({ ...v, name: v.display_name }))
  const creating = selectedId === 'new'
  const selected = creating ? undefined : list.find((v) => v.id === selectedId)
  return (
    <div className="split">
      <ResourceSidebar title="Vaults" items={list} selectedId={selectedId} onSelect={onSelect} emptyText={vaults.loading ? 'Loading…' : 'No vaults yet.'} detail={(v) => <span>created {relativeTime(v.created_at)}</span>} />
      <div className="pane">
        <KeychainNotice />
        <ErrorNote error={vaults.error} />
        {creating ? (
          <NewVault onCreated={(v) => { vaults.reload(); onSelect(v.id) }} />
        ) : selected ? (
          <VaultDetail key={selected.id} vault={selected} onChanged={vaults.reload} onDeleted={() => { vaults.reload(); onSelect('') }} />
        ) : (
          <Empty icon="lock" title="Vaults">
            A vault holds credentials: tokens for the agent&apos;s MCP servers, and secrets its programs send to the hosts you allow. Pick vaults when you start a session. Corral keeps the secrets in your OS keychain and uses them outside the sandbox: the agent never sees one.
          </Empty>
        )}
      </div>
    </div>
  )
}

/** Without an OS keychain no secret can be stored: say so, with the engine's fix. */
function KeychainNotice() {
  const keychain = useSetup().settings?.keychain
  if (keychain?.available !== false) return null
  return (
    <div className="note note-warn vault-notice" role="status">
      <strong>Credentials cannot be stored here: no OS keychain is available.</strong> {keychain.problem}
    </div>
  )
}

function NewVault({ onCreated }: { onCreated: (v: Vault) => void }) {
  const client = useClient()
  const [name, setName] = useState('')
  const action = useAction()
  const create = () => action.run(async () => onCreated(await client.request<Vault>('vaults.create', {}, { display_name: name.trim() })))
  return (
    <section className="editor" aria-label="New vault">
      <h1>New vault</h1>
      <ErrorNote error={action.error} />
      <form className="form" onSubmit={(e) => { e.preventDefault(); void create() }}>
        <Field id="vault-name" label="Name" hint="For example the project or the person the credentials belong to.">
          <input id="vault-name" value={name} onChange={(e) => setName(e.target.value)} maxLength={255} required autoFocus />
        </Field>
        <div className="thread-actions">
          <Button variant="primary" icon="plus" type="submit" disabled={action.busy !== undefined || !name.trim()}>
            Create vault
          </Button>
        </div>
      </form>
    </section>
  )
}

function VaultDetail({ vault, onChanged, onDeleted }: { vault: Vault; onChanged: () => void; onDeleted: () => void }) {
  const client = useClient()
  const credentials = useQuery(() => client.request<Page<Credential>>('credentials.list', { id: vault.id }, { limit: 100, include_archived: true }), [vault.id, vault.archived_at])
  const [name, setName] = useState(vault.display_name)
  const action = useAction()
  const run = (work: () => Promise<unknown>, after: () => void) =>
    action.run(async () => {
      await work()
      after()
    })
  const list = credentials.data?.data ?? []
  const archived = vault.archived_at !== null
  return (
    <div className="editor">
      <header className="editor-head">
        <div>
          <h1>{vault.display_name}</h1>
          <div className="thread-sub">
            <span className="mono">{vault.id}</span>
            <span>created {relativeTime(vault.created_at)}</span>
            {archived && <span className="pill">archived</span>}
          </div>
        </div>
        <div className="thread-actions">
          {!archived && (
            <Button variant="ghost" icon="archive" onClick={() => void run(() => client.request('vaults.archive', { id: vault.id }), onChanged)} title="Sessions can no longer use it; its credentials are archived with it">
              Archive
            </Button>
          )}
          <Button
            variant="ghost"
            icon="x"
            onClick={() => {
              if (window.confirm(`Delete the vault ${vault.display_name} and its ${list.length} credential${list.length === 1 ? '' : 's'}? Their secrets are removed from the keychain.`)) void run(() => client.request('vaults.delete', { id: vault.id }), onDeleted)
            }}
          >
            Delete
          </Button>
        </div>
      </header>
      <ErrorNote error={action.error ?? credentials.error} />
      {!archived && (
        <form className="vault-rename" onSubmit={(e) => { e.preventDefault(); void run(() => client.request('vaults.update', { id: vault.id }, { display_name: name.trim() }), onChanged) }}>
          <Field id="vault-rename" label="Name">
            <input id="vault-rename" value={name} onChange={(e) => setName(e.target.value)} maxLength={255} required />
          </Field>
          <Button type="submit" disabled={!name.trim() || name.trim() === vault.display_name}>
            Rename
          </Button>
        </form>
      )}
      <section className="versions" aria-label="Credentials">
        <h2>
          <Icon name="lock" /> Credentials
        </h2>
        {list.length === 0 && <p className="muted">{credentials.loading ? 'Loading…' : 'No credentials yet.'}</p>}
        <ul className="credential-list">
          {list.map((c) => (
            <CredentialRow key={c.id} vaultId={vault.id} credential={c} onChanged={credentials.reload} />
          ))}
        </ul>
      </section>
      {!archived && <AddCredential vaultId={vault.id} onAdded={credentials.reload} />}
    </div>
  )
}

function CredentialRow({ vaultId, credential: c, onChanged }: { vaultId: string; credential: Credential; onChanged: () => void }) {
  const client = useClient()
  const action = useAction()
  const [check, setCheck] = useState<CredentialValidation>()
  const [replacing, setReplacing] = useState(false)
  const ids = { id: vaultId, credentialId: c.id }
  const title = credentialTitle(c)
  const act = action.run
  const archived = c.archived_at !== null
  // a credential made while no keychain answered has metadata and no secret (Corral's marker)
  const noSecret = (c as Credential & { corral?: { secret_stored?: boolean } }).corral?.secret_stored === false
  const auth = c.auth
  return (
    <li className="credential" aria-label={title}>
      <div className="credential-head">
        <div className="credential-what">
          <strong>{title}</strong>
          <span className="muted">{kindText(c)}</span>
          <span className="mono credential-target">{targetText(c)}</span>
          <span className="muted">
            updated {relativeTime(c.updated_at)}
            {auth.type === 'mcp_oauth' && auth.expires_at ? ` · expires ${relativeTime(auth.expires_at)}` : ''}
            {auth.type === 'mcp_oauth' && auth.refresh ? ' · refreshes itself' : ''}
          </span>
        </div>
        <div className="thread-actions">
          {archived && <span className="pill">archived</span>}
          {!archived && auth.type === 'mcp_oauth' && (
            <Button small icon="check" disabled={action.busy !== undefined} onClick={() => void act(async () => setCheck(await client.request<CredentialValidation>('credentials.mcpOAuthValidate', ids)), 'check')}>
              {action.busy === 'check' ? 'Checking…' : 'Check'}
            </Button>
          )}
          {!archived && (
            <Button small variant="ghost" aria-expanded={replacing} onClick={() => setReplacing((v) => !v)}>
              Replace secret
            </Button>
          )}
          {!archived && (
            <Button small variant="ghost" icon="archive" aria-label={`Archive ${title}`} onClick={() => void act(async () => { await client.request('credentials.archive', ids); onChanged() })}>
              Archive
            </Button>
          )}
          <Button
            small
            variant="ghost"
            icon="x"
            aria-label={`Delete ${title}`}
            onClick={() => {
              if (window.confirm(`Delete the credential ${title}? Its secret is removed from the keychain.`)) void act(async () => { await client.request('credentials.delete', ids); onChanged() })
            }}
          >
            Delete
          </Button>
        </div>
      </div>
      {noSecret && !archived && <p className="note note-warn">No secret is stored for this credential (no keychain answered when it was saved). Replace the secret to use it.</p>}
      <ErrorNote error={action.error} />
      {check && <CheckResult check={check} />}
      {replacing && (
        <ReplaceSecret
          credential={c}
          onSave={(body) =>
            act(async () => {
              await client.request('credentials.update', ids, body)
              setReplacing(false)
              setCheck(undefined)
              onChanged()
            })
          }
        />
      )}
    </li>
  )
}

function CheckResult({ check }: { check: CredentialValidation }) {
  const w = checkWords(check)
  return (
    <div className={`note ${w.tone === 'ok' ? 'note-good' : w.tone === 'bad' ? 'note-bad' : 'note-warn'}`} role="status" aria-label="Check result">
      <strong>{w.headline}</strong> <span className="muted">Checked {relativeTime(check.validated_at)}.</span>
      {w.details.length > 0 && (
        <ul className="check-details">
          {w.details.map((d) => (
            <li key={d}>{d}</li>
          ))}
        </ul>
      )}
    </div>
  )
}

/** New secrets for a credential; what is left empty keeps the one the keychain holds. */
function ReplaceSecret({ credential: c, onSave }: { credential: Credential; onSave: (body: Record<string, unknown>) => Promise<void> }) {
  const [r, setR] = useState<Replacement>({ secret: '', expiresAt: '', refreshToken: '' })
  const body = replaceBody(c, r)
  const auth = c.auth
  const secretLabel = auth.type === 'static_bearer' ? 'New token' : auth.type === 'mcp_oauth' ? 'New access token' : 'New value'
  const idp = `rep-${c.id}`
  return (
    <form className="form credential-replace" aria-label={`Replace the secret of ${credentialTitle(c)}`} onSubmit={(e) => { e.preventDefault(); if (body) void onSave(body) }}>
      <div className="form-row">
        <Field id={`${idp}-secret`} label={secretLabel} hint="Kept in the OS keychain; never shown again.">
          <input id={`${idp}-secret`} type="password" autoComplete="off" value={r.secret} onChange={(e) => setR({ ...r, secret: e.target.value })} />
        </Field>
        {auth.type === 'mcp_oauth' && (
          <Field id={`${idp}-expires`} label="Expires (optional)">
            <input id={`${idp}-expires`} type="datetime-local" value={r.expiresAt} onChange={(e) => setR({ ...r, expiresAt: e.target.value })} />
          </Field>
        )}
        {auth.type === 'mcp_oauth' && auth.refresh && (
          <Field id={`${idp}-refresh`} label="New refresh token (optional)">
            <input id={`${idp}-refresh`} type="password" autoComplete="off" value={r.refreshToken} onChange={(e) => setR({ ...r, refreshToken: e.target.value })} />
          </Field>
        )}
      </div>
      <div className="thread-actions">
        <Button type="submit" variant="primary" disabled={!body}>
          Save the new secret
        </Button>
      </div>
    </form>
  )
}

function AddCredential({ vaultId, onAdded }: { vaultId: string; onAdded: () => void }) {
  const client = useClient()
  const [d, setD] = useState<CredentialDraft>(emptyDraft())
  const action = useAction()
  const [added, setAdded] = useState<string>()
  const set = (patch: Partial<CredentialDraft>) => {
    setAdded(undefined)
    setD((x) => ({ ...x, ...patch }))
  }
  const lacking = missing(d)
  const add = () =>
    action.run(async () => {
      const c = await client.request<Credential>('credentials.create', { id: vaultId }, createBody(d))
      // the secrets leave the page once the keychain has them; the next credential starts blank
      setD(emptyDraft(d.kind))
      setAdded(credentialTitle(c))
      onAdded()
    })
  return (
    <section className="versions" aria-label="Add a credential">
      <h2>
        <Icon name="plus" /> Add a credential
      </h2>
      <ErrorNote error={action.error} />
      {added && (
        <p className="ok-note" role="status">
          Added {added}. Its secret is in the keychain.
        </p>
      )}
      <form className="form" onSubmit={(e) => { e.preventDefault(); if (!lacking) void add() }}>
        <div className="form-row">
          <Field id="cred-kind" label="Kind">
            <select id="cred-kind" value={d.kind} onChange={(e) => set({ kind: e.target.value as CredentialKind })}>
              {(Object.keys(KIND_LABELS) as CredentialKind[]).map((k) => (
                <option key={k} value={k}>
                  {KIND_LABELS[k]}
                </option>
              ))}
            </select>
          </Field>
          <Field id="cred-name" label="Display name (optional)">
            <input id="cred-name" value={d.displayName} onChange={(e) => set({ displayName: e.target.value })} maxLength={255} />
          </Field>
        </div>
        {d.kind !== 'environment_variable' && (
          <Field id="cred-url" label="MCP server URL" hint="The agent's mcp_servers entry with this URL uses the credential.">
            <input id="cred-url" type="url" className="mono" value={d.serverUrl} onChange={(e) => set({ serverUrl: e.target.value })} placeholder="https://mcp.example.com/mcp" />
          </Field>
        )}
        {d.kind === 'static_bearer' && (
          <Field id="cred-token" label="Token" hint="Sent as Authorization: Bearer. Kept in the OS keychain; never shown again.">
            <input id="cred-token" type="password" autoComplete="off" value={d.token} onChange={(e) => set({ token: e.target.value })} />
          </Field>
        )}
        {d.kind === 'mcp_oauth' && (
          <>
            <div className="form-row">
              <Field id="cred-access" label="Access token" hint="Kept in the OS keychain; never shown again.">
                <input id="cred-access" type="password" autoComplete="off" value={d.accessToken} onChange={(e) => set({ accessToken: e.target.value })} />
              </Field>
              <Field id="cred-expires" label="Expires (optional)">
                <input id="cred-expires" type="datetime-local" value={d.expiresAt} onChange={(e) => set({ expiresAt: e.target.value })} />
              </Field>
            </div>
            <label className="check">
              <input type="checkbox" checked={d.refresh} onChange={(e) => set({ refresh: e.target.checked })} /> Refresh the access token when the server refuses it
            </label>
            {d.refresh && (
              <fieldset>
                <legend>Refresh</legend>
                <div className="form-row">
                  <Field id="cred-endpoint" label="Token endpoint">
                    <input id="cred-endpoint" type="url" className="mono" value={d.tokenEndpoint} onChange={(e) => set({ tokenEndpoint: e.target.value })} placeholder="https://auth.example.com/oauth/token" />
                  </Field>
                  <Field id="cred-client" label="Client ID">
                    <input id="cred-client" className="mono" value={d.clientId} onChange={(e) => set({ clientId: e.target.value })} />
                  </Field>
                </div>
                <Field id="cred-refresh" label="Refresh token">
                  <input id="cred-refresh" type="password" autoComplete="off" value={d.refreshToken} onChange={(e) => set({ refreshToken: e.target.value })} />
                </Field>
                <div className="form-row">
                  <Field id="cred-client-auth" label="Client authentication">
                    <select id="cred-client-auth" value={d.clientAuth} onChange={(e) => set({ clientAuth: e.target.value as CredentialDraft['clientAuth'] })}>
                      <option value="none">None (a public client)</option>
                      <option value="client_secret_basic">Client secret, HTTP Basic</option>
                      <option value="client_secret_post">Client secret, in the form</option>
                    </select>
                  </Field>
                  {d.clientAuth !== 'none' && (
                    <Field id="cred-client-secret" label="Client secret">
                      <input id="cred-client-secret" type="password" autoComplete="off" value={d.clientSecret} onChange={(e) => set({ clientSecret: e.target.value })} />
                    </Field>
                  )}
                </div>
                <div className="form-row">
                  <Field id="cred-scope" label="Scope (optional)">
                    <input id="cred-scope" className="mono" value={d.scope} onChange={(e) => set({ scope: e.target.value })} />
                  </Field>
                  <Field id="cred-resource" label="Resource (optional)">
                    <input id="cred-resource" className="mono" value={d.resource} onChange={(e) => set({ resource: e.target.value })} />
                  </Field>
                </div>
              </fieldset>
            )}
          </>
        )}
        {d.kind === 'environment_variable' && (
          <>
            <div className="form-row">
              <Field id="cred-var" label="Variable name" hint="The sandbox sees a placeholder in this variable; the proxy puts the secret in its place on the way out.">
                <input id="cred-var" className="mono" value={d.secretName} onChange={(e) => set({ secretName: e.target.value })} placeholder="GITHUB_TOKEN" />
              </Field>
              <Field id="cred-value" label="Secret value" hint="Kept in the OS keychain; never shown again.">
                <input id="cred-value" type="password" autoComplete="off" value={d.secretValue} onChange={(e) => set({ secretValue: e.target.value })} />
              </Field>
            </div>
            <div className="radio-row" role="radiogroup" aria-label="Where the secret may be sent">
              <label>
                <input type="radio" name="cred-net" checked={!d.anyHost} onChange={() => set({ anyHost: false })} /> Only to these hosts
              </label>
              <label>
                <input type="radio" name="cred-net" checked={d.anyHost} onChange={() => set({ anyHost: true })} /> To any host the environment allows
              </label>
            </div>
            {!d.anyHost && (
              <Field id="cred-hosts" label="Hosts" hint="One per line (at most 16); *.example.com for subdomains.">
                <textarea id="cred-hosts" rows={3} className="mono" value={d.hosts} onChange={(e) => set({ hosts: e.target.value })} placeholder="api.github.com" />
              </Field>
            )}
            <div className="radio-row" role="group" aria-label="Where the proxy puts the secret">
              <label className="check">
                <input type="checkbox" checked={d.inHeaders} onChange={(e) => set({ inHeaders: e.target.checked })} /> In request headers
              </label>
              <label className="check">
                <input type="checkbox" checked={d.inBodies} onChange={(e) => set({ inBodies: e.target.checked })} /> In request bodies
              </label>
            </div>
          </>
        )}
        <div className="thread-actions">
          {lacking && <span className="muted">Still needed: {lacking}.</span>}
          <Button variant="primary" icon="plus" type="submit" disabled={action.busy !== undefined || lacking !== undefined}>
            {action.busy ? 'Adding…' : 'Add credential'}
          </Button>
        </div>
      </form>
    </section>
  )
}
