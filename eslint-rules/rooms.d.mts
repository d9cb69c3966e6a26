// Types of eslint-rules/rooms.mjs for the tests that call its pure parts.
import type { RoomsTable } from '../scripts/import-graph.mjs'
export function stemOf(path: string): string
export function roomOf(table: RoomsTable, path: string): RoomsTable['rooms'][number] | null
export function refusal(table: RoomsTable, from: string, to: string): string | null
declare const plugin: { meta: { name: string }; rules: Record<string, unknown> }
export default plugin
