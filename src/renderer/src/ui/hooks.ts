import { useCallback, useEffect, useMemo, useRef, useState } from 'react'

export interface Query<T> {
  data: T | undefined
  error: Error | undefined
  loading: boolean
  reload: () => void
}

/**
 * Runs `load` when `key` changes (and every `intervalMs` while the page is visible, if given);
 * keeps the last data while reloading, so a poll never flashes an empty list.
 */
export function useQuery<T>(load: () => Promise<T>, key: unknown[], intervalMs?: number): Query<T> {
  const [data, setData] = useState<T>()
  const [error, setError] = useState<Error>()
  const [loading, setLoading] = useState(true)
  const [tick, setTick] = useState(0)
  const loadRef = useRef(load)
  loadRef.current = load
  useEffect(() => {
    let live = true
    const run = () => {
      loadRef
        .current()
        .then((d) => {
          if (!live) return
          setData(d)
          setError(undefined)
        })
        .catch((e: Error) => live && setError(e))
        .finally(() => live && setLoading(false))
    }
    run()
    if (!intervalMs) return () => void (live = false)
    const t = setInterval(() => {
      if (document.visibilityState === 'visible') run()
    }, intervalMs)
    return () => {
      live = false
      clearInterval(t)
    }
  }, [...key, tick, intervalMs])
  const reload = useCallback(() => setTick((t) => t + 1), [])
  return { data, error, loading, reload }
}

export interface Action {
  /** What is running (the `what` given to `run`), or undefined. */
  busy: string | undefined
  /** The last run's failure, until the next run starts. */
  error: unknown
  /** Runs `work`: clears the error, marks `what` busy until it settles, keeps its failure. */
  run: (work: () => Promise<unknown>, what?: string) => Promise<void>
}

/** A button's action on the engine: what runs now and the error it left, for the form to show. */
export function useAction(): Action {
  const [busy, setBusy] = useState<string>()
  const [error, setError] = useState<unknown>()
  const run = useCallback(async (work: () => Promise<unknown>, what = 'busy') => {
    setBusy(what)
    setError(undefined)
    try {
      await work()
    } catch (e) {
      setError(e)
    } finally {
      setBusy(undefined)
    }
  }, [])
  return { busy, error, run }
}

/**
 * Form fields filled from data the page read (settings, an agent, …). `fill(data)` runs when the
 * data arrives and each time it is read again, during the render that receives it, so the commit
 * that shows (and enables) the form already holds the values: filled from an effect, the form was
 * on screen empty for a frame, and typing in that frame was wiped when the effect ran (CI caught a
 * fast fill lost that way). Once the person edits (`edited()`), a later read no longer overwrites
 * the fields until `saved()` says the server holds what they typed.
 */
export function useFormFill<T>(data: T | undefined, fill: (data: T) => void): { edited: () => void; saved: () => void } {
  const [seen, setSeen] = useState<{ data: T | undefined }>({ data: undefined })
  const [typed, setTyped] = useState(false)
  if (data !== undefined && data !== seen.data) {
    setSeen({ data })
    if (!typed) fill(data)
  }
  const edited = useCallback(() => setTyped(true), [])
  const saved = useCallback(() => setTyped(false), [])
  return { edited, saved }
}

/**
 * A form's draft of a stored object the app keeps reading (an agent, an environment: the lists
 * are polled). While nothing is typed, the draft follows each newer version of the object. Once
 * the person has edited it, a newer version (saved elsewhere: the SDK, another window) no longer
 * replaces what they typed: `newer` is that version, for the form to say so and offer `load`
 * (take it, dropping the edits) or `keep` (keep the edits, to be saved over it). `base` is the
 * version the draft was made from: what a save names (the agents API refuses a stale version).
 * The form used to be keyed by the object's version, so a poll that brought one remounted it and
 * the unsaved edits were gone.
 */
export function useDraft<S, D>(source: S | undefined, draftOf: (s: S | undefined) => D, versionOf: (s: S) => string | number): {
  draft: D
  setDraft: (update: D | ((d: D) => D)) => void
  base: S | undefined
  dirty: boolean
  newer: S | undefined
  load: () => void
  keep: () => void
  /** After a save: the version the server answered is the draft's base (the next poll brings it, not something newer). */
  saved: (s: S) => void
} {
  const [base, setBase] = useState(source)
  const [draft, setDraftState] = useState<D>(() => draftOf(source))
  // a version becomes the base, and the draft is made from it
  const adopt = (s: S | undefined) => {
    setBase(s)
    setDraftState(draftOf(s))
  }
  const baseJson = useMemo(() => JSON.stringify(draftOf(base)), [base, draftOf])
  const dirty = JSON.stringify(draft) !== baseJson
  const moved = source !== undefined && base !== undefined && versionOf(source) !== versionOf(base)
  // nothing typed: follow the newer version (during this render, as useFormFill does)
  if (moved && !dirty) adopt(source)
  const load = () => adopt(source)
  const keep = () => setBase(source)
  return { draft, setDraft: setDraftState, base, dirty, newer: moved && dirty ? source : undefined, load, keep, saved: adopt }
}

/** A value persisted in localStorage (UI preferences only: never anything secret). */
export function useStoredState<T extends string>(key: string, initial: T): [T, (v: T) => void] {
  const [v, setV] = useState<T>(() => (localStorage.getItem(key) as T | null) ?? initial)
  const set = useCallback(
    (next: T) => {
      localStorage.setItem(key, next)
      setV(next)
    },
    [key],
  )
  return [v, set]
}

/** The hash route: '#/sessions/sesn_…', '#/agents', ... */
export function useHashRoute(): [string[], (path: string) => void] {
  const parse = () => window.location.hash.replace(/^#\/?/, '').split('/').filter(Boolean)
  const [parts, setParts] = useState(parse)
  useEffect(() => {
    const on = () => setParts(parse())
    window.addEventListener('hashchange', on)
    return () => window.removeEventListener('hashchange', on)
  }, [])
  const go = useCallback((path: string) => {
    window.location.hash = path.startsWith('/') ? path : `/${path}`
  }, [])
  return [parts, go]
}

/** True when typing should not trigger single-key shortcuts. */
export function isTypingTarget(t: EventTarget | null): boolean {
  const el = t as HTMLElement | null
  if (!el) return false
  return el.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(el.tagName)
}
