export function App() {
  return (
    <main>
      <h1>Corral</h1>
      <p>Long-running agents on your own machine.</p>
    </main>
  )
}
