/**
 * The load generator of bench/soak.ts, in a process of its own: a bounded number of requests (every HTTP request
 * sent to either server counts once), at most `concurrency` at a time, loopback only. It reads each server's resident
 * memory (`VmRSS` in `/proc/<pid>/status`) every `sampleEvery` requests as it is, and every `pauseEvery` requests it
 * also lets everything in flight finish, reads it again, waits `idleMs` with nothing sent and reads it a third time.
 *
 * Input: the plan as JSON on standard input. Output: one JSON line per event on stdout (`sample`, `progress`, `done`).
 *
 * The mix (weights per operation; an operation is one or more requests):
 * - a complete authorization-code flow with PKCE: the authorization request, the login page's form with its CSRF
 *   token, the consent page and its form, the code redeemed (five requests), for a pre-registered or a dynamically
 *   registered public client, for both scopes or for `notes:read` only;
 * - a refresh (the refresh token rotated; now and then a rotated-out one presented again: reuse detection);
 * - MCP tool calls with an access token (`list_notes`, `read_note`, `write_note`, `delete_note`, `tools/list`,
 *   `initialize`), writes and deletes balanced so the notebooks stay small;
 * - bad requests to the MCP server (no token, garbage, forged and foreign JWTs, a read-only token writing, malformed
 *   JSON-RPC, a token in the query, unknown paths and methods) and to the authorization server (malformed token
 *   requests, unknown clients, made-up codes and refresh tokens, malformed registrations, wrong passwords from made-up
 *   addresses, forms without CSRF tokens, client ID metadata document URLs that must not be fetched);
 * - hostile requests on raw connections (`hostileRequests` of @keyway/testing: bad Host lines and request-targets,
 *   forbidden methods, broken and oversized bodies and header sections), and valid requests under made-up Host names;
 * - metadata fetches (authorization server metadata, JWKS, protected resource metadata, CORS preflights, health);
 * - dynamic registrations.
 * Made-up values (client IDs, usernames, addresses, Host names) are fresh on every request, some beginning with `-`,
 * so that anything keyed by what a stranger sends would grow with the count.
 */
import { createHash, generateKeyPairSync, randomBytes } from "node:crypto"
import { readFileSync } from "node:fs"
import { hostileRequests, rawRequest, unauthenticated } from "@keyway/testing/raw"
import { SignJWT } from "jose"

export interface Plan {
  readonly issuer: string
  /** The MCP endpoint (the resource). */
  readonly mcp: string
  readonly asPid: number
  readonly mcpPid: number
  readonly total: number
  readonly sampleEvery: number
  readonly pauseEvery: number
  readonly idleMs: number
  readonly concurrency: number
  readonly seed: number
  /** Users whose sign-ins succeed. */
  readonly users: ReadonlyArray<{ readonly username: string; readonly password: string }>
  /** A pre-registered public client. */
  readonly clientId: string
  readonly redirectUri: string
  /** The /24 good sign-ins come from (`X-Real-IP`, the header the authorization server is told to trust), e.g. `192.0.2`. */
  readonly goodAddresses: string
}

let input = ""
for await (const chunk of process.stdin) input += (chunk as Buffer).toString("utf8")
const plan = JSON.parse(input) as Plan
const asOrigin = new URL(plan.issuer).origin
const asPort = Number(new URL(plan.issuer).port)
const mcpUrl = new URL(plan.mcp)
const mcpPort = Number(mcpUrl.port)

// A small seeded generator (mulberry32), so that a run can be repeated with the same choices.
let seed = plan.seed >>> 0
const random = (): number => {
  seed = (seed + 0x6d2b79f5) >>> 0
  let t = seed
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
const pick = <A>(items: ReadonlyArray<A>): A => items[Math.floor(random() * items.length)] as A
const chance = (p: number): boolean => random() < p
/** A made-up value: fresh every time, now and then beginning with `-` or holding characters worth escaping. */
const madeUp = (prefix: string): string => {
  const core = randomBytes(9).toString("base64url")
  const r = random()
  return r < 0.15 ? `-${core}` : r < 0.25 ? `${prefix}-é ${core}"<>` : `${prefix}-${core}`
}
const madeUpAddress = (): string =>
  chance(0.2)
    ? `2001:db8::${Math.floor(random() * 65536).toString(16)}`
    : `10.${Math.floor(random() * 256)}.${Math.floor(random() * 256)}.${Math.floor(random() * 256)}`

// ---- counting, sampling and pausing ----

/** Thrown by `send` once the plan's count is reached: the operation in progress stops there. */
class Done extends Error {}

let sent = 0
let inflight = 0
let gate: Promise<void> | undefined
let drained: (() => void) | undefined
const statuses = new Map<string, number>()
const unexpected = new Map<string, { count: number; example: string }>()
const started = performance.now()

const rssOf = (pid: number): number => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1]
  if (kb === undefined) throw new Error(`no VmRSS for process ${pid}`)
  return Number(kb) / 1024
}
/**
 * Where a process's resident memory is, from `/proc/<pid>/smaps`: `[heap]`, the program break, where glibc's malloc
 * keeps its main arena (what C++ code, Node's buffers and SQLite allocate on the main thread); mappings of files (the
 * node binary, shared libraries, the database's shared memory); and the rest, anonymous mappings (V8's heap pages,
 * the malloc arenas of other threads, stacks).
 */
const partsOf = (pid: number): { readonly brk: number; readonly files: number; readonly anonymous: number } => {
  let brk = 0
  let files = 0
  let anonymous = 0
  let name = ""
  for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
    const mapping = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line)
    if (mapping !== null) {
      name = mapping[1] ?? ""
      continue
    }
    const rss = /^Rss:\s+(\d+) kB$/.exec(line)?.[1]
    if (rss === undefined) continue
    const mb = Number(rss) / 1024
    if (name === "[heap]") brk += mb
    else if (name.startsWith("/")) files += mb
    else anonymous += mb
  }
  return { brk, files, anonymous }
}
const emit = (event: object) => process.stdout.write(`${JSON.stringify(event)}\n`)
const sample = (requests: number, kind: "running" | "drained" | "idle") =>
  emit({
    type: "sample",
    kind,
    requests,
    seconds: (performance.now() - started) / 1000,
    as: rssOf(plan.asPid),
    mcp: rssOf(plan.mcpPid),
    asParts: partsOf(plan.asPid),
    mcpParts: partsOf(plan.mcpPid),
  })

const pause = async (at: number): Promise<void> => {
  if (inflight > 0) await new Promise<void>((resolve) => (drained = resolve))
  sample(at, "drained")
  await new Promise((resolve) => setTimeout(resolve, plan.idleMs))
  sample(at, "idle")
}

/**
 * Every request goes through here: counted, held while a pause is on, stopped at the plan's count. The request that
 * completes a `pauseEvery` starts the pause: no request starts after it until those before it and itself have been
 * answered and the servers have idled.
 */
const send = async <A>(run: () => Promise<A>): Promise<A> => {
  while (gate !== undefined) await gate
  if (sent >= plan.total) throw new Done()
  const at = ++sent
  inflight++
  if (at % plan.sampleEvery === 0) sample(at, "running")
  if (at % 1000 === 0) emit({ type: "progress", requests: at, seconds: (performance.now() - started) / 1000 })
  if (at % plan.pauseEvery === 0) {
    gate = pause(at).finally(() => {
      gate = undefined
    })
  }
  try {
    return await run()
  } finally {
    inflight--
    if (inflight === 0 && drained !== undefined) {
      const resolve = drained
      drained = undefined
      resolve()
    }
  }
}

/** Records an answer's status; one outside `expected` (or any 5xx) is reported at the end with an example. */
const check = (server: "as" | "mcp", what: string, status: number, expected: ReadonlyArray<number> | "4xx") => {
  const key = `${server} ${status}`
  statuses.set(key, (statuses.get(key) ?? 0) + 1)
  // No list holds a 5xx but the 501 of a method no server implements.
  const ok = expected === "4xx" ? status >= 400 && status < 500 : expected.includes(status)
  if (!ok) {
    const name = `${server} ${what}: ${status}`
    const seen = unexpected.get(name)
    if (seen === undefined) unexpected.set(name, { count: 1, example: what })
    else seen.count++
  }
  return ok
}

const TIMEOUT_MS = 30_000

interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly text: string
}

const http = (
  server: "as" | "mcp",
  what: string,
  url: string | URL,
  init: RequestInit,
  expected: ReadonlyArray<number> | "4xx",
): Promise<Answer> =>
  send(async () => {
    let response: Response
    try {
      response = await fetch(url, { redirect: "manual", signal: AbortSignal.timeout(TIMEOUT_MS), ...init })
    } catch (error) {
      check(server, `${what} (${(error as Error).message})`, 0, expected)
      return { status: 0, headers: new Headers(), text: "" }
    }
    const text = await response.text()
    check(server, what, response.status, expected)
    return { status: response.status, headers: response.headers, text }
  })

const raw = (server: "as" | "mcp", what: string, request: string, expected: number, endAfterWrite?: boolean) =>
  send(async () => {
    const answer = await rawRequest(server === "as" ? asPort : mcpPort, request, {
      ...(endAfterWrite === true ? { endAfterWrite } : {}),
      timeoutMs: TIMEOUT_MS,
    })
    check(server, what, answer.status, [expected])
  })

// ---- shared state: clients, tokens, notes (each bounded) ----

const POOL = 64
const clients: Array<string> = [plan.clientId]
const remember = <A>(pool: Array<A>, value: A) => {
  pool.push(value)
  if (pool.length > POOL) pool.splice(Math.floor(random() * (pool.length - 1)), 1)
}

interface Tokens {
  readonly access: string
  readonly refresh: string
  readonly clientId: string
  readonly user: string
  readonly write: boolean
}
const tokens: Array<Tokens> = []
/** Refresh tokens rotated out, for reuse detection. */
const rotatedOut: Array<{ readonly refresh: string; readonly clientId: string }> = []
/** Note IDs per user, as write_note answered them. */
const notes = new Map<string, Array<string>>(plan.users.map((u) => [u.username, []]))

const form = (values: Record<string, string>, headers: Record<string, string> = {}): RequestInit => ({
  method: "POST",
  headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
  body: new URLSearchParams(values).toString(),
})
const json = (value: unknown, headers: Record<string, string> = {}): RequestInit => ({
  method: "POST",
  headers: { "content-type": "application/json", ...headers },
  body: typeof value === "string" ? value : JSON.stringify(value),
})
const cookieOf = (answer: Answer): string | undefined => answer.headers.getSetCookie()[0]?.split(";")[0]
const csrfOf = (html: string): string | undefined => /name="csrf_token" value="([^"]+)"/.exec(html)?.[1]
const pkce = () => {
  const verifier = randomBytes(32).toString("base64url")
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") }
}

// ---- operations ----

let flows = 0
/** The authorization-code flow with PKCE, driven over plain HTTP as the scripted test user does. */
const flow = async (): Promise<void> => {
  const clientId = pick(clients)
  const user = pick(plan.users)
  const write = chance(0.8)
  const { verifier, challenge } = pkce()
  const query = new URLSearchParams({
    response_type: "code",
    client_id: clientId,
    redirect_uri: plan.redirectUri,
    scope: write ? "notes:read notes:write" : "notes:read",
    state: randomBytes(8).toString("base64url"),
    code_challenge: challenge,
    code_challenge_method: "S256",
    resource: plan.mcp,
  }).toString()
  // Sign-ins that succeed, each flow from the next of 200 addresses: the login limit per address counts an attempt
  // when it starts and gives it back when it succeeds, so many concurrent sign-ins from one address would lock it.
  const address = { "x-real-ip": `${plan.goodAddresses}.${(flows++ % 200) + 1}` }
  const first = await http("as", "GET /authorize", `${asOrigin}/authorize?${query}`, { headers: address }, [200])
  const csrf = csrfOf(first.text)
  if (first.status !== 200 || csrf === undefined) return
  let cookie = cookieOf(first) ?? ""
  const login = await http(
    "as",
    "POST /authorize/login",
    `${asOrigin}/authorize/login`,
    form(
      { csrf_token: csrf, request: query, username: user.username, password: user.password },
      { cookie, origin: asOrigin, ...address },
    ),
    [303],
  )
  if (login.status !== 303) return
  cookie = cookieOf(login) ?? cookie
  const consentPage = await http(
    "as",
    "GET consent page",
    new URL(login.headers.get("location") ?? "", asOrigin),
    { headers: { cookie, ...address } },
    [200],
  )
  const consentCsrf = csrfOf(consentPage.text)
  if (consentCsrf === undefined) return
  const consent = await http(
    "as",
    "POST /authorize/consent",
    `${asOrigin}/authorize/consent`,
    form({ csrf_token: consentCsrf, request: query, decision: "approve" }, { cookie, origin: asOrigin, ...address }),
    [303],
  )
  const code = URL.parse(consent.headers.get("location") ?? "")?.searchParams.get("code")
  if (code === null || code === undefined) return
  const token = await http(
    "as",
    "POST /token (code)",
    `${asOrigin}/token`,
    form({
      grant_type: "authorization_code",
      code,
      code_verifier: verifier,
      redirect_uri: plan.redirectUri,
      client_id: clientId,
      resource: plan.mcp,
    }),
    [200],
  )
  if (token.status !== 200) return
  const body = JSON.parse(token.text) as { access_token: string; refresh_token: string }
  remember(tokens, { access: body.access_token, refresh: body.refresh_token, clientId, user: user.username, write })
}

const refresh = async (): Promise<void> => {
  if (chance(0.05) && rotatedOut.length > 0) {
    // A rotated-out refresh token presented again: refused, and its family revoked.
    const old = rotatedOut.splice(Math.floor(random() * rotatedOut.length), 1)[0]!
    await http(
      "as",
      "POST /token (rotated-out refresh token)",
      `${asOrigin}/token`,
      form({ grant_type: "refresh_token", refresh_token: old.refresh, client_id: old.clientId, resource: plan.mcp }),
      // Within `refreshTokenReuseInterval` (60 s) of its rotation it is still answered (a client's retry).
      [200, 400],
    )
    return
  }
  if (tokens.length === 0) return flow()
  // Taken out of the pool while in use, so no two requests rotate the same token.
  const held = tokens.splice(Math.floor(random() * tokens.length), 1)[0]!
  const answer = await http(
    "as",
    "POST /token (refresh)",
    `${asOrigin}/token`,
    form({ grant_type: "refresh_token", refresh_token: held.refresh, client_id: held.clientId, resource: plan.mcp }),
    // A family revoked by reuse detection meanwhile answers invalid_grant.
    [200, 400],
  )
  if (answer.status !== 200) return
  const body = JSON.parse(answer.text) as { access_token: string; refresh_token: string }
  remember(rotatedOut, { refresh: held.refresh, clientId: held.clientId })
  remember(tokens, { ...held, access: body.access_token, refresh: body.refresh_token })
}

let rpcId = 0
const rpc = (method: string, params: object) => ({ jsonrpc: "2.0", id: ++rpcId, method, params })
const mcpPost = (what: string, token: string | undefined, body: unknown, expected: ReadonlyArray<number> | "4xx") =>
  http(
    "mcp",
    what,
    mcpUrl,
    json(body, {
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2025-11-25",
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
    }),
    expected,
  )

const toolCall = async (): Promise<void> => {
  const held = tokens.length === 0 ? undefined : pick(tokens)
  if (held === undefined) return flow()
  const mine = notes.get(held.user) ?? []
  // Access tokens live 300 s: one the pool kept longer is answered 401 (invalid_token, expired).
  const ok = [200, 401]
  const r = random()
  if (r < 0.1) {
    await mcpPost(
      "initialize",
      held.access,
      rpc("initialize", {
        protocolVersion: "2025-11-25",
        capabilities: {},
        clientInfo: { name: madeUp("soak"), version: "1.0.0" },
      }),
      ok,
    )
  } else if (r < 0.2) {
    await mcpPost("tools/list", held.access, rpc("tools/list", {}), ok)
  } else if (held.write && (mine.length < 4 || (r < 0.55 && mine.length < 16))) {
    const answer = await mcpPost(
      "write_note",
      held.access,
      rpc("tools/call", {
        name: "write_note",
        arguments: { title: madeUp("title"), text: randomBytes(96).toString("base64") },
      }),
      ok,
    )
    const id = /Saved note #(\d+)\./.exec(answer.text)?.[1]
    if (id !== undefined) mine.push(id)
  } else if (held.write && mine.length > 0 && r < 0.75) {
    // Out of the list while being deleted; back in when the token had expired and the note is still there.
    const id = mine.splice(Math.floor(random() * mine.length), 1)[0]!
    const answer = await mcpPost(
      "delete_note",
      held.access,
      rpc("tools/call", { name: "delete_note", arguments: { id } }),
      ok,
    )
    if (answer.status !== 200) mine.push(id)
  } else if (mine.length > 0 && r < 0.85) {
    await mcpPost("read_note", held.access, rpc("tools/call", { name: "read_note", arguments: { id: pick(mine) } }), ok)
  } else {
    await mcpPost("list_notes", held.access, rpc("tools/call", { name: "list_notes", arguments: {} }), ok)
  }
}

// Tokens no authorization server of this run signed: the right issuer and audience under keys of the load generator.
const forger = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey
let realKid = "unknown"
const forged = (kid: string, iss: string) =>
  new SignJWT({ scope: "notes:read notes:write", client_id: plan.clientId })
    .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid })
    .setIssuer(iss)
    .setAudience(plan.mcp)
    .setSubject(plan.users[0]!.username)
    .setIssuedAt()
    .setExpirationTime("5m")
    .setJti(randomBytes(12).toString("base64url"))
    .sign(forger)

const badMcp = async (): Promise<void> => {
  const held = tokens.length === 0 ? undefined : pick(tokens)
  const call = rpc("tools/call", { name: "list_notes", arguments: {} })
  const variant = Math.floor(random() * 14)
  switch (variant) {
    case 0:
      await mcpPost("no token", undefined, call, [401])
      return
    case 1:
      await mcpPost("garbage token", madeUp("garbage"), call, [400, 401])
      return
    case 2:
      await mcpPost("forged JWT, made-up kid", await forged(madeUp("kid"), plan.issuer), call, [401])
      return
    case 3:
      await mcpPost("forged JWT, the server's kid", await forged(realKid, plan.issuer), call, [401])
      return
    case 4:
      await mcpPost(
        "JWT of a made-up issuer",
        await forged(madeUp("kid"), `https://${madeUp("iss")}.example`),
        call,
        [401],
      )
      return
    case 5:
      await http("mcp", "Basic credentials", mcpUrl, json(call, { authorization: `Basic ${madeUp("basic")}` }), [401])
      return
    case 6:
      if (held === undefined || held.write) {
        await mcpPost("write_note with no token", undefined, rpc("tools/call", { name: "write_note" }), [401])
      } else {
        await mcpPost(
          "write_note with a read-only token",
          held.access,
          rpc("tools/call", { name: "write_note", arguments: { title: "t", text: "x" } }),
          [403, 401],
        )
      }
      return
    case 7:
      await mcpPost("malformed JSON", held?.access, `{"jsonrpc":"2.0","id":${madeUp("x")}`, "4xx")
      return
    case 8:
      await mcpPost(
        "unknown tool",
        held?.access,
        rpc("tools/call", { name: madeUp("tool"), arguments: {} }),
        [200, 401],
      )
      return
    case 9:
      await http(
        "mcp",
        "token in the query",
        `${plan.mcp}?access_token=${encodeURIComponent(held?.access ?? madeUp("t"))}`,
        json(call),
        "4xx",
      )
      return
    case 10:
      await http(
        "mcp",
        "unknown path",
        `${mcpUrl.origin}/${encodeURIComponent(madeUp("path"))}`,
        { method: "GET" },
        [401, 404],
      )
      return
    case 11:
      await http(
        "mcp",
        "GET /mcp",
        mcpUrl,
        { headers: { authorization: `Bearer ${held?.access ?? madeUp("t")}`, accept: "text/event-stream" } },
        "4xx",
      )
      return
    case 12:
      await mcpPost(
        "a batch of unknown methods",
        held?.access,
        [rpc(madeUp("m"), {}), rpc(madeUp("m"), {})],
        [200, 400, 401],
      )
      return
    default:
      await http(
        "mcp",
        "many made-up headers",
        mcpUrl,
        json(call, {
          ...Object.fromEntries(Array.from({ length: 40 }, () => [`x-${randomBytes(6).toString("hex")}`, madeUp("v")])),
          ...(held === undefined ? {} : { authorization: `Bearer ${held.access}` }),
          "mcp-protocol-version": madeUp("v"),
          "mcp-session-id": madeUp("s"),
          cookie: `a=${madeUp("c")}; b=${randomBytes(512).toString("hex")}`,
        }),
        [200, 400, 401, 404, 406],
      )
  }
}

const badAs = async (): Promise<void> => {
  const client = pick(clients)
  const variant = Math.floor(random() * 16)
  const token = `${asOrigin}/token`
  switch (variant) {
    case 0:
      await http("as", "token request in JSON", token, json({ grant_type: "refresh_token" }), [400])
      return
    case 1:
      await http(
        "as",
        "token request of an unknown client",
        token,
        form({ grant_type: "authorization_code", code: madeUp("code"), client_id: madeUp("client") }),
        [400, 401],
      )
      return
    case 2:
      await http(
        "as",
        "made-up refresh token",
        token,
        form({ grant_type: "refresh_token", refresh_token: madeUp("rt"), client_id: client }),
        [400],
      )
      return
    case 3:
      await http(
        "as",
        "made-up code",
        token,
        form({
          grant_type: "authorization_code",
          code: madeUp("code"),
          code_verifier: randomBytes(32).toString("base64url"),
          redirect_uri: plan.redirectUri,
          client_id: client,
        }),
        [400],
      )
      return
    case 4:
      await http("as", "unsupported grant type", token, form({ grant_type: madeUp("grant"), client_id: client }), [400])
      return
    case 5:
      await http(
        "as",
        "broken form encoding",
        token,
        {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: "a=%&&=%zz&grant_type",
        },
        [400, 401],
      )
      return
    case 6:
      await http(
        "as",
        "authorization request of an unknown client",
        `${asOrigin}/authorize?${new URLSearchParams({ response_type: "code", client_id: madeUp("client"), redirect_uri: plan.redirectUri })}`,
        {},
        [400],
      )
      return
    case 7:
      await http(
        "as",
        "authorization request with a foreign redirect URI",
        `${asOrigin}/authorize?${new URLSearchParams({ response_type: "code", client_id: client, redirect_uri: `https://${madeUp("r")}.example/cb` })}`,
        {},
        [400],
      )
      return
    case 8:
      await http(
        "as",
        "client ID metadata document on a special-use address",
        `${asOrigin}/authorize?${new URLSearchParams({ response_type: "code", client_id: `https://127.0.0.1/${randomBytes(6).toString("hex")}`, redirect_uri: plan.redirectUri })}`,
        {},
        [400, 429],
      )
      return
    case 9:
      await http(
        "as",
        "malformed registration",
        `${asOrigin}/register`,
        json(`{"redirect_uris":[${madeUp("x")}`),
        [400],
      )
      return
    case 10:
      await http(
        "as",
        "registration with an http redirect URI",
        `${asOrigin}/register`,
        json({ redirect_uris: [`http://${madeUp("h").replace(/[^a-z0-9-]/gi, "")}.example/cb`] }),
        [400],
      )
      return
    case 11: {
      // A wrong password for a made-up account from a made-up address, through the login form with its CSRF token:
      // a fresh bucket of each login limit (per account, per address).
      const address = { "x-real-ip": madeUpAddress() }
      const query = new URLSearchParams({
        response_type: "code",
        client_id: client,
        redirect_uri: plan.redirectUri,
        scope: "notes:read",
        state: randomBytes(8).toString("base64url"),
        code_challenge: pkce().challenge,
        code_challenge_method: "S256",
        resource: plan.mcp,
      }).toString()
      const page = await http(
        "as",
        "GET /authorize (wrong password)",
        `${asOrigin}/authorize?${query}`,
        {
          headers: address,
        },
        [200],
      )
      const csrf = csrfOf(page.text)
      if (csrf === undefined) return
      await http(
        "as",
        "wrong password",
        `${asOrigin}/authorize/login`,
        form(
          { csrf_token: csrf, request: query, username: madeUp("user"), password: madeUp("pw") },
          { origin: asOrigin, cookie: cookieOf(page) ?? "", ...address },
        ),
        // The login page again with its error, or 429 once a limit is reached.
        [200, 401, 429],
      )
      return
    }
    case 12:
      await http(
        "as",
        "consent without a session",
        `${asOrigin}/authorize/consent`,
        form({ decision: "approve", request: "" }, { origin: `https://${madeUp("o")}.example` }),
        "4xx",
      )
      return
    case 13:
      await http(
        "as",
        "revocation of a made-up token",
        `${asOrigin}/revoke`,
        form({ token: madeUp("t"), client_id: client }),
        [200, 400],
      )
      return
    case 14:
      await http(
        "as",
        "introspection without credentials",
        `${asOrigin}/introspect`,
        form({ token: madeUp("t") }),
        [401],
      )
      return
    default:
      await http(
        "as",
        "account page with a made-up session",
        `${asOrigin}/account`,
        { headers: { cookie: `keyway_session=${madeUp("s")}; other=${randomBytes(256).toString("hex")}` } },
        [200],
      )
  }
}

const asHostile = hostileRequests("/token")
const mcpHostile = hostileRequests("/mcp").map(unauthenticated)

const hostile = async (): Promise<void> => {
  const r = random()
  if (r < 0.3) {
    // A valid request under a made-up Host name: Host is checked, never used to build URLs.
    const host = `${randomBytes(5).toString("hex")}.example:${1 + Math.floor(random() * 65535)}`
    const asSide = chance(0.5)
    await raw(
      asSide ? "as" : "mcp",
      "GET metadata under a made-up Host",
      `GET ${asSide ? "/.well-known/oauth-authorization-server" : "/.well-known/oauth-protected-resource/mcp"} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
      200,
    )
    return
  }
  const asSide = r < 0.65
  const c = pick(asSide ? asHostile : mcpHostile)
  await raw(asSide ? "as" : "mcp", `raw: ${c.name}`, c.request, c.status, c.endAfterWrite)
}

let jwksUri = `${asOrigin}/jwks`
const metadata = async (): Promise<void> => {
  const r = Math.floor(random() * 8)
  switch (r) {
    case 0: {
      const answer = await http("as", "AS metadata", `${asOrigin}/.well-known/oauth-authorization-server`, {}, [200])
      jwksUri = (JSON.parse(answer.text) as { jwks_uri?: string }).jwks_uri ?? jwksUri
      return
    }
    case 1: {
      const answer = await http("as", "JWKS", jwksUri, {}, [200])
      realKid = (JSON.parse(answer.text) as { keys: Array<{ kid: string }> }).keys[0]?.kid ?? realKid
      return
    }
    case 2:
      await http("as", "OpenID configuration", `${asOrigin}/.well-known/openid-configuration`, {}, [200, 404])
      return
    case 3:
      await http(
        "mcp",
        "protected resource metadata",
        `${mcpUrl.origin}/.well-known/oauth-protected-resource/mcp`,
        {},
        [200],
      )
      return
    case 4:
      await http(
        "mcp",
        "CORS preflight",
        mcpUrl,
        {
          method: "OPTIONS",
          headers: {
            origin: `https://${randomBytes(5).toString("hex")}.example`,
            "access-control-request-method": "POST",
            "access-control-request-headers": "authorization, content-type, mcp-protocol-version",
          },
        },
        [204],
      )
      return
    case 5:
      await http("as", "health", `${asOrigin}/health/live`, {}, [200])
      return
    case 6:
      await http("mcp", "health", `${mcpUrl.origin}/health/live`, {}, [200])
      return
    default:
      await http(
        "as",
        "AS metadata with a made-up query",
        `${asOrigin}/.well-known/oauth-authorization-server?${encodeURIComponent(madeUp("q"))}=1`,
        {},
        [200],
      )
  }
}

const register = async (): Promise<void> => {
  const answer = await http(
    "as",
    "POST /register",
    `${asOrigin}/register`,
    json({
      client_name: madeUp("Soak client"),
      redirect_uris: [plan.redirectUri],
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      scope: "notes:read notes:write",
    }),
    [201],
  )
  if (answer.status === 201) remember(clients, (JSON.parse(answer.text) as { client_id: string }).client_id)
}

// Weights per operation; a flow is five requests, the others one.
const MIX: ReadonlyArray<readonly [number, () => Promise<void>]> = [
  [6, flow],
  [12, refresh],
  [40, toolCall],
  [12, badMcp],
  [14, badAs],
  [6, hostile],
  [16, metadata],
  [4, register],
]
const totalWeight = MIX.reduce((sum, [w]) => sum + w, 0)
const operation = (): (() => Promise<void>) => {
  let r = random() * totalWeight
  for (const [w, op] of MIX) {
    r -= w
    if (r < 0) return op
  }
  return MIX[0]![1]
}

sample(0, "idle")
await Promise.all(
  Array.from({ length: plan.concurrency }, async () => {
    for (;;) {
      try {
        await operation()()
      } catch (error) {
        if (error instanceof Done) return
        const name = `error: ${(error as Error).message}`
        const seen = unexpected.get(name)
        if (seen === undefined) unexpected.set(name, { count: 1, example: String((error as Error).stack) })
        else seen.count++
      }
    }
  }),
)
const elapsed = (performance.now() - started) / 1000
// The last request started the last pause when the count is a multiple of `pauseEvery`; otherwise pause here.
while (gate !== undefined) await gate
if (plan.total % plan.pauseEvery !== 0) await pause(plan.total)
emit({
  type: "done",
  requests: sent,
  seconds: elapsed,
  statuses: Object.fromEntries([...statuses].sort()),
  unexpected: Object.fromEntries(unexpected),
})
