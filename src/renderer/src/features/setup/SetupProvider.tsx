import { createContext, useCallback, useContext, useEffect, useMemo, useState, type ReactNode } from 'react'
import { useClient } from '../../api/context'
import { ApiError } from '../../api'
import { useQuery } from '../../ui/hooks'
import type { CorralSettingsView, ImageBuildStatus, ModelCheckView, SandboxStatusView } from '../../../../shared/api/types'

/** One Test connection (`POST /v1/corral/model/test`): status and error text, never the key. */
export type ModelCheck = ModelCheckView

/** `GET /v1/corral/settings` as the engine answers it; an engine without the route leaves it absent. */
export type SetupSettings = Partial<CorralSettingsView>

export type ImageBuild = ImageBuildStatus

/** `GET /v1/corral/sandbox`: the backends, Docker and the default image, its build. */
export type SandboxStatus = SandboxStatusView

interface Setup {
  settings?: SetupSettings
  sandbox?: SandboxStatus
  /** Whether a model has answered a Test connection of this engine. */
  modelReady: boolean
  /** Re-reads both now (after a save, a test, a build). */
  reload: () => void
  buildImage: () => Promise<void>
  buildError?: unknown
}

const SetupContext = createContext<Setup | null>(null)

/**
 * What a first run needs to know everywhere (the home screen, the banner, a new session's
 * header): whether a model answers, and whether a sandbox can run tools. Polled: every 10 s,
 * every second while the image builds. Engines without these routes (404) leave them undefined.
 */
export function SetupProvider({ children }: { children: ReactNode }) {
  const client = useClient()
  const [building, setBuilding] = useState(false)
  const settings = useQuery(() => client.request<SetupSettings>('settings.retrieve').catch(absent), [], 10_000)
  const sandbox = useQuery(() => client.request<SandboxStatus>('sandbox.retrieve').catch(absent), [], building ? 1000 : 10_000)
  const [buildError, setBuildError] = useState<unknown>()
  const state = sandbox.data?.image_build.state
  useEffect(() => setBuilding(state === 'building'), [state])
  const { reload: reloadSettings } = settings
  const { reload: reloadSandbox } = sandbox
  const reload = useCallback(() => {
    reloadSettings()
    reloadSandbox()
  }, [reloadSettings, reloadSandbox])
  const buildImage = useCallback(async () => {
    setBuildError(undefined)
    try {
      await client.request('sandbox.image.build')
      setBuilding(true)
      reloadSandbox()
    } catch (e) {
      setBuildError(e)
    }
  }, [client, reloadSandbox])
  const value = useMemo<Setup>(
    () => ({ settings: settings.data ?? undefined, sandbox: sandbox.data ?? undefined, modelReady: settings.data?.model_check?.ok === true, reload, buildImage, buildError }),
    [settings.data, sandbox.data, reload, buildImage, buildError],
  )
  return <SetupContext.Provider value={value}>{children}</SetupContext.Provider>
}

function absent(e: unknown): undefined {
  if (e instanceof ApiError && e.status === 404) return undefined
  throw e
}

export function useSetup(): Setup {
  const s = useContext(SetupContext)
  if (!s) throw new Error('useSetup outside SetupProvider')
  return s
}
