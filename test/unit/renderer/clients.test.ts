import { afterEach, describe, expect, it, vi } from 'vitest'
import { ApiError } from '../../../src/renderer/src/api/client'
import { HttpClient } from '../../../src/renderer/src/api/http-client'
import { IpcClient, type CorralBridge } from '../../../src/renderer/src/api/ipc-client'
import type { IpcResult, StreamMessage } from '../../../src/shared/api/operations'

function sseResponse(chunks: string[]): Response {
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      for (const ch of chunks) c.enqueue(new TextEncoder().encode(ch))
      c.close()
    },
  })
  return new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } })
}

describe('HttpClient', () => {
  afterEach(() => vi.unstubAllGlobals())

  it('calls the operation path with the query the SDK would send and returns the body', async () => {
    const fetchMock = vi.fn(async () => new Response(JSON.stringify({ data: [], next_page: null }), { status: 200 }))
    vi.stubGlobal('fetch', fetchMock)
    const out = await new HttpClient().request('events.list', { id: 'sesn_1' }, { order: 'desc', limit: 5, types: ['agent.message'] })
    expect(out).toEqual({ data: [], next_page: null })
    const [url, init] = fetchMock.mock.calls[0] as unknown as [string, RequestInit]
    expect(url).toBe('/v1/sessions/sesn_1/events?order=desc&limit=5&types%5B%5D=agent.message')
    expect(init.method).toBe('GET')
    expect(init.credentials).toBe('same-origin')
  })

  it('turns the API error envelope into an ApiError with its type and status', async () => {
    vi.stubGlobal('fetch', async () => new Response(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: 'session "x" was not found' } }), { status: 404 }))
    const err = await new HttpClient().request('sessions.retrieve', { id: 'sesn_x' }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ApiError)
    expect(err).toMatchObject({ status: 404, type: 'not_found_error', message: 'session "x" was not found' })
  })

  it('resumes a dropped stream after the last seq it delivered, and parses previews', async () => {
    const urls: string[] = []
    let call = 0
    vi.stubGlobal('fetch', async (url: string) => {
      urls.push(url)
      call++
      if (call === 1) return sseResponse(['event: user.message\nid: 4\ndata: {"id":"sevt_a","type":"user.message"}\n\n', 'event: event_start\ndata: {"type":"event_start","event":{"id":"sevt_b","type":"agent.message"}}\n\n'])
      if (call === 2) return sseResponse(['event: agent.message\nid: 5\ndata: {"id":"sevt_b","type":"agent.message"}\n\n'])
      return new Promise<Response>(() => {})
    })
    vi.useFakeTimers()
    const got: StreamMessage[] = []
    const states: string[] = []
    const stop = new HttpClient().stream('sesn_1', { previews: true, onState: (s) => states.push(s) }, (m) => got.push(m))
    await vi.advanceTimersByTimeAsync(2000)
    stop()
    vi.useRealTimers()
    expect(urls[0]).toBe('/v1/sessions/sesn_1/events/stream?event_deltas%5B%5D=agent.message&event_deltas%5B%5D=agent.thinking&event_deltas%5B%5D=agent.tool_result')
    expect(urls[1]).toContain('after=4')
    expect(got.map((m) => (m.kind === 'event' ? `${m.seq}:${m.event.type}` : m.preview.type))).toEqual(['4:user.message', 'event_start', '5:agent.message'])
    expect(states.slice(0, 3)).toEqual(['open', 'reconnecting', 'open'])
  })

  it("opens a child thread's own stream at /threads/{tid}/stream when asked for that thread", async () => {
    const urls: string[] = []
    vi.stubGlobal('fetch', async (url: string) => {
      urls.push(url)
      return new Promise<Response>(() => {})
    })
    const stop = new HttpClient().stream('sesn_1', { thread: 'sthr_child' }, () => {})
    await new Promise((r) => setTimeout(r, 0))
    stop()
    expect(urls).toEqual(['/v1/sessions/sesn_1/threads/sthr_child/stream'])
  })
})

describe('IpcClient', () => {
  function bridge(answer: IpcResult, onSubscribe?: (listener: (m: StreamMessage) => void) => Promise<IpcResult<{ unsubscribe: () => void }>>): CorralBridge & { calls: unknown[][] } {
    const calls: unknown[][] = []
    return {
      calls,
      call: async (...args) => {
        calls.push(args)
        return answer
      },
      subscribe: async (_p, listener) => (onSubscribe ? onSubscribe(listener) : { ok: true, data: { unsubscribe: () => {} } }),
      info: async () => ({ version: '0', platform: 'linux', apiUrl: 'http://127.0.0.1:4610' }),
    }
  }

  it('passes the operation, path and payload through the bridge and unwraps the data', async () => {
    const b = bridge({ ok: true, data: { id: 'agent_1' } })
    expect(await new IpcClient(b).request('agents.retrieve', { id: 'agent_1' })).toEqual({ id: 'agent_1' })
    expect(b.calls[0]).toEqual(['agents.retrieve', { id: 'agent_1' }, undefined])
  })

  it('raises the main side\'s error result as an ApiError', async () => {
    const b = bridge({ ok: false, status: 400, error: { type: 'invalid_request_error', message: 'name: Too small' } })
    await expect(new IpcClient(b).request('agents.create', {}, { name: '' })).rejects.toMatchObject({ status: 400, type: 'invalid_request_error', message: 'name: Too small' })
  })

  it('unsubscribes a stream that was disposed before it finished opening, and delivers nothing after', async () => {
    const unsubscribe = vi.fn()
    let deliver: ((m: StreamMessage) => void) | undefined
    let open: (() => void) | undefined
    const b = bridge({ ok: true, data: null }, (listener) => {
      deliver = listener
      return new Promise((resolve) => (open = () => resolve({ ok: true, data: { unsubscribe } })))
    })
    const got: StreamMessage[] = []
    const stop = new IpcClient(b).stream('sesn_1', {}, (m) => got.push(m))
    stop()
    open!()
    await new Promise((r) => setTimeout(r, 0))
    deliver!({ kind: 'event', seq: 1, event: { id: 'sevt_1', type: 'user.message', content: [] } as never })
    expect(unsubscribe).toHaveBeenCalledTimes(1)
    expect(got).toEqual([])
  })

  it("delivers on a thread's stream only the events logged on that thread", async () => {
    let deliver: ((m: StreamMessage) => void) | undefined
    const b = bridge({ ok: true, data: null }, async (listener) => {
      deliver = listener
      return { ok: true, data: { unsubscribe: () => {} } }
    })
    const got: string[] = []
    const stop = new IpcClient(b).stream('sesn_1', { thread: 'sthr_a' }, (m) => got.push(m.kind === 'event' ? m.event.id : m.preview.type))
    await new Promise((r) => setTimeout(r, 0))
    deliver!({ kind: 'event', seq: 1, event: { id: 'sevt_primary', type: 'agent.message', content: [] } as never })
    deliver!({ kind: 'event', seq: 2, event: { id: 'sevt_a', type: 'agent.message', content: [], session_thread_id: 'sthr_a' } as never })
    deliver!({ kind: 'event', seq: 3, event: { id: 'sevt_b', type: 'agent.message', content: [], session_thread_id: 'sthr_b' } as never })
    stop()
    expect(got).toEqual(['sevt_a'])
  })

  it("delivers on the session's stream the primary's events and only the primary-visible ones of its children, as the HTTP stream does", async () => {
    let deliver: ((m: StreamMessage) => void) | undefined
    const b = bridge({ ok: true, data: null }, async (listener) => {
      deliver = listener
      return { ok: true, data: { unsubscribe: () => {} } }
    })
    const got: string[] = []
    const stop = new IpcClient(b).stream('sesn_1', {}, (m) => got.push(m.kind === 'event' ? m.event.id : m.preview.type))
    await new Promise((r) => setTimeout(r, 0))
    const send = (seq: number, event: Record<string, unknown>) => deliver!({ kind: 'event', seq, event: event as never })
    send(1, { id: 'sevt_primary', type: 'agent.message', content: [] })
    send(2, { id: 'sevt_child_msg', type: 'agent.message', content: [], session_thread_id: 'sthr_a' })
    send(3, { id: 'sevt_child_ask', type: 'agent.tool_use', name: 'bash', input: {}, evaluated_permission: 'ask', session_thread_id: 'sthr_a' })
    send(4, { id: 'sevt_child_allowed', type: 'agent.tool_use', name: 'bash', input: {}, evaluated_permission: 'allow', session_thread_id: 'sthr_a' })
    send(5, { id: 'sevt_child_idle', type: 'session.thread_status_idle', session_thread_id: 'sthr_a', stop_reason: { type: 'end_turn' } })
    stop()
    expect(got).toEqual(['sevt_primary', 'sevt_child_ask', 'sevt_child_idle'])
  })
})
