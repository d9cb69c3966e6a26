import { useState, type ReactNode } from 'react'
import { useClient } from '../../api/context'
import { ApiError } from '../../api'
import { signOut } from '../../api/auth'
import { Button, ErrorNote, Field, Icon, Spinner } from '../../ui/components'
import { useFormFill, useQuery } from '../../ui/hooks'
import type { ThemeChoice } from '../../ui/theme'
import { CodeBlock } from '../../ui/Code'
import { useSetup, type ModelCheck, type SetupSettings } from '../setup/SetupProvider'
import { builtInTiers, formatAdvisorTiers, parseAdvisorTiers } from './advisor-tiers'
import { formatDreamLimit, parseDreamLimit } from './dream-limit'
import { WebhooksSection } from './WebhooksSection'
import { DEFAULT_DREAM_TIME_LIMIT_MINUTES } from '../../../../shared/api/dreams'
import { budgetOfCents, parseUsd, usdText } from '../budgets/budget'

function sdkSnippet(baseURL: string): string {
  return [
    "import Anthropic from '@anthropic-ai/sdk'",
    '',
    `const client = new Anthropic({ baseURL: '${baseURL}', apiKey: process.env.CORRAL_TOKEN })`,
    "const session = await client.beta.sessions.create({ agent: 'agent_…', environment_id: 'env_…' })",
    'const stream = await client.beta.sessions.events.stream(session.id)',
  ].join('\n')
}

/**
 * What the settings endpoint (a Corral addition, `GET/POST /v1/corral/settings`) is expected to
 * carry. The API key is write-only: it goes to the OS keychain and is never read back.
 */
export type CorralSettings = SetupSettings

/** One `corral doctor` finding, as src/main/cli/doctor.ts makes them (runDoctor). */
export interface DoctorFinding {
  area: string
  ok: boolean
  detail: string
}

/** What an empty base URL field means, and which endpoint sessions use (the engine's ANTHROPIC_BASE_URL wins over the field). */
export function baseUrlHint(endpoint: CorralSettings['endpoint']): string {
  const local = 'A local Anthropic-compatible server (Ollama, llama.cpp, LM Studio) works too.'
  const env = endpoint?.environment_base_url
  if (env) return `Empty: ${env}, from ANTHROPIC_BASE_URL in Corral's environment, which sessions use even when this field is set. ${local}`
  return `Empty: Anthropic's API. ${local}`
}

function missing(e: unknown): boolean {
  return e instanceof ApiError && e.status === 404
}

export function SettingsView({ theme, setTheme }: { theme: ThemeChoice; setTheme: (t: ThemeChoice) => void }) {
  const client = useClient()
  const settings = useQuery(() => client.request<CorralSettings>('settings.retrieve'), [])
  const apiUrl = useQuery(() => client.apiUrl(), [])
  const doctor = useQuery(() => client.request<{ findings: DoctorFinding[] }>('doctor.run'), [])
  const [baseUrl, setBaseUrl] = useState('')
  const [compat, setCompat] = useState(false)
  const [defaultModel, setDefaultModel] = useState('')
  const [backend, setBackend] = useState<'auto' | 'docker' | 'vm' | 'bubblewrap'>('auto')
  const [apiKey, setApiKey] = useState('')
  const [err, setErr] = useState<unknown>()
  const [saved, setSaved] = useState(false)
  const [notif, setNotif] = useState(typeof Notification === 'undefined' ? 'unsupported' : Notification.permission)
  const [testing, setTesting] = useState(false)
  const [tested, setTested] = useState<ModelCheck>()
  const setup = useSetup()
  const keychain = settings.data?.keychain
  const noKeychain = keychain?.available === false
  const envBaseUrl = settings.data?.endpoint?.environment_base_url ?? null
  // Test connection: one real minimal request with what the form says now (saved or not).
  const testConnection = async () => {
    setErr(undefined)
    setTesting(true)
    try {
      const r = await client.request<ModelCheck>('model.test', {}, {
        base_url: baseUrl.trim() || null,
        compatibility_mode: compat,
        model: defaultModel.trim() || null,
        ...(apiKey ? { api_key: apiKey } : {}),
      })
      setTested(r)
      setup.reload()
    } catch (e) {
      setErr(e)
    } finally {
      setTesting(false)
    }
  }

  const form = useFormFill(settings.data, (s) => {
    setBaseUrl(s.model?.base_url ?? '')
    setCompat(!!s.model?.compatibility_mode)
    setDefaultModel(s.model?.default_model ?? '')
    setBackend(s.sandbox_backend ?? 'auto')
  })

  const noSettingsApi = missing(settings.error)
  const save = async () => {
    setErr(undefined)
    setSaved(false)
    try {
      await client.request('settings.update', {}, {
        model: { base_url: baseUrl.trim() || null, compatibility_mode: compat, default_model: defaultModel.trim() || null },
        sandbox_backend: backend,
        ...(apiKey && !noKeychain ? { api_key: apiKey } : {}),
      })
      if (!noKeychain) setApiKey('')
      form.saved()
      setSaved(true)
      settings.reload()
      setup.reload()
    } catch (e) {
      setErr(e)
      // the engine keeps every field it could (a missing keychain refuses only the key)
      settings.reload()
      setup.reload()
    }
  }

  return (
    <div className="pane scroll">
      <div className="editor narrow">
        <header className="editor-head">
          <h1>Settings</h1>
        </header>

        <section className="card-section" aria-labelledby="s-appearance">
          <h2 id="s-appearance">Appearance</h2>
          <div className="radio-row" role="radiogroup" aria-label="Theme">
            {(['system', 'dark', 'light'] as const).map((t) => (
              <label key={t}>
                <input type="radio" name="theme" checked={theme === t} onChange={() => setTheme(t)} /> {t === 'system' ? 'Follow the system' : t[0].toUpperCase() + t.slice(1)}
              </label>
            ))}
          </div>
          <div className="setting-line">
            <span>Desktop notifications when a confirmation arrives in the background:</span>
            {notif === 'granted' ? (
              <span className="pill pill-done">on</span>
            ) : notif === 'unsupported' ? (
              <span className="muted">not supported here</span>
            ) : (
              <Button small icon="bell" onClick={() => void Notification.requestPermission().then(setNotif)}>
                {notif === 'denied' ? 'Blocked by the browser' : 'Turn on'}
              </Button>
            )}
          </div>
          <div className="setting-line muted">Connected through {client.transport === 'ipc' ? 'the desktop app (IPC)' : 'the local HTTP API'}.</div>
        </section>

        <section className="card-section" aria-labelledby="s-model">
          <h2 id="s-model">Connect a model</h2>
          <p className="muted">Anthropic&apos;s API with your key, or a local Anthropic-compatible server. Test connection sends one real, minimal request and shows what the endpoint answered.</p>
          {settings.loading && <Spinner />}
          {noSettingsApi && (
            <div className="note note-warn">
              <strong>Not available yet.</strong> This engine does not offer settings over the API (<code>GET /v1/corral/settings</code> answered 404). Until it does, set{' '}
              <code>ANTHROPIC_BASE_URL</code> / <code>ANTHROPIC_API_KEY</code> in the environment, or edit <code>settings.json</code> in the data directory.
            </div>
          )}
          {settings.error && !noSettingsApi ? <ErrorNote error={settings.error} /> : null}
          <form
            className="form"
            onSubmit={(e) => {
              e.preventDefault()
              void save()
            }}
          >
            <fieldset disabled={noSettingsApi || settings.loading}>
              <Field id="st-base" label="Model endpoint (base URL)" hint={baseUrlHint(settings.data?.endpoint)}>
                <input id="st-base" type="url" placeholder={envBaseUrl ? `from ANTHROPIC_BASE_URL: ${envBaseUrl}` : 'https://api.anthropic.com'} value={baseUrl} onChange={(e) => (form.edited(), setBaseUrl(e.target.value))} />
              </Field>
              <label className="check">
                <input type="checkbox" checked={compat} onChange={(e) => (form.edited(), setCompat(e.target.checked))} /> Compatibility mode (strip prompt caching, betas and server tools for local servers)
              </label>
              <Field id="st-model" label="Default model">
                <input id="st-model" value={defaultModel} onChange={(e) => (form.edited(), setDefaultModel(e.target.value))} placeholder="claude-sonnet-4-5" />
              </Field>
              <Field
                id="st-key"
                label="Anthropic API key"
                hint={
                  <>
                    {noKeychain ? (
                      <span className="key-problem">
                        <strong>The key cannot be saved here: no OS keychain is available.</strong> {keychain?.problem} You can still test a key, and use it by starting Corral with ANTHROPIC_API_KEY set.
                      </span>
                    ) : (
                      'Stored in the OS keychain, never shown again.'
                    )}{' '}
                    {settings.data?.api_key?.set ? <strong>A key is set{settings.data.api_key.source ? ` (${settings.data.api_key.source === 'environment' ? 'from ANTHROPIC_API_KEY' : `from the ${settings.data.api_key.source}`})` : ''}.</strong> : 'No key is set.'}
                  </>
                }
              >
                <input id="st-key" type="password" autoComplete="off" value={apiKey} onChange={(e) => setApiKey(e.target.value)} placeholder={settings.data?.api_key?.set ? '•••••••• (leave empty to keep)' : 'sk-ant-…'} />
              </Field>
              <Field id="st-backend" label="Default sandbox backend">
                <select id="st-backend" value={backend} onChange={(e) => (form.edited(), setBackend(e.target.value as typeof backend))}>
                  <option value="auto">Automatic</option>
                  <option value="docker">Docker</option>
                  <option value="vm">VM (QEMU)</option>
                  <option value="bubblewrap">bubblewrap</option>
                </select>
              </Field>
              <div className="form-actions">
                <Button type="submit" variant="primary">
                  Save settings
                </Button>
                <Button type="button" onClick={() => void testConnection()} disabled={testing}>
                  {testing ? 'Testing…' : 'Test connection'}
                </Button>
                {saved && <span className="ok-note">Saved.</span>}
              </div>
              {tested && (
                <div className={`note test-result ${tested.ok ? 'note-good' : 'note-warn'}`} role="status" aria-label="Test connection result">
                  <Icon name={tested.ok ? 'check' : 'warn'} size={14} />{' '}
                  {tested.ok ? (
                    <>
                      <strong>Connected.</strong> {tested.base_url} answered as {tested.answered_model ?? tested.model} in {tested.elapsed_ms} ms.
                    </>
                  ) : (
                    <>
                      <strong>{tested.status !== null ? `HTTP ${tested.status}` : 'No answer'}</strong> from {tested.base_url}: {tested.message}
                    </>
                  )}
                </div>
              )}
            </fieldset>
          </form>
          <ErrorNote error={err} />
        </section>

        <AdvisorTiersSection settings={settings.data} disabled={noSettingsApi || settings.loading} onSaved={settings.reload} />

        <DefaultBudgetSection settings={settings.data} disabled={noSettingsApi || settings.loading} onSaved={settings.reload} />

        <DreamLimitSection settings={settings.data} disabled={noSettingsApi || settings.loading} onSaved={settings.reload} />

        <WebhooksSection />

        <section className="card-section" aria-labelledby="s-doctor">
          <h2 id="s-doctor">
            Doctor{' '}
            <Button small variant="ghost" onClick={doctor.reload}>
              Run again
            </Button>
          </h2>
          {doctor.loading && <Spinner />}
          {missing(doctor.error) && (
            <p className="muted">
              This engine does not offer <code>corral doctor</code> over the API yet (<code>GET /v1/corral/doctor</code> answered 404). Run <code>npm run cli -- doctor</code> in a terminal (the same findings).
            </p>
          )}
          {doctor.error && !missing(doctor.error) ? <ErrorNote error={doctor.error} /> : null}
          {doctor.data && (
            <ul className="findings">
              {doctor.data.findings.map((f, i) => (
                <li key={i} className={`finding finding-${f.ok ? 'ok' : 'fail'}`}>
                  <Icon name={f.ok ? 'check' : 'warn'} label={f.ok ? 'works' : 'does not work'} />
                  <div>
                    <strong>{f.area}</strong> <span>{f.detail}</span>
                  </div>
                </li>
              ))}
            </ul>
          )}
        </section>

        <section className="card-section" aria-labelledby="s-api">
          <h2 id="s-api">Use this Corral from code</h2>
          <p className="muted">
            The local API speaks the Managed Agents API, so the official SDK works against it by changing <code>baseURL</code>. The API key is the token in{' '}
            <code>&lt;data dir&gt;/token</code> (or <code>$CORRAL_TOKEN</code>).
          </p>
          <CodeBlock code={sdkSnippet(apiUrl.data ?? 'http://127.0.0.1:4610')} language="ts" />
        </section>

        {client.transport === 'http' && (
          <section className="card-section">
            <h2>Browser session</h2>
            <Button
              variant="ghost"
              onClick={() => {
                void signOut().then(() => window.location.reload())
              }}
            >
              Sign out of this browser
            </Button>
          </section>
        )}
      </div>
    </div>
  )
}

interface SectionProps {
  settings: CorralSettings | undefined
  disabled: boolean
  onSaved: () => void
}

/**
 * One setting saved on its own (`settings.update` with that field alone): a text field filled from
 * the settings read, read as it is typed (`read` gives the change to save, or why it cannot be
 * saved, shown under the field), and its own save button.
 */
function OneSettingSection(p: SectionProps & {
  id: string
  title: string
  intro: ReactNode
  field: { id: string; label: string; hint: string; placeholder: string; multiline?: boolean; inputMode?: 'decimal' }
  fill: (settings: CorralSettings) => string
  read: (text: string) => { change: Record<string, unknown> } | { error: string }
  submit: string
  /** Shown under the field, above the save button. */
  children?: ReactNode
}) {
  const client = useClient()
  const [text, setText] = useState('')
  const [err, setErr] = useState<unknown>()
  const [done, setDone] = useState(false)
  const form = useFormFill(p.settings, (s) => setText(p.fill(s)))
  const read = p.read(text)
  const save = async () => {
    setErr(undefined)
    setDone(false)
    if ('error' in read) return
    try {
      await client.request('settings.update', {}, read.change)
      form.saved()
      setDone(true)
      p.onSaved()
    } catch (e) {
      setErr(e)
    }
  }
  const onChange = (e: { target: { value: string } }) => {
    form.edited()
    setText(e.target.value)
  }
  return (
    <section className="card-section" aria-labelledby={p.id}>
      <h2 id={p.id}>{p.title}</h2>
      <p className="muted">{p.intro}</p>
      <form
        className="form"
        onSubmit={(e) => {
          e.preventDefault()
          void save()
        }}
      >
        <fieldset disabled={p.disabled}>
          <Field id={p.field.id} label={p.field.label} hint={'error' in read ? <span className="key-problem">{read.error}</span> : p.field.hint}>
            {p.field.multiline ? (
              <textarea id={p.field.id} rows={4} className="mono" value={text} placeholder={p.field.placeholder} onChange={onChange} />
            ) : (
              <input id={p.field.id} inputMode={p.field.inputMode} value={text} placeholder={p.field.placeholder} onChange={onChange} />
            )}
          </Field>
          {p.children}
          <div className="form-actions">
            <Button type="submit" variant="primary" disabled={'error' in read}>
              {p.submit}
            </Button>
            {done && <span className="ok-note">Saved.</span>}
          </div>
        </fieldset>
      </form>
      <ErrorNote error={err} />
    </section>
  )
}

/**
 * The user's entries of the advisor tier table: which models may advise which (an advisor must be
 * in a tier at least as high as the model it advises, and at least tier 1). Saved alone, as
 * `advisor_tiers`; agent saves and every consultation start read them.
 */
function AdvisorTiersSection(p: SectionProps) {
  return (
    <OneSettingSection
      {...p}
      id="s-advisor"
      title="Advisor tiers"
      intro={
        <>
          An agent&apos;s advisor must be in a tier at least as high as the agent&apos;s model, and at least tier 1. Any model may advise a model that is in no tier (a local
          model, for example). Rank your own models here, or move a built-in one: one <code>model-id tier</code> per line.
        </>
      }
      field={{ id: 'st-advisor-tiers', label: 'Your tier entries', hint: 'Used by the next agent save and by every advisor consultation from now on.', placeholder: 'qwen-3-235b 5', multiline: true }}
      fill={(s) => formatAdvisorTiers(s.advisor_tiers)}
      read={(text) => {
        const parsed = parseAdvisorTiers(text)
        return 'error' in parsed ? parsed : { change: { advisor_tiers: Object.keys(parsed.tiers).length ? parsed.tiers : null } }
      }}
      submit="Save tiers"
    >
      <details>
        <summary>Built-in tiers</summary>
        <ul className="tier-list">
          {builtInTiers().map((t) => (
            <li key={t.tier}>
              <strong>{t.tier}</strong> {t.models.join(', ')}
            </li>
          ))}
        </ul>
      </details>
    </OneSettingSection>
  )
}

/**
 * The budget a new session starts with in the new-session dialog (saved alone, as
 * `default_budget`; empty removes it). Sessions created through the API are not affected.
 */
function DefaultBudgetSection(p: SectionProps) {
  return (
    <OneSettingSection
      {...p}
      id="s-budget"
      title="Default budget"
      intro="New sessions started from this app get this budget (you can change it in the new-session dialog). A session pauses when its list cost reaches its budget; raise it from the session's header to continue."
      field={{ id: 'st-default-budget', label: 'Budget for new sessions, in USD', hint: 'Empty: new sessions have no budget.', placeholder: 'no limit', inputMode: 'decimal' }}
      fill={(s) => (s.default_budget ? usdText(s.default_budget.max_list_cost.amount) : '')}
      read={(text) => {
        if (!text.trim()) return { change: { default_budget: null } }
        const usd = parseUsd(text)
        return 'error' in usd ? usd : { change: { default_budget: budgetOfCents(usd.cents) } }
      }}
      submit="Save default budget"
    />
  )
}

/** How long a dream may run (saved alone, as `dream_time_limit_minutes`; empty restores the default hour). */
function DreamLimitSection(p: SectionProps) {
  return (
    <OneSettingSection
      {...p}
      id="s-dream-limit"
      title="Dream time limit"
      intro="A dream that is still running this long after it was started is stopped and fails with “timeout”; what it wrote so far stays in its output store. A new limit applies to running dreams at once."
      field={{ id: 'st-dream-limit', label: 'Time limit, in minutes', hint: `Empty: ${DEFAULT_DREAM_TIME_LIMIT_MINUTES} minutes.`, placeholder: String(DEFAULT_DREAM_TIME_LIMIT_MINUTES), inputMode: 'decimal' }}
      fill={(s) => formatDreamLimit(s.dream_time_limit_minutes)}
      read={parseDreamLimit}
      submit="Save time limit"
    />
  )
}
