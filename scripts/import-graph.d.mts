// Types of scripts/import-graph.mjs for the tests that call it (test/unit/tooling/import-graph.test.ts).
export interface Edge { to: string }
export type Graph = Map<string, Edge[]>
export interface Circle { files: string[]; cycle: string[] }
export interface KnownCircle { files: string[]; removedBy: string }
export interface RoomsTable {
  order: string
  rooms: { room: string; holds: string[]; may: string[] }[]
  private?: { file: string; why: string }[]
  allow?: { from: string; to: string; removedBy: string }[]
}
export const KNOWN_CIRCLES: KnownCircle[]
export function importsOf(text: string): string[]
export function resolveSpecifier(fromFile: string, specifier: string, files: Set<string>): string | null
export function buildGraph(sources: Record<string, string>): Graph
export function findCircles(graph: Graph): Circle[]
export function checkTree(params: { sources: Record<string, string>; table: RoomsTable; refusal: (table: RoomsTable, from: string, to: string) => string | null; knownCircles?: KnownCircle[] }): { graph: Graph; circles: Circle[]; problems: string[] }
