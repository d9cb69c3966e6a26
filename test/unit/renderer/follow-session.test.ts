import { afterEach, describe, expect, it, vi } from 'vitest'
import { followSession } from '../../../src/renderer/src/api/follow'
import { HttpClient } from '../../../src/renderer/src/api/http-client'
import type { Page, SessionEvent } from '../../../src/renderer/src/api/types'
import type { StreamMessage } from '../../../src/shared/api/operations'

/**
 * An engine as the browser's fetch sees it: a session log; `GET …/events` answers with the log as
 * it is when the request arrives; `GET …/events/stream` (no `after`) starts at the log's end when
 * the engine answers it, which the test decides (`answerStreams`): the two requests race as they
 * do on a loaded machine.
 */
class RacingEngine {
  readonly log: SessionEvent[] = []
  private readonly streams: ReadableStreamDefaultController<Uint8Array>[] = []
  private readonly waiting: ((r: Response) => void)[] = []
  listReads = 0

  readonly fetch = vi.fn(async (url: string) => {
    if (url.includes('/stream')) return new Promise<Response>((resolve) => this.waiting.push(resolve))
    this.listReads++
    const page: Page<SessionEvent> = { data: this.log.slice(), next_page: null }
    return new Response(JSON.stringify(page), { status: 200 })
  })

  append(type: string): void {
    const event = { id: `sevt_${this.log.length + 1}`, type } as unknown as SessionEvent
    this.log.push(event)
    const frame = new TextEncoder().encode(`event: ${type}\nid: ${this.log.length}\ndata: ${JSON.stringify(event)}\n\n`)
    for (const c of this.streams) c.enqueue(frame)
  }

  /** The engine answers the streams asked for so far: each starts after the log's last event now. */
  answerStreams(): void {
    for (const resolve of this.waiting.splice(0)) {
      const body = new ReadableStream<Uint8Array>({ start: (c) => void this.streams.push(c) })
      resolve(new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } }))
    }
  }

  /** The engine drops every open stream (a restart, a network blip): the client reconnects. */
  dropStreams(): void {
    for (const c of this.streams.splice(0)) c.close()
  }

  get streamsAsked(): number {
    return this.waiting.length + this.streams.length
  }
}

const settle = () => new Promise((r) => setTimeout(r, 20))
const ids = (events: readonly { id: string }[]) => events.map((e) => e.id)

describe('followSession: a stream and a history read with no gap between them', () => {
  afterEach(() => vi.unstubAllGlobals())

  it('reads the history only once the engine answered the stream: an event appended while the stream was on its way is in the history, and every event is seen once, in order', async () => {
    const engine = new RacingEngine()
    vi.stubGlobal('fetch', engine.fetch)
    const client = new HttpClient()
    engine.append('session.thread_created')
    const seen: string[] = []
    const order: string[] = []
    const stop = followSession(client, 'sesn_1', {}, {
      history: () => client.request<Page<SessionEvent>>('events.list', { id: 'sesn_1' }, { order: 'asc' }),
      onHistory: (page) => {
        order.push('history')
        for (const e of page.data) if (!seen.includes(e.id)) seen.push(e.id)
      },
      onMessage: (m: StreamMessage) => {
        order.push('message')
        if (m.kind === 'event' && !seen.includes(m.event.id)) seen.push(m.event.id)
      },
    })
    await settle()
    expect(engine.streamsAsked).toBe(1)
    // the stream is on its way: nothing of the past is read yet (a read now could miss what comes next)
    expect(engine.listReads).toBe(0)
    engine.append('session.thread_status_running')
    engine.append('session.thread_status_idle') // the thread's end, between the two: the event that went missing
    engine.answerStreams()
    engine.append('workflow_run.phase_ended') // right after the stream opened, before the history is in
    await settle()
    expect(engine.listReads).toBe(1)
    engine.append('workflow_run.status_ended')
    await settle()
    expect(seen).toEqual(ids(engine.log))
    // the message that came before the history was held until it was in
    expect(order[0]).toBe('history')
    stop()
    engine.append('session.status_idle')
    await settle()
    expect(seen).toHaveLength(engine.log.length - 1)
  })

  it('reads the history again once the stream is back after a drop, for onResync: what the stream could not resume is there; a read still out when the view closes delivers nothing', async () => {
    const engine = new RacingEngine()
    vi.stubGlobal('fetch', engine.fetch)
    const client = new HttpClient()
    engine.append('session.thread_created')
    const reads: (() => void)[] = []
    const seen: string[] = []
    const resyncs: string[][] = []
    const states: string[] = []
    let readsMade = 0
    const stop = followSession(client, 'sesn_1', {}, {
      history: () => {
        readsMade++
        const read = client.request<Page<SessionEvent>>('events.list', { id: 'sesn_1' }, { order: 'asc' })
        // the third read (the second resync) is held until the test lets it go
        return readsMade < 3 ? read : new Promise<Page<SessionEvent>>((resolve) => reads.push(() => void read.then(resolve)))
      },
      onHistory: (page) => seen.push(...ids(page.data)),
      onMessage: (m) => m.kind === 'event' && seen.push(m.event.id),
      onState: (st) => states.push(st),
      onResync: (page) => {
        resyncs.push(ids(page.data))
        for (const e of page.data) if (!seen.includes(e.id)) seen.push(e.id)
      },
    })
    await settle()
    engine.answerStreams()
    await settle()
    expect(seen).toEqual(['sevt_1'])
    // dropped before the stream told any seq: it reopens at the log's end, past what came meanwhile
    engine.dropStreams()
    await settle()
    engine.append('session.thread_status_idle')
    await vi.waitFor(() => expect(engine.streamsAsked).toBe(1), { timeout: 3000, interval: 20 })
    engine.answerStreams()
    await vi.waitFor(() => expect(resyncs).toHaveLength(1), { timeout: 3000, interval: 20 })
    expect(seen).toEqual(ids(engine.log))
    expect(states).toEqual(['open', 'reconnecting', 'open'])
    // a second drop; the view closes while its read is out
    engine.dropStreams()
    await vi.waitFor(() => expect(engine.streamsAsked).toBe(1), { timeout: 3000, interval: 20 })
    engine.answerStreams()
    await vi.waitFor(() => expect(reads).toHaveLength(1), { timeout: 3000, interval: 20 })
    stop()
    engine.append('user.message')
    reads[0]()
    await settle()
    expect(resyncs).toHaveLength(1)
  })

  it('a stream that cannot open does not hold the history back', async () => {
    vi.stubGlobal('fetch', vi.fn(async (url: string) => (url.includes('/stream') ? new Response('{}', { status: 404 }) : new Response(JSON.stringify({ data: [{ id: 'sevt_1', type: 'user.message' }], next_page: null })))))
    const client = new HttpClient()
    const got: string[] = []
    const states: string[] = []
    const stop = followSession(client, 'sesn_gone', {}, {
      history: () => client.request<Page<SessionEvent>>('events.list', { id: 'sesn_gone' }),
      onHistory: (page) => got.push(...ids(page.data)),
      onMessage: () => {},
      onState: (s) => states.push(s),
    })
    await settle()
    expect(states).toEqual(['reconnecting'])
    expect(got).toEqual(['sevt_1'])
    stop()
  })

  it('a history that cannot be read is reported, and what the stream held is delivered after it', async () => {
    const engine = new RacingEngine()
    vi.stubGlobal('fetch', engine.fetch)
    const client = new HttpClient()
    const got: string[] = []
    const errors: unknown[] = []
    let fail!: (e: Error) => void
    const stop = followSession(client, 'sesn_1', {}, {
      history: () => new Promise((_, reject) => (fail = reject)),
      onHistory: () => got.push('history'),
      onHistoryError: (err) => errors.push(err),
      onMessage: (m) => m.kind === 'event' && got.push(m.event.id),
    })
    await settle()
    engine.answerStreams()
    await settle()
    engine.append('user.message')
    await settle()
    expect(got).toEqual([])
    fail(new Error('HTTP 500'))
    await settle()
    expect(errors).toHaveLength(1)
    expect(got).toEqual(['sevt_1'])
    stop()
  })
})
