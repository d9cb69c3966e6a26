export { buildContextView, COMPACTION_INSTRUCTION, modelId } from './view'
export type { ContextView, ContextViewOptions, ViewAgent, ViewEvent } from './view'
