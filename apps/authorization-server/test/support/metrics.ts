/** `keyway_tokens_issued_total` of a scrape of `metricsUrl`: each `grant_type` label with its count. */
export const tokensIssued = async (metricsUrl: string): Promise<Record<string, number>> => {
  const text = await (await fetch(metricsUrl)).text()
  const counts: Record<string, number> = {}
  for (const [, grantType = "", value = ""] of text.matchAll(
    /^keyway_tokens_issued_total\{grant_type="([^"]*)"\} (\S+)$/gm,
  )) {
    counts[grantType] = Number(value)
  }
  return counts
}
