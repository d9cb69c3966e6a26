import { Component, type ErrorInfo, type ReactNode } from 'react'
import { Icon } from './components'

interface Props {
  /** What failed, for the message ("this thread", "this row"). */
  what: string
  children: ReactNode
  /** Compact: one line, for a timeline row. */
  compact?: boolean
}

/**
 * Keeps one broken view (an event the renderer does not expect, a bug) from blanking the whole
 * app: it shows what failed and a way to try again; the rest of the window keeps working.
 */
export class ErrorBoundary extends Component<Props, { error: Error | null }> {
  override state = { error: null as Error | null }

  static getDerivedStateFromError(error: Error) {
    return { error }
  }

  override componentDidCatch(error: Error, info: ErrorInfo): void {
    console.error(`[corral] ${this.props.what} failed to render:`, error, info.componentStack)
  }

  override render() {
    if (!this.state.error) return this.props.children
    return (
      <div className={this.props.compact ? 'note note-warn' : 'error-note'} role="alert">
        <Icon name="warn" />
        <span>
          Could not show {this.props.what}: {this.state.error.message}{' '}
          <button type="button" className="link-btn" onClick={() => this.setState({ error: null })}>
            Try again
          </button>
        </span>
      </div>
    )
  }
}
