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
    requests?: Array<{ setupRequest?: (request: RequestParams) => RequestParams }>
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
  }
  function autocannon(options: Options): Promise<Result>
  export default autocannon
}
