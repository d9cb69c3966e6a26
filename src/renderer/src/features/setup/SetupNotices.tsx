import { Button, ErrorNote, Icon } from '../../ui/components'
import { useSetup } from './SetupProvider'

/**
 * App-level banner when tools cannot run the way the user expects: Docker is down (with the
 * platform's fix, and whether bubblewrap stands in), or the sandbox image is missing (with a
 * button that builds it, showing the build's progress lines).
 */
export function SandboxBanner() {
  const { sandbox, buildImage, buildError } = useSetup()
  if (!sandbox) return null
  const build = sandbox.image_build
  const showBuild = build.state !== 'idle' && (build.state !== 'succeeded' || !sandbox.docker.ok)
  if (sandbox.docker.ok && !showBuild && build.state !== 'succeeded') return null
  if (sandbox.docker.ok && build.state === 'succeeded') {
    return (
      <div className="setup-banner setup-banner-good" role="status" aria-label="Sandbox">
        <Icon name="check" size={14} /> The sandbox image {build.image} is built: sessions run their tools in Docker.
      </div>
    )
  }
  const other = sandbox.backends.filter((b) => b.ok && b.backend !== 'docker').map((b) => b.backend)
  const imageMissing = sandbox.docker.image_present === false
  return (
    <div className="setup-banner" role="alert" aria-label="Sandbox">
      <div className="setup-banner-text">
        <Icon name="warn" size={14} />
        <div>
          <strong>{imageMissing ? `The sandbox image ${sandbox.docker.image} is not built.` : 'Docker is not available.'}</strong>{' '}
          {!imageMissing && sandbox.docker.reason && <span className="muted">({sandbox.docker.reason})</span>}{' '}
          {other.length > 0 ? `Sessions run their tools in ${other.join(', ')} meanwhile.` : sandbox.usable ? '' : 'Sessions cannot run tools until a sandbox works.'}
          {sandbox.fix && !imageMissing && <div className="setup-fix">{sandbox.fix}</div>}
        </div>
        {imageMissing && (
          <Button small variant="primary" icon="box" onClick={() => void buildImage()} disabled={build.state === 'building'}>
            {build.state === 'building' ? 'Building…' : build.state === 'failed' ? 'Build again' : 'Build the image'}
          </Button>
        )}
      </div>
      {showBuild && (
        <div className="setup-build">
          <div role="status" aria-live="polite">
            {build.state === 'building' ? `Building ${build.image}…` : build.state === 'failed' ? `The build failed (exit status ${build.exit_code ?? 'none'}).` : `Built ${build.image}.`}
          </div>
          <pre className="setup-build-lines" aria-label="Image build progress">{build.lines.slice(-12).join('\n')}</pre>
        </div>
      )}
      <ErrorNote error={buildError} />
    </div>
  )
}

/** The home screen's (and a session's) word on the model: nothing runs until one answers. */
export function ModelNotice({ go, compact, firstRun }: { go: (path: string) => void; compact?: boolean; firstRun?: boolean }) {
  const { settings, modelReady } = useSetup()
  if (!settings || modelReady) return null
  const check = settings.model_check
  const configured = settings.endpoint?.configured
  // An endpoint that is set but untested in this run is only worth a word before the first session.
  if (configured && !check && !firstRun) return null
  const text = !configured
    ? 'No model is connected yet: sessions cannot run until one answers.'
    : check && !check.ok
      ? `The model did not answer the last test${check.status !== null ? ` (HTTP ${check.status})` : ''}: ${check.message}`
      : 'A model endpoint is set but has not answered a test yet; if it cannot be reached, sessions show why in their timeline.'
  return (
    <div className={`note note-warn model-notice${compact ? ' compact' : ''}`} role="status" aria-label="Model">
      <Icon name="warn" size={14} /> <span>{text}</span>{' '}
      <Button small variant={configured ? 'default' : 'primary'} onClick={() => go('/settings')}>
        {configured ? 'Open settings' : 'Connect a model'}
      </Button>
    </div>
  )
}
