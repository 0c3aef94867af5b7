import { Effect } from "effect"
import { z } from "zod"
import type { AuthorizationServerExtension } from "../../src/Extension.js"

/**
 * A made-up extension through the client metadata and confirmation seams: clients register a tier (and limits), which
 * every token response reports in `Example-Tier`; a token request with an `Example-Key` header binds its access token
 * to that key (`cnf.example_key`), a token of type `Example`.
 */
export const exampleExtension: AuthorizationServerExtension = {
  id: "example/tiers",
  clientMetadata: {
    example_tier: z.enum(["gold", "silver"], { error: "must be gold or silver" }),
    example_limits: z.object({ level: z.number({ error: "must be a number" }) }, { error: "must be an object" }),
  },
  confirmations: { example_key: "Example" },
  tokenRequest: ({ request, client }) => {
    const key = request.headers.get("example-key")
    const tier = client?.extension_metadata?.example_tier
    return Effect.succeed({
      headers: { "example-tier": typeof tier === "string" ? tier : "none" },
      ...(key === null ? {} : { claims: { cnf: { example_key: key } }, tokenType: "Example" }),
    })
  },
}
