import { useEffect } from 'react'
import { useStoredState } from './hooks'

export type ThemeChoice = 'system' | 'dark' | 'light'

/** The theme: 'system' follows prefers-color-scheme live; the choice is kept in localStorage. */
export function useTheme(): [ThemeChoice, (t: ThemeChoice) => void] {
  const [choice, setChoice] = useStoredState<ThemeChoice>('corral.theme', 'system')
  useEffect(() => {
    const mq = window.matchMedia('(prefers-color-scheme: light)')
    const apply = () => {
      const t = choice === 'system' ? (mq.matches ? 'light' : 'dark') : choice
      document.documentElement.dataset.theme = t
      document.documentElement.style.colorScheme = t
    }
    apply()
    mq.addEventListener('change', apply)
    return () => mq.removeEventListener('change', apply)
  }, [choice])
  return [choice, setChoice]
}
