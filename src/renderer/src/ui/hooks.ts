import { useCallback, useEffect, useRef, useState } from 'react'

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
