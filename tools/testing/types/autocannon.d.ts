// The subset of autocannon's programmatic API the benchmarks' load processes use (the package ships no types);
// included by the tsconfig.test.json of each package with a bench/ that drives autocannon.
declare module "autocannon" {
  interface RequestParams {
    headers?: Record<string, string>
    [key: string]: unknown
  }
  interface Options {
    url: string
    connections?: number
    duration?: number
    pipelining?: number
    headers?: Record<string, string>
    method?: string
    body?: string
    requests?: Array<Request>
  }
  /**
   * One request of a connection's sequence; `context` is the connection's own object, kept across its requests
   * (autocannon's `setupRequest` and `onResponse` hooks).
   */
  interface Request {
    method?: string
    path?: string
    headers?: Record<string, string>
    body?: string
    // Method syntax: each bench gives the connection's context a shape of its own.
    setupRequest?(request: RequestParams, context: unknown): RequestParams
    onResponse?(
      status: number,
      body: string,
      context: unknown,
      headers: Record<string, string | Array<string> | undefined>,
    ): void
  }
  interface Histogram {
    average: number
    mean: number
    p50: number
    p99: number
    total: number
  }
  interface Result {
    requests: Histogram
    latency: Histogram
    errors: number
    non2xx: number
    timeouts: number
    "2xx": number
    statusCodeStats: Readonly<Record<string, { readonly count: number }>>
  }
  function autocannon(options: Options): Promise<Result>
  export default autocannon
}
