import { useCallback, useEffect, useRef, useState } from 'react'
import { ApiError, type CorralClient } from './api'
import { signIn } from './api/auth'
import { ClientProvider, useClient } from './api/context'
import { Button, Dialog, Empty, ErrorNote, Icon, Spinner } from './ui/components'
import { isTypingTarget, useHashRoute, useQuery } from './ui/hooks'
import { SessionPane } from './features/changes/SessionPane'
import { useTheme } from './ui/theme'
import { SessionsProvider, useSessions } from './features/sessions/SessionsProvider'
import { SessionList } from './features/sessions/SessionList'
import { NewSessionDialog } from './features/sessions/NewSessionDialog'
import { ConfirmationsProvider, useConfirmations } from './features/confirmations/ConfirmationsProvider'
import { QueueDrawer } from './features/confirmations/QueueDrawer'
import { ThreadView } from './features/thread/ThreadView'
import { AgentsView } from './features/agents/AgentsView'
import { EnvironmentsView } from './features/environments/EnvironmentsView'
import { SettingsView } from './features/settings/SettingsView'
import { SchedulesView } from './features/schedules/SchedulesView'
import { MemoryView } from './features/memory/MemoryView'
import { SkillsView } from './features/skills/SkillsView'
import { VaultsView } from './features/vaults/VaultsView'
import { ErrorBoundary } from './ui/ErrorBoundary'
import { SetupProvider } from './features/setup/SetupProvider'
import { ModelNotice, SandboxBanner } from './features/setup/SetupNotices'

export function App({ client }: { client: CorralClient }) {
  return (
    <ClientProvider client={client}>
      <AuthGate />
    </ClientProvider>
  )
}

/** In browser mode a missing or stale cookie answers 401: offer the sign-in form instead of the app. */
function AuthGate() {
  const client = useClient()
  const probe = useQuery(() => client.request('agents.list', {}, { limit: 1 }), [])
  // Applies the theme (and follows the system) on the sign-in and error screens too.
  useTheme()
  if (probe.loading && !probe.data) {
    return (
      <div className="center full">
        <Spinner label="Connecting to Corral" />
      </div>
    )
  }
  if (probe.error instanceof ApiError && probe.error.status === 401) return <SignIn onDone={probe.reload} />
  if (probe.error && !probe.data) {
    return (
      <div className="center full">
        <div className="editor narrow">
          <ErrorNote error={probe.error} />
          <Button onClick={probe.reload}>Try again</Button>
        </div>
      </div>
    )
  }
  return (
    <SessionsProvider>
      <ConfirmationsProvider>
        <SetupProvider>
          <Shell />
        </SetupProvider>
      </ConfirmationsProvider>
    </SessionsProvider>
  )
}

function SignIn({ onDone }: { onDone: () => void }) {
  const [token, setToken] = useState('')
  const [err, setErr] = useState<unknown>()
  return (
    <main className="center full">
      <form
        className="signin"
        onSubmit={(e) => {
          e.preventDefault()
          setErr(undefined)
          signIn(token.trim()).then(onDone, setErr)
        }}
      >
        <div className="brand big">
          <Logo /> Corral
        </div>
        <h1>Sign in to this Corral</h1>
        <p className="muted">
          Open the address <code>corral serve</code> printed (it ends in <code>?token=…</code>), or paste the token from <code>&lt;data dir&gt;/token</code>.
        </p>
        <label htmlFor="signin-token" className="sr-only">
          API token
        </label>
        <input id="signin-token" type="password" autoComplete="off" value={token} onChange={(e) => setToken(e.target.value)} placeholder="corral_…" autoFocus />
        <Button type="submit" variant="primary" disabled={!token.trim()}>
          Sign in
        </Button>
        <ErrorNote error={err} />
      </form>
    </main>
  )
}

function Logo() {
  return (
    <svg className="logo" width="22" height="22" viewBox="0 0 24 24" aria-hidden="true">
      <rect x="2" y="2" width="20" height="20" rx="6" className="logo-bg" />
      <path d="M7 12c0-3 2-5 5-5s5 2 5 5M7 12v5M17 12v5M7 14.5h10" className="logo-fg" fill="none" strokeWidth="1.8" strokeLinecap="round" />
    </svg>
  )
}

const SECTIONS = [
  { id: 'sessions', label: 'Sessions', icon: 'chat' },
  { id: 'agents', label: 'Agents', icon: 'robot' },
  { id: 'environments', label: 'Environments', icon: 'box' },
  { id: 'skills', label: 'Skills', icon: 'file' },
  { id: 'schedules', label: 'Schedules', icon: 'history' },
  { id: 'memory', label: 'Memory', icon: 'brain' },
  { id: 'vaults', label: 'Vaults', icon: 'lock' },
  { id: 'settings', label: 'Settings', icon: 'gear' },
] as const

function Shell() {
  const [route, go] = useHashRoute()
  const [theme, setTheme] = useTheme()
  const { queue } = useConfirmations()
  const [showNew, setShowNew] = useState(false)
  const [showQueue, setShowQueue] = useState(false)
  const [showHelp, setShowHelp] = useState(false)
  const searchRef = useRef<HTMLInputElement>(null)
  const section = route[0] ?? 'sessions'
  const sessionId = section === 'sessions' ? route[1] : undefined
  const threadId = section === 'sessions' && route[2] === 'threads' ? (route[3] ?? null) : null

  const openSession = useCallback((id: string) => go(`/sessions/${id}`), [go])

  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      // Escape leaves a text field, so the single-key shortcuts work again.
      if (e.key === 'Escape' && isTypingTarget(e.target) && !document.querySelector('.dialog')) {
        ;(e.target as HTMLElement).blur()
        return
      }
      if (isTypingTarget(e.target) || e.metaKey || e.ctrlKey || e.altKey || document.querySelector('.dialog')) return
      if (showQueue && 'jkadoJK'.includes(e.key)) return
      if (e.key === 'n') {
        setShowNew(true)
      } else if (e.key === '/') {
        go('/sessions' + (sessionId ? `/${sessionId}` : ''))
        setTimeout(() => searchRef.current?.focus(), 0)
      } else if (e.key === 'c') setShowQueue((v) => !v)
      else if (e.key === '?') setShowHelp(true)
      else return
      e.preventDefault()
    }
    window.addEventListener('keydown', onKey)
    return () => window.removeEventListener('keydown', onKey)
  }, [go, sessionId, showQueue])

  // Ask for notification permission once, on the first click (browsers want a gesture).
  useEffect(() => {
    if (typeof Notification === 'undefined' || Notification.permission !== 'default') return
    const once = () => void Notification.requestPermission()
    window.addEventListener('click', once, { once: true })
    return () => window.removeEventListener('click', once)
  }, [])

  useEffect(() => {
    document.title = queue.length > 0 ? `(${queue.length}) Corral` : 'Corral'
  }, [queue.length])

  const dark = document.documentElement.dataset.theme !== 'light'
  return (
    <div className="app">
      <header className="topbar">
        <div className="brand">
          <Logo /> Corral
        </div>
        <nav className="nav" aria-label="Sections">
          {SECTIONS.map((s) => (
            <a key={s.id} href={`#/${s.id}`} className={`nav-link${section === s.id ? ' active' : ''}`} aria-current={section === s.id ? 'page' : undefined}>
              <Icon name={s.icon} size={15} /> {s.label}
            </a>
          ))}
        </nav>
        <div className="topbar-right">
          <button type="button" className={`queue-btn${queue.length ? ' has' : ''}`} onClick={() => setShowQueue((v) => !v)} aria-expanded={showQueue} aria-label={`Confirmation queue: ${queue.length} waiting`} title="Confirmation queue (C)">
            <Icon name="bell" size={15} />
            {queue.length > 0 ? `${queue.length} waiting` : 'Queue'}
          </button>
          <button type="button" className="icon-btn" onClick={() => setTheme(dark ? 'light' : 'dark')} aria-label={dark ? 'Switch to the light theme' : 'Switch to the dark theme'} title={`Theme: ${theme}`}>
            <Icon name={dark ? 'sun' : 'moon'} />
          </button>
          <button type="button" className="icon-btn" onClick={() => setShowHelp(true)} aria-label="Keyboard shortcuts" title="Keyboard shortcuts (?)">
            <Icon name="keyboard" />
          </button>
        </div>
      </header>
      <SandboxBanner />
      <div className="body">
        {section === 'sessions' && (
          <div className="split">
            <SessionList ref={searchRef} selectedId={sessionId} onSelect={openSession} onNew={() => setShowNew(true)} />
            <main className="pane" id="main">
              {sessionId ? (
                <ErrorBoundary key={sessionId} what="this session">
                  <SessionPane sessionId={sessionId} view={route[2] === 'changes' || route[2] === 'files' || route[2] === 'session-files' ? route[2] : 'thread'}>
                    <ThreadView sessionId={sessionId} threadId={threadId} onOpenThread={(t) => go(t ? `/sessions/${sessionId}/threads/${t}` : `/sessions/${sessionId}`)} />
                  </SessionPane>
                </ErrorBoundary>
              ) : (
                <Landing onNew={() => setShowNew(true)} go={go} />
              )}
            </main>
          </div>
        )}
        <ConnectionBanner />
        {section === 'agents' && <AgentsView selectedId={route[1]} onSelect={(id) => go(id ? `/agents/${id}` : '/agents')} />}
        {section === 'environments' && <EnvironmentsView selectedId={route[1]} onSelect={(id) => go(id ? `/environments/${id}` : '/environments')} />}
        {section === 'skills' && <SkillsView selectedId={route[1]} onSelect={(id) => go(id ? `/skills/${id}` : '/skills')} />}
        {section === 'schedules' && <SchedulesView selectedId={route[1]} onSelect={(id) => go(id ? `/schedules/${id}` : '/schedules')} />}
        {section === 'memory' && <MemoryView storeId={route[1]} memoryId={route[2]} onGo={go} />}
        {section === 'vaults' && <VaultsView selectedId={route[1]} onSelect={(id) => go(id ? `/vaults/${id}` : '/vaults')} />}
        {section === 'settings' && <SettingsView theme={theme} setTheme={setTheme} />}
        {showQueue && (
          <QueueDrawer
            onClose={() => setShowQueue(false)}
            onOpenSession={(id, thread) => (thread ? go(`/sessions/${id}/threads/${thread}`) : openSession(id))}
          />
        )}
      </div>
      {showNew && (
        <NewSessionDialog
          onClose={() => setShowNew(false)}
          onGo={(p) => {
            setShowNew(false)
            go(p)
          }}
          onCreated={(s) => {
            setShowNew(false)
            openSession(s.id)
          }}
        />
      )}
      {showHelp && (
        <Dialog title="Keyboard shortcuts" onClose={() => setShowHelp(false)}>
          <dl className="shortcuts dialog-body">
            {[
              ['N', 'New session'],
              ['/', 'Search sessions'],
              ['C', 'Open / close the confirmation queue'],
              ['A / D', 'Approve / deny the selected confirmation (queue open)'],
              ['J / K', 'Next / previous confirmation'],
              ['O', 'Open the confirmation’s session'],
              ['Esc Esc', 'Interrupt the running turn'],
              ['Enter', 'Send a message (Shift+Enter: new line)'],
              ['?', 'This help'],
            ].map(([k, v]) => (
              <div key={k}>
                <dt>
                  <kbd>{k}</kbd>
                </dt>
                <dd>{v}</dd>
              </div>
            ))}
          </dl>
        </Dialog>
      )}
    </div>
  )
}

/** The sessions page with nothing selected: what to do next, including on the very first start. */
function Landing({ onNew, go }: { onNew: () => void; go: (path: string) => void }) {
  const { agents, environments, sessions, loaded } = useSessions()
  const hasAgent = agents.some((a) => !a.archived_at)
  const hasEnv = environments.some((e) => !e.archived_at)
  if (loaded && sessions.length === 0 && (!hasAgent || !hasEnv)) {
    return (
      <Empty icon="chat" title="Long-running agents, on your machine">
        <ModelNotice go={go} firstRun />
        <ol className="onboarding">
          <li className={hasAgent ? 'done' : ''}>
            <strong>Create an agent</strong> — a model, a system prompt and its tools.{' '}
            {!hasAgent && (
              <button type="button" className="link-btn" onClick={() => go('/agents/new')}>
                New agent
              </button>
            )}
          </li>
          <li className={hasEnv ? 'done' : ''}>
            <strong>Pick where its tools run</strong> — a local sandbox (no network unless you allow hosts).{' '}
            {!hasEnv && (
              <button type="button" className="link-btn" onClick={() => go('/environments/new')}>
                New environment
              </button>
            )}
          </li>
          <li>
            <strong>Start a session</strong> and watch it work; approve what it asks for.
          </li>
        </ol>
        <Button variant="primary" icon="plus" onClick={onNew} kbd="N">
          New session
        </Button>
      </Empty>
    )
  }
  return (
    <Empty icon="chat" title="Long-running agents, on your machine">
      <ModelNotice go={go} firstRun={loaded && sessions.length === 0} />
      <p>Pick a session, or start one.</p>
      <Button variant="primary" icon="plus" onClick={onNew} kbd="N">
        New session
      </Button>
    </Empty>
  )
}

/** Says so when the engine stops answering (the server stopped, the laptop slept); polling retries. */
function ConnectionBanner() {
  const { error } = useSessions()
  if (!(error instanceof ApiError) || (error.type !== 'connection_error' && error.status < 500)) return null
  return (
    <div className="conn-banner conn-banner-app" role="status">
      {error.type === 'connection_error' ? 'Corral is not reachable — retrying…' : `Corral answered with an error (${error.message}) — retrying…`}
    </div>
  )
}
