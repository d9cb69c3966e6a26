/**
 * Terminal output → styled spans: SGR colours and attributes (16, 256 and 24-bit colours, bold,
 * dim, italic, underline, inverse), carriage returns that redraw a line (progress bars), and
 * every other escape sequence removed. Pure: the React view maps spans to elements.
 */
export interface AnsiStyle {
  /** A palette class ('red', 'bright-blue', ...) or a CSS colour for 256/24-bit colours. */
  fg?: string
  bg?: string
  bold?: boolean
  dim?: boolean
  italic?: boolean
  underline?: boolean
  inverse?: boolean
}

export interface AnsiSpan extends AnsiStyle {
  text: string
  /** The command wrote this text to stderr (from the result's `stderr_ranges` or the previews' stream marks). */
  stderr?: boolean
}

/** [from, to) ranges of a text, in UTF-16 code units, ascending and not overlapping. */
export type TextRanges = ReadonlyArray<readonly [number, number]>

export type AnsiLine = AnsiSpan[]

const NAMES = ['black', 'red', 'green', 'yellow', 'blue', 'magenta', 'cyan', 'white']

/** The xterm 256-colour palette entry n (16..255) as an rgb() string; 0..15 map to palette names. */
export function color256(n: number): string {
  if (n < 8) return NAMES[n]
  if (n < 16) return `bright-${NAMES[n - 8]}`
  if (n < 232) {
    const i = n - 16
    const v = (c: number) => (c === 0 ? 0 : 55 + c * 40)
    return `rgb(${v(Math.floor(i / 36))}, ${v(Math.floor(i / 6) % 6)}, ${v(i % 6)})`
  }
  const g = 8 + (n - 232) * 10
  return `rgb(${g}, ${g}, ${g})`
}

function applySgr(params: number[], style: AnsiStyle): AnsiStyle {
  const s = { ...style }
  if (params.length === 0) params = [0]
  for (let i = 0; i < params.length; i++) {
    const p = params[i]
    if (p === 0) {
      for (const k of Object.keys(s)) delete s[k as keyof AnsiStyle]
    } else if (p === 1) s.bold = true
    else if (p === 2) s.dim = true
    else if (p === 3) s.italic = true
    else if (p === 4) s.underline = true
    else if (p === 7) s.inverse = true
    else if (p === 22) {
      delete s.bold
      delete s.dim
    } else if (p === 23) delete s.italic
    else if (p === 24) delete s.underline
    else if (p === 27) delete s.inverse
    else if (p >= 30 && p <= 37) s.fg = NAMES[p - 30]
    else if (p === 39) delete s.fg
    else if (p >= 40 && p <= 47) s.bg = NAMES[p - 40]
    else if (p === 49) delete s.bg
    else if (p >= 90 && p <= 97) s.fg = `bright-${NAMES[p - 90]}`
    else if (p >= 100 && p <= 107) s.bg = `bright-${NAMES[p - 100]}`
    else if (p === 38 || p === 48) {
      const key = p === 38 ? 'fg' : 'bg'
      if (params[i + 1] === 5 && params[i + 2] !== undefined) {
        s[key] = color256(params[i + 2] & 255)
        i += 2
      } else if (params[i + 1] === 2 && params[i + 4] !== undefined) {
        s[key] = `rgb(${params[i + 2] & 255}, ${params[i + 3] & 255}, ${params[i + 4] & 255})`
        i += 4
      }
    }
  }
  return s
}

// CSI (ESC [ ... final), OSC (ESC ] ... BEL or ESC \), and two-character escapes.
const ESCAPE = /\u001b\[([0-?]*)([ -/]*)([@-~])|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)|\u001b[@-Z\\-_]/g

function sameStyle(a: AnsiSpan, b: AnsiSpan): boolean {
  return a.stderr === b.stderr && a.fg === b.fg && a.bg === b.bg && a.bold === b.bold && a.dim === b.dim && a.italic === b.italic && a.underline === b.underline && a.inverse === b.inverse
}

/**
 * Parses terminal output into lines of styled spans. A `\r` inside a line starts the line over
 * (what a terminal shows for progress bars); `\r\n` is a plain line end. `stderr`: the ranges of
 * `input` a command wrote to stderr; their spans carry `stderr: true`.
 */
export function parseAnsi(input: string, stderr: TextRanges = []): AnsiLine[] {
  const lines: AnsiLine[] = []
  let style: AnsiStyle = {}
  let ri = 0 // the first stderr range that may still cover what comes next (pieces come in order)
  let base = 0
  for (const raw of input.split('\n')) {
    const rawStart = base
    base += raw.length + 1
    let line = raw.endsWith('\r') ? raw.slice(0, -1) : raw
    let lineStart = rawStart
    const cr = line.lastIndexOf('\r')
    if (cr !== -1) {
      // Keep the style state the overwritten part set, but not its text.
      for (const m of line.slice(0, cr).matchAll(ESCAPE)) if (m[3] === 'm' && !m[2]) style = applySgr(parseParams(m[1]), style)
      line = line.slice(cr + 1)
      lineStart += cr + 1
    }
    const spans: AnsiSpan[] = []
    let last = 0
    const push = (raw: string, isErr: boolean) => {
      const text = raw.replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, '')
      if (!text) return
      const span: AnsiSpan = isErr ? { ...style, text, stderr: true } : { ...style, text }
      const prev = spans[spans.length - 1]
      if (prev && sameStyle(prev, span)) prev.text += text
      else spans.push(span)
    }
    // The piece line[from, to) of the line, split where a stderr range starts or ends.
    const emit = (from: number, to: number) => {
      let a = lineStart + from
      const b = lineStart + to
      while (a < b) {
        while (ri < stderr.length && stderr[ri][1] <= a) ri++
        const r = stderr[ri]
        if (!r || r[0] >= b) return push(input.slice(a, b), false)
        if (r[0] > a) {
          push(input.slice(a, r[0]), false)
          a = r[0]
        }
        const end = Math.min(b, r[1])
        push(input.slice(a, end), true)
        a = end
      }
    }
    for (const m of line.matchAll(ESCAPE)) {
      emit(last, m.index ?? 0)
      last = (m.index ?? 0) + m[0].length
      if (m[3] === 'm' && !m[2]) style = applySgr(parseParams(m[1]), style)
    }
    emit(last, line.length)
    lines.push(spans)
  }
  return lines
}

function parseParams(s: string | undefined): number[] {
  if (!s) return []
  return s.split(/[;:]/).map((x) => (x === '' ? 0 : Number.parseInt(x, 10) || 0))
}

/** True when the text contains an escape sequence (so a plain <pre> will not do). */
export function hasAnsi(text: string): boolean {
  return text.includes('\u001b')
}
