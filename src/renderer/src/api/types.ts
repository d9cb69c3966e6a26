/**
 * The shapes the renderer works with, taken from the official SDK's type definitions (via
 * src/shared/api/types.ts), never retyped by hand.
 */
export type { Agent, Deployment, DeploymentRun, Environment, PackageStatus, Session, SessionEvent, SessionUsage, Skill, SkillVersion } from '../../../shared/api/types'
export type { BetaManagedAgentsSessionThread as SessionThread } from '@anthropic-ai/sdk/resources/beta/sessions/threads/threads'
export type {
  BetaManagedAgentsStartEvent as StartPreview,
  BetaManagedAgentsDeltaEvent as DeltaPreview,
} from '@anthropic-ai/sdk/resources/beta/sessions/sessions'

/** A page of a list operation, as the API returns it. */
export interface Page<T> {
  data: T[]
  next_page: string | null
  prev_page?: string | null
}
export type { ChangesRevertResponse, FolderChange, FolderChanges, SessionChangesResponse, WorkspaceEntry, WorkspaceListing } from '../../../shared/api/workspace'
