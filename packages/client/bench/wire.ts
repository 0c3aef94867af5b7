/**
 * The wire meter both clients send through: a fetch that counts requests and records, for each, when it was sent
 * and when its answer (status and headers) arrived. "Time in HTTP" is the union of those intervals, so that
 * overlapping requests count once; "time outside HTTP" is the wall time of the flow minus that union: what the
 * client (and the scripted user, the same code for both clients) spends between the servers' answers.
 */

export interface Exchange {
  readonly method: string
  readonly url: string
  readonly status: number
  /** performance.now() when fetch was called. */
  readonly sent: number
  /** performance.now() when the response's status and headers were in. */
  readonly answered: number
  /** The process's CPU time (user and system, microseconds) at that moment. */
  readonly cpu: number
}

export interface Wire {
  readonly fetch: typeof globalThis.fetch
  readonly exchanges: Array<Exchange>
}

/** CPU time of this process so far (user and system), in microseconds. */
export const cpuMicros = (): number => {
  const { user, system } = process.cpuUsage()
  return user + system
}

export const meter = (): Wire => {
  const exchanges: Array<Exchange> = []
  const metered = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const sent = performance.now()
    const request = input instanceof Request ? input : undefined
    const response = await globalThis.fetch(input, init)
    exchanges.push({
      method: init?.method ?? request?.method ?? "GET",
      url: request?.url ?? String(input),
      status: response.status,
      sent,
      answered: performance.now(),
      cpu: cpuMicros(),
    })
    return response
  }
  return { fetch: metered as typeof globalThis.fetch, exchanges }
}

/** Milliseconds covered by at least one of the intervals, clipped to [from, to]. */
export const covered = (intervals: ReadonlyArray<readonly [number, number]>, from: number, to: number): number => {
  const sorted = intervals
    .map(([a, b]) => [Math.max(a, from), Math.min(b, to)] as const)
    .filter(([a, b]) => b > a)
    .sort((x, y) => x[0] - y[0])
  let total = 0
  let end = Number.NEGATIVE_INFINITY
  for (const [a, b] of sorted) {
    if (b <= end) continue
    total += b - Math.max(a, end)
    end = b
  }
  return total
}

/**
 * The figures of one flow: from `start` (performance.now()) to the first 2xx answer of an MCP request, and the CPU
 * time the process spent meanwhile (from `startCpu`, {@link cpuMicros}), which a loaded machine disturbs less than
 * wall time.
 */
export const figures = (wire: Wire, start: number, startCpu: number, mcpUrl: string) => {
  const done = wire.exchanges.find((e) => e.url === mcpUrl && e.status >= 200 && e.status < 300)
  if (done === undefined) throw new Error("no successful MCP request was recorded")
  const flow = wire.exchanges.filter((e) => e.sent >= start && e.answered <= done.answered)
  const wall = done.answered - start
  const inHttp = covered(
    flow.map((e) => [e.sent, e.answered] as const),
    start,
    done.answered,
  )
  return {
    requests: flow.length,
    wallMs: wall,
    httpMs: inHttp,
    outsideMs: wall - inHttp,
    cpuMs: (done.cpu - startCpu) / 1000,
    /** From the process's start (performance.now() counts from it): module loading and everything else included. */
    fromProcessStartMs: done.answered,
    /** CPU time of the process from its start to that answer. */
    processCpuMs: done.cpu / 1000,
    trace: flow.map((e) => `${e.method} ${new URL(e.url).pathname} ${e.status}`),
    timeline:
      process.env.BENCH_TIMELINE === undefined
        ? undefined
        : flow.map(
            (e) => `${(e.sent - start).toFixed(1)}-${(e.answered - start).toFixed(1)} ${new URL(e.url).pathname}`,
          ),
  }
}

export type Figures = ReturnType<typeof figures>
