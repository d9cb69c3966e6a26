import { useClient } from '../../api/context'
import type { Vault } from '../../../../shared/api/types'
import { useQuery } from '../../ui/hooks'

/**
 * The vaults a session (or a schedule's sessions) may use, as checkboxes: `selected` in the order
 * ticked, which is the API's order of precedence (the first vault wins a clash). A vault no longer
 * listed (archived, deleted) but still selected stays shown, so it can be unticked.
 */
export function VaultPicker({ selected, onChange, onCreate }: { selected: readonly string[]; onChange: (ids: string[]) => void; onCreate?: () => void }) {
  const client = useClient()
  const vaults = useQuery(() => client.request<{ data: Vault[] }>('vaults.list', {}, { limit: 100 }), [])
  const listed = vaults.data?.data ?? []
  const gone = selected.filter((id) => !listed.some((v) => v.id === id)).map((id) => ({ id, display_name: id }))
  const shown = [...listed, ...gone]
  return (
    <fieldset className="vault-pick">
      <legend>Vaults</legend>
      {shown.length === 0 ? (
        <p className="muted">
          No vaults yet: credentials for MCP servers and secrets for the sandbox live in a vault.{' '}
          {onCreate && (
            <button type="button" className="link-btn" onClick={onCreate}>
              Create a vault
            </button>
          )}
        </p>
      ) : (
        <div className="radio-row" role="group" aria-label="Vaults the session may use">
          {shown.map((v) => (
            <label key={v.id} className="check">
              <input type="checkbox" checked={selected.includes(v.id)} onChange={(e) => onChange(e.target.checked ? [...selected, v.id] : selected.filter((x) => x !== v.id))} /> {v.display_name}
            </label>
          ))}
        </div>
      )}
    </fieldset>
  )
}
