import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

/** One request a WebhookReceiver got: its headers (string-valued ones) and its raw body, as a handler verifies them. */
export interface ReceivedWebhook {
  headers: Record<string, string>
  body: string
}

/**
 * A webhook receiver on loopback, as a user's own handler would run one (docs/webhooks.md): it
 * records every request and answers it with `answer(n)` (n: how many it has got, this one
 * included), 204 by default; a status of 400 or more goes with the body "receiver is down".
 */
export class WebhookReceiver {
  readonly got: ReceivedWebhook[] = []
  answer: (n: number) => number = () => 204
  url = ''
  private server: Server | undefined

  /** Listens on 127.0.0.1 (`port`: a given one, or any free one); `url` is then its /hooks URL. */
  async start(port = 0): Promise<this> {
    const server = (this.server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        const headers: Record<string, string> = {}
        for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers[k] = v
        this.got.push({ headers, body: Buffer.concat(chunks).toString('utf8') })
        const status = this.answer(this.got.length)
        res.writeHead(status).end(status >= 400 ? 'receiver is down' : '')
      })
    }))
    await new Promise<void>((r) => server.listen(port, '127.0.0.1', r))
    this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`
    return this
  }

  /** The bodies it got, parsed. */
  bodies(): { data: Record<string, unknown> }[] {
    return this.got.map((g) => JSON.parse(g.body) as { data: Record<string, unknown> })
  }

  close(): Promise<void> {
    const server = this.server
    if (!server) return Promise.resolve()
    server.closeAllConnections()
    return new Promise((r) => server.close(() => r()))
  }
}
