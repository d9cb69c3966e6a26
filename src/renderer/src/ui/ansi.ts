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
}

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

function sameStyle(a: AnsiStyle, b: AnsiStyle): boolean {
  return a.fg === b.fg && a.bg === b.bg && a.bold === b.bold && a.dim === b.dim && a.italic === b.italic && a.underline === b.underline && a.inverse === b.inverse
}

/**
 * Parses terminal output into lines of styled spans. A `\r` inside a line starts the line over
 * (what a terminal shows for progress bars); `\r\n` is a plain line end.
 */
export function parseAnsi(input: string): AnsiLine[] {
  const lines: AnsiLine[] = []
  let style: AnsiStyle = {}
  for (const raw of input.split('\n')) {
    let line = raw.endsWith('\r') ? raw.slice(0, -1) : raw
    const cr = line.lastIndexOf('\r')
    if (cr !== -1) {
      // Keep the style state the overwritten part set, but not its text.
      for (const m of line.slice(0, cr).matchAll(ESCAPE)) if (m[3] === 'm' && !m[2]) style = applySgr(parseParams(m[1]), style)
      line = line.slice(cr + 1)
    }
    const spans: AnsiSpan[] = []
    let last = 0
    const emit = (raw: string) => {
      const text = raw.replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, '')
      if (!text) return
      const prev = spans[spans.length - 1]
      if (prev && sameStyle(prev, style)) prev.text += text
      else spans.push({ ...style, text })
    }
    for (const m of line.matchAll(ESCAPE)) {
      emit(line.slice(last, m.index))
      last = (m.index ?? 0) + m[0].length
      if (m[3] === 'm' && !m[2]) style = applySgr(parseParams(m[1]), style)
    }
    emit(line.slice(last))
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
