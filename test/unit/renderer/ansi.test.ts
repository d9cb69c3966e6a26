import { describe, expect, it } from 'vitest'
import { color256, hasAnsi, parseAnsi } from '../../../src/renderer/src/ui/ansi'

describe('parseAnsi', () => {
  it('marks the spans inside the stderr ranges, across lines and colours', () => {
    const input = 'ok\n\u001b[31mbad\u001b[0m thing\nok'
    const from = input.indexOf('\u001b[31m')
    const to = input.indexOf(' thing') + ' thing'.length + 1
    expect(parseAnsi(input, [[from, to]])).toEqual([
      [{ text: 'ok' }],
      [
        { fg: 'red', text: 'bad', stderr: true },
        { text: ' thing', stderr: true },
      ],
      [{ text: 'ok' }],
    ])
    expect(parseAnsi('outERR', [[3, 6]])).toEqual([[{ text: 'out' }, { text: 'ERR', stderr: true }]])
  })

  it('turns SGR colours and attributes into styled spans and resets them', () => {
    expect(parseAnsi('\u001b[1;31merror\u001b[0m: bad')).toEqual([[{ bold: true, fg: 'red', text: 'error' }, { text: ': bad' }]])
  })

  it('carries a style across lines until it is reset', () => {
    const lines = parseAnsi('\u001b[32mok\nstill green\u001b[39m plain')
    expect(lines[1]).toEqual([{ fg: 'green', text: 'still green' }, { text: ' plain' }])
  })

  it('supports 256-colour and 24-bit colours', () => {
    expect(parseAnsi('\u001b[38;5;196mx\u001b[48;2;1;2;3my')[0]).toEqual([
      { fg: 'rgb(255, 0, 0)', text: 'x' },
      { fg: 'rgb(255, 0, 0)', bg: 'rgb(1, 2, 3)', text: 'y' },
    ])
    expect(color256(9)).toBe('bright-red')
    expect(color256(232)).toBe('rgb(8, 8, 8)')
  })

  it('shows what a terminal shows for a redrawn progress line and a CRLF', () => {
    expect(parseAnsi('10%\r50%\r100% done\r\nnext')).toEqual([[{ text: '100% done' }], [{ text: 'next' }]])
  })

  it('drops cursor movement, OSC titles and stray control characters', () => {
    expect(parseAnsi('\u001b]0;title\u0007a\u001b[2Kb\u001b[1Ac\u0007')).toEqual([[{ text: 'abc' }]])
    expect(hasAnsi('plain')).toBe(false)
  })
})
