/**
 * The program a sandbox runs to reach the egress proxy: it listens on the sandbox's own
 * loopback and forwards every TCP connection to the proxy's unix socket, which is mounted into
 * the sandbox. The sandbox has no other route out, and nothing secret passes through here in
 * clear (credentials are added by the proxy, outside). Plain Node, no dependencies; written
 * into each session's egress directory as bridge.js.
 *
 *   node bridge.js <socket path> <port>
 */
export const SANDBOX_BRIDGE_SOURCE = `'use strict'
const net = require('net')
const [socketPath, portArg] = process.argv.slice(2)
const port = Number(portArg || 3128)
if (!socketPath || !Number.isInteger(port)) {
  process.stderr.write('usage: node bridge.js <socket path> <port>\\n')
  process.exit(2)
}
const server = net.createServer((client) => {
  client.setNoDelay(true)
  const upstream = net.connect(socketPath)
  client.on('error', () => upstream.destroy())
  upstream.on('error', () => client.destroy())
  client.pipe(upstream).pipe(client)
})
server.on('error', (err) => {
  process.stderr.write('corral egress bridge: ' + err.message + '\\n')
  process.exit(1)
})
server.listen(port, '127.0.0.1', () => {
  const addr = server.address()
  process.stdout.write('corral egress bridge listening on 127.0.0.1:' + addr.port + '\\n')
})
`
