import { memo, useLayoutEffect, useMemo, useRef, useState, type CSSProperties, type ReactNode } from 'react'
import { languageOf, tokenize } from './highlight'
import { parseAnsi, type AnsiSpan, type TextRanges } from './ansi'
import { diffRows, type DiffRow } from './diff-rows'
import { Icon } from './components'

/** Highlighted code with a copy button and the language as a label. */
export const CodeBlock = memo(function CodeBlock({ code, language, maxHeight }: { code: string; language?: string; maxHeight?: number }) {
  const lang = languageOf(language)
  const tokens = useMemo(() => tokenize(code, lang), [code, lang])
  return (
    <div className="code-block">
      <div className="code-head">
        <span>{language || 'text'}</span>
        <CopyButton text={code} />
      </div>
      <pre className="code" style={maxHeight ? { maxHeight } : undefined} tabIndex={0}>
        <code>
          <Tokens tokens={tokens} />
        </code>
      </pre>
    </div>
  )
})

export function CopyButton({ text }: { text: string }) {
  const [done, setDone] = useState(false)
  return (
    <button
      type="button"
      className="copy-btn"
      onClick={() => {
        void navigator.clipboard?.writeText(text).then(() => {
          setDone(true)
          setTimeout(() => setDone(false), 1200)
        })
      }}
    >
      <Icon name={done ? 'check' : 'file'} size={12} />
      {done ? 'Copied' : 'Copy'}
    </button>
  )
}

function spanStyle(s: AnsiSpan): { className: string; style?: CSSProperties } {
  const classes: string[] = []
  const style: CSSProperties = {}
  let fg = s.fg
  let bg = s.bg
  if (s.inverse) [fg, bg] = [bg ?? 'default-bg', fg ?? 'default-fg']
  if (fg) {
    if (fg.startsWith('rgb')) style.color = fg
    else classes.push(`ansi-fg-${fg}`)
  }
  if (bg) {
    if (bg.startsWith('rgb')) style.backgroundColor = bg
    else classes.push(`ansi-bg-${bg}`)
  }
  if (s.bold) classes.push('ansi-bold')
  if (s.dim) classes.push('ansi-dim')
  if (s.italic) classes.push('ansi-italic')
  if (s.underline) classes.push('ansi-underline')
  return { className: classes.join(' '), style: Object.keys(style).length ? style : undefined }
}

/**
 * Terminal output: ANSI colours, redrawn lines, a terminal's look. Very long output shows its
 * tail first. `follow`: output that grows (a running command) keeps its newest line in view
 * while the reader is at the bottom of the pane.
 */
export const Terminal = memo(function Terminal({ text, stderr, command, exitCode, follow }: { text: string; stderr?: TextRanges; command?: string; exitCode?: number; follow?: boolean }) {
  const LIMIT = 4000
  const [all, setAll] = useState(false)
  const out = useRef<HTMLPreElement>(null)
  const pinned = useRef(true)
  useLayoutEffect(() => {
    const el = out.current
    if (follow && el && pinned.current) el.scrollTop = el.scrollHeight
  }, [text, follow])
  const lines = useMemo(() => parseAnsi(text, stderr), [text, stderr])
  const hasStderr = (stderr?.length ?? 0) > 0
  const hidden = !all && lines.length > LIMIT ? lines.length - LIMIT : 0
  const shown = hidden ? lines.slice(hidden) : lines
  return (
    <div className="terminal" role="region" aria-label="Command output">
      {command !== undefined && (
        <div className="terminal-cmd">
          <span className="terminal-prompt" aria-hidden="true">
            $
          </span>{' '}
          <CodeInline code={command} language="sh" />
          {hasStderr && (
            <span className="terminal-legend" title="Lines with a red bar: what the command wrote to stderr">
              <span className="term-stderr">stderr</span>
            </span>
          )}
        </div>
      )}
      {hidden > 0 && (
        <button type="button" className="link-btn" onClick={() => setAll(true)}>
          Show {hidden.toLocaleString()} earlier lines
        </button>
      )}
      {text !== '' && (
      <pre
        className="terminal-out"
        tabIndex={0}
        ref={out}
        onScroll={(e) => {
          const el = e.currentTarget
          pinned.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24
        }}
      >
        {shown.map((line, i) => (
          <div key={i} className={line.some((s) => s.stderr) ? 'terminal-line terminal-line-stderr' : 'terminal-line'}>
            {line.length === 0
              ? '\u00a0'
              : line.map((s, j) => {
                  const { className, style } = spanStyle(s)
                  if (s.stderr)
                    return (
                      <span key={j} className={className ? `term-stderr ${className}` : 'term-stderr'} style={style} data-stream="stderr" title="stderr">
                        {s.text}
                      </span>
                    )
                  return className || style ? (
                    <span key={j} className={className} style={style}>
                      {s.text}
                    </span>
                  ) : (
                    s.text
                  )
                })}
          </div>
        ))}
      </pre>
      )}
      {exitCode !== undefined && <div className={`terminal-exit ${exitCode === 0 ? 'ok' : 'bad'}`}>exit {exitCode}</div>}
    </div>
  )
})

export function CodeInline({ code, language }: { code: string; language?: string }) {
  const tokens = useMemo(() => tokenize(code, languageOf(language)), [code, language])
  return (
    <code className="code-inline-hl">
      <Tokens tokens={tokens} />
    </code>
  )
}

/** A write or edit as a unified diff, with line numbers and highlighted +/- lines. */
export const DiffView = memo(function DiffView({ before, after, path }: { before: string; after: string; path?: string }) {
  const rows = useMemo(() => diffRows(before, after), [before, after])
  const lang = languageOf(path)
  return <DiffTable rows={rows} path={path} renderText={(text) => <CodeInline code={text} language={lang} />} />
})

/**
 * Diff rows as a table: a head with the path and the +/− counts, then one row per line with its
 * old and new numbers. `renderText` draws a line's text (highlighted, or plain).
 */
export function DiffTable({ rows, path, renderText }: { rows: readonly DiffRow[]; path?: string; renderText?: (text: string) => ReactNode }) {
  const added = rows.filter((r) => r.kind === 'add').length
  const removed = rows.filter((r) => r.kind === 'del').length
  return (
    <div className="diff" role="table" aria-label={`Changes to ${path ?? 'file'}`}>
      <div className="diff-head">
        <span className="diff-path">{path}</span>
        <span className="diff-stat">
          <span className="diff-add-n">+{added}</span> <span className="diff-del-n">−{removed}</span>
        </span>
      </div>
      <div className="diff-body">
        {rows.map((r, i) =>
          r.kind === 'gap' ? (
            <div key={i} className="diff-row diff-gap" role="row">
              <span role="cell">⋯</span>
            </div>
          ) : (
            <div key={i} className={`diff-row diff-${r.kind}`} role="row">
              <span className="diff-no" role="cell">
                {r.oldNo ?? ''}
              </span>
              <span className="diff-no" role="cell">
                {r.newNo ?? ''}
              </span>
              <span className="diff-sign" role="cell" aria-label={r.kind === 'add' ? 'added' : r.kind === 'del' ? 'removed' : undefined}>
                {r.kind === 'add' ? '+' : r.kind === 'del' ? '−' : ' '}
              </span>
              <span className="diff-text" role="cell">
                {renderText ? renderText(r.text || ' ') : r.text || ' '}
              </span>
            </div>
          ),
        )}
      </div>
    </div>
  )
}

/** Highlighted tokens: plain text as is, the rest in a span with the token's class. */
function Tokens({ tokens }: { tokens: ReturnType<typeof tokenize> }) {
  return (
    <>
      {tokens.map((t, i) =>
        t.type === 'plain' ? (
          t.text
        ) : (
          <span key={i} className={`tok-${t.type}`}>
            {t.text}
          </span>
        ),
      )}
    </>
  )
}
