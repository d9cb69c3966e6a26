import { describe, expect, it } from 'vitest'
import { parseUsd, spendFraction, suggestedRaise, usdText } from '../../../src/renderer/src/features/budgets/budget'
import { outcomeResultLabel, outcomeResultTone } from '../../../src/renderer/src/features/outcomes/outcome-view'

describe('budgets as the desktop reads and writes them', () => {
  it('turns typed dollars into whole cents, and names what is wrong with anything else', () => {
    expect(parseUsd('5')).toEqual({ cents: '500' })
    expect(parseUsd('$12.50')).toEqual({ cents: '1250' })
    expect(parseUsd('0.01')).toEqual({ cents: '1' })
    expect(parseUsd('0')).toEqual({ error: 'More than $0.00' })
    expect(parseUsd('1.234')).toEqual({ error: 'An amount in US dollars, like 5 or 12.50' })
    expect(parseUsd('five')).toEqual({ error: 'An amount in US dollars, like 5 or 12.50' })
  })

  it('shows cents as dollars, suggests a raise above the spend, and caps the meter at full', () => {
    expect(usdText('750')).toBe('7.50')
    expect(usdText('500')).toBe('5')
    expect(suggestedRaise(2.5, 3)).toBe('5')
    expect(suggestedRaise(1, 9)).toBe('10')
    expect(spendFraction(3, 2.5)).toBe(1)
    expect(spendFraction(1, 4)).toBe(0.25)
  })
})

describe("an outcome's result on the card", () => {
  it('reads each result in words with its tone', () => {
    expect([outcomeResultLabel('satisfied'), outcomeResultTone('satisfied')]).toEqual(['Satisfied', 'good'])
    expect([outcomeResultLabel('needs_revision'), outcomeResultTone('needs_revision')]).toEqual(['Needs revision', 'warn'])
    expect([outcomeResultLabel('failed'), outcomeResultTone('failed')]).toEqual(['Failed: the rubric does not apply', 'bad'])
    expect([outcomeResultLabel('evaluating'), outcomeResultTone('evaluating')]).toEqual(['Grader evaluating', 'busy'])
    expect(outcomeResultLabel('something_new')).toBe('something new')
  })
})
