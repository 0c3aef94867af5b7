import { Effect, Option } from "effect"
import {
  ClientAlreadyExists,
  ClientNotFound,
  CodeAlreadyUsed,
  CodeExpired,
  CodeNotFound,
  GrantNotFound,
  GrantRevoked,
  KeyAlreadyExists,
  KeyNotFound,
  NoSigningKey,
  RefreshTokenClientMismatch,
  RefreshTokenExpired,
  RefreshTokenNotFound,
  RefreshTokenReused,
  RefreshTokenRevoked,
} from "../Errors.js"
import type {
  AuthorizationCode,
  Client,
  ClientStore,
  Consent,
  Grant,
  GrantStore,
  KeyStore,
  RefreshToken,
  SigningKey,
} from "../Storage.js"
import {
  atomically,
  byAge,
  clientRecord,
  covers,
  defined,
  hashSecret,
  matchesHash,
  mergeConsent,
  pickCurrent,
  secretLive,
  updatedHash,
} from "./common.js"

// Every method body runs synchronously inside one `Effect.suspend`, so no other fiber can interleave: each call is
// atomic, which is what the SQL implementations get from transactions.

export const makeClientStore = (): ClientStore["Service"] => {
  const clients = new Map<string, Client>()
  const live = (clientId: string, now: number): Client | undefined => {
    const c = clients.get(clientId)
    return c === undefined || (c.expires_at !== undefined && c.expires_at <= now) ? undefined : c
  }
  return {
    get: (clientId, now) =>
      atomically(() => {
        const c = live(clientId, now)
        return c === undefined ? Effect.fail(new ClientNotFound({ client_id: clientId })) : Effect.succeed(c)
      }),
    create: (client) =>
      atomically(() => {
        if (clients.has(client.client_id)) return Effect.fail(new ClientAlreadyExists({ client_id: client.client_id }))
        const record = clientRecord(
          client,
          client.client_secret === undefined ? undefined : hashSecret(client.client_secret),
          client.registration_access_token === undefined ? undefined : hashSecret(client.registration_access_token),
        )
        clients.set(client.client_id, record)
        return Effect.succeed(record)
      }),
    update: (client) =>
      atomically(() => {
        const current = clients.get(client.client_id)
        if (current === undefined) return Effect.fail(new ClientNotFound({ client_id: client.client_id }))
        const record = clientRecord(
          client,
          updatedHash(client.client_secret, current.client_secret_hash),
          updatedHash(client.registration_access_token, current.registration_access_token_hash),
        )
        clients.set(client.client_id, record)
        return Effect.succeed(record)
      }),
    upsert: (client) =>
      Effect.sync(() => {
        const record = clientRecord(
          client,
          client.client_secret === undefined ? undefined : hashSecret(client.client_secret),
          client.registration_access_token === undefined ? undefined : hashSecret(client.registration_access_token),
        )
        clients.set(client.client_id, record)
        return record
      }),
    delete: (clientId) =>
      atomically(() =>
        clients.delete(clientId) ? Effect.void : Effect.fail(new ClientNotFound({ client_id: clientId })),
      ),
    list: (options) =>
      Effect.sync(() =>
        [...clients.values()]
          .filter((c) => options?.origin === undefined || c.origin === options.origin)
          .sort((a, b) => (a.client_id < b.client_id ? -1 : a.client_id > b.client_id ? 1 : 0)),
      ),
    verifySecret: (clientId, presented, now) =>
      atomically(() => {
        const c = clients.get(clientId)
        if (c === undefined) return Effect.fail(new ClientNotFound({ client_id: clientId }))
        const matches = matchesHash(presented, c.client_secret_hash)
        return Effect.succeed(matches && secretLive(c.client_secret_expires_at, now))
      }),
    verifyRegistrationAccessToken: (clientId, presented) =>
      atomically(() => {
        const c = clients.get(clientId)
        if (c === undefined) return Effect.fail(new ClientNotFound({ client_id: clientId }))
        return Effect.succeed(matchesHash(presented, c.registration_access_token_hash))
      }),
    purgeExpired: (now) =>
      Effect.sync(() => {
        let removed = 0
        for (const [id, c] of clients) {
          if (c.expires_at !== undefined && c.expires_at <= now) {
            clients.delete(id)
            removed++
          }
        }
        return removed
      }),
  }
}

interface MutableGrant {
  grant: Grant
  revoked_at: number | undefined
}

interface StoredCode {
  readonly record: AuthorizationCode
  consumed_at: number | undefined
}

interface Family {
  readonly grant_id: string
  revoked_at: number | undefined
}

interface StoredRefresh {
  readonly family_id: string
  readonly scope: string
  readonly issued_at: number
  readonly expires_at: number | undefined
  rotated_at: number | undefined
}

export const makeGrantStore = (): GrantStore["Service"] => {
  const grants = new Map<string, MutableGrant>()
  const codes = new Map<string, StoredCode>()
  const accessTokens = new Map<string, { readonly grant_id: string; readonly expires_at: number }>()
  const revokedAccess = new Map<string, number>()
  const families = new Map<string, Family>()
  const refresh = new Map<string, StoredRefresh>()
  const consents = new Map<string, Consent>()
  const assertionJtis = new Map<string, number>()

  const consentKey = (subject: string, clientId: string, resource: string) =>
    JSON.stringify([subject, clientId, resource])

  const grantView = (g: MutableGrant): Grant => defined<Grant>({ ...g.grant, revoked_at: g.revoked_at })

  const revoke = (grantId: string, now: number) => {
    const g = grants.get(grantId)
    if (g === undefined) return false
    g.revoked_at ??= now
    for (const f of families.values()) if (f.grant_id === grantId) f.revoked_at ??= now
    for (const [jti, t] of accessTokens) {
      if (t.grant_id === grantId && t.expires_at > now && !revokedAccess.has(jti)) revokedAccess.set(jti, t.expires_at)
    }
    return true
  }

  const refreshView = (r: StoredRefresh, f: Family): RefreshToken => {
    const g = grants.get(f.grant_id)?.grant
    return defined<RefreshToken>({
      family_id: r.family_id,
      grant_id: f.grant_id,
      client_id: g?.client_id ?? "",
      subject: g?.subject ?? "",
      resource: g?.resource ?? "",
      scope: r.scope,
      issued_at: r.issued_at,
      expires_at: r.expires_at,
    })
  }

  // The checks shared by getRefresh and rotate, in order: unknown, reuse (revokes), revoked family, expired.
  const presentRefresh = (
    token: string,
    now: number,
  ):
    | { readonly r: StoredRefresh; readonly f: Family }
    | RefreshTokenNotFound
    | RefreshTokenRevoked
    | RefreshTokenReused
    | RefreshTokenExpired => {
    const r = refresh.get(hashSecret(token))
    const f = r === undefined ? undefined : families.get(r.family_id)
    if (r === undefined || f === undefined) return new RefreshTokenNotFound()
    if (r.rotated_at !== undefined) {
      revoke(f.grant_id, now)
      return new RefreshTokenReused({ family_id: r.family_id, grant_id: f.grant_id })
    }
    if (f.revoked_at !== undefined) return new RefreshTokenRevoked({ family_id: r.family_id, grant_id: f.grant_id })
    if (r.expires_at !== undefined && r.expires_at <= now) return new RefreshTokenExpired({ family_id: r.family_id })
    return { r, f }
  }

  const grantProblem = (grantId: string): GrantNotFound | GrantRevoked | undefined => {
    const g = grants.get(grantId)
    if (g === undefined) return new GrantNotFound({ grant_id: grantId })
    if (g.revoked_at !== undefined) return new GrantRevoked({ grant_id: grantId })
    return undefined
  }

  return {
    createCode: (input) =>
      Effect.sync(() => {
        const grant_id = crypto.randomUUID()
        const { code, ...rest } = input
        const record = defined<AuthorizationCode>({ ...rest, grant_id })
        grants.set(grant_id, {
          grant: {
            grant_id,
            client_id: input.client_id,
            subject: input.subject,
            resource: input.resource,
            scope: input.scope,
            auth_time: input.auth_time,
            created_at: input.issued_at,
          },
          revoked_at: undefined,
        })
        codes.set(hashSecret(code), { record, consumed_at: undefined })
        return record
      }),
    consumeCode: (code, now) =>
      atomically(() => {
        const stored = codes.get(hashSecret(code))
        if (stored === undefined) return Effect.fail(new CodeNotFound())
        const grant_id = stored.record.grant_id
        if (stored.consumed_at !== undefined) {
          revoke(grant_id, now)
          return Effect.fail(new CodeAlreadyUsed({ grant_id }))
        }
        if (stored.record.expires_at <= now) return Effect.fail(new CodeExpired({ grant_id }))
        if (grants.get(grant_id)?.revoked_at !== undefined) return Effect.fail(new GrantRevoked({ grant_id }))
        stored.consumed_at = now
        return Effect.succeed(stored.record)
      }),
    getGrant: (grantId) =>
      atomically(() => {
        const g = grants.get(grantId)
        return g === undefined ? Effect.fail(new GrantNotFound({ grant_id: grantId })) : Effect.succeed(grantView(g))
      }),
    recordAccessToken: (token) =>
      atomically(() => {
        const problem = grantProblem(token.grant_id)
        if (problem !== undefined) return Effect.fail(problem)
        accessTokens.set(token.jti, { grant_id: token.grant_id, expires_at: token.expires_at })
        return Effect.void
      }),
    revokeAccessToken: (jti, expiresAt) =>
      Effect.sync(() => {
        if (!revokedAccess.has(jti)) revokedAccess.set(jti, expiresAt)
      }),
    isAccessTokenRevoked: (jti) =>
      Effect.sync(() => {
        if (revokedAccess.has(jti)) return true
        const t = accessTokens.get(jti)
        return t !== undefined && grants.get(t.grant_id)?.revoked_at !== undefined
      }),
    createRefresh: (input) =>
      atomically(() => {
        const problem = grantProblem(input.grant_id)
        if (problem !== undefined) return Effect.fail(problem)
        const family_id = crypto.randomUUID()
        const f: Family = { grant_id: input.grant_id, revoked_at: undefined }
        const r: StoredRefresh = {
          family_id,
          scope: input.scope,
          issued_at: input.issued_at,
          expires_at: input.expires_at,
          rotated_at: undefined,
        }
        families.set(family_id, f)
        refresh.set(hashSecret(input.token), r)
        return Effect.succeed(refreshView(r, f))
      }),
    getRefresh: (token, now) =>
      atomically(() => {
        const presented = presentRefresh(token, now)
        return presented instanceof Error
          ? Effect.fail(presented)
          : Effect.succeed(refreshView(presented.r, presented.f))
      }),
    findRefresh: (token, now) =>
      Effect.sync(() => {
        const r = refresh.get(hashSecret(token))
        const f = r === undefined ? undefined : families.get(r.family_id)
        if (r === undefined || f === undefined) return Option.none()
        const active =
          r.rotated_at === undefined && f.revoked_at === undefined && (r.expires_at === undefined || r.expires_at > now)
        return Option.some({ ...refreshView(r, f), active })
      }),
    rotate: (rotation) =>
      atomically(() => {
        const presented = presentRefresh(rotation.token, rotation.now)
        if (presented instanceof Error) return Effect.fail(presented)
        const { r, f } = presented
        const clientId = grants.get(f.grant_id)?.grant.client_id
        if (clientId !== rotation.client_id) {
          return Effect.fail(new RefreshTokenClientMismatch({ family_id: r.family_id, client_id: rotation.client_id }))
        }
        r.rotated_at = rotation.now
        const next: StoredRefresh = {
          family_id: r.family_id,
          scope: rotation.scope,
          issued_at: rotation.now,
          expires_at: rotation.expires_at,
          rotated_at: undefined,
        }
        refresh.set(hashSecret(rotation.new_token), next)
        return Effect.succeed(refreshView(next, f))
      }),
    revokeFamily: (familyId, now) =>
      Effect.sync(() => {
        const f = families.get(familyId)
        if (f === undefined) return false
        f.revoked_at ??= now
        return true
      }),
    revokeByRefreshToken: (token, now) =>
      Effect.sync(() => {
        const r = refresh.get(hashSecret(token))
        const f = r === undefined ? undefined : families.get(r.family_id)
        if (f === undefined) return Option.none()
        revoke(f.grant_id, now)
        return Option.some(f.grant_id)
      }),
    revokeGrant: (grantId, now) =>
      atomically(() => (revoke(grantId, now) ? Effect.void : Effect.fail(new GrantNotFound({ grant_id: grantId })))),
    grantConsent: (consent) =>
      Effect.sync(() => {
        const key = consentKey(consent.subject, consent.client_id, consent.resource)
        const merged = mergeConsent(consents.get(key), consent)
        consents.set(key, merged)
        return merged
      }),
    getConsent: (subject, clientId, resource) =>
      Effect.sync(() => Option.fromNullishOr(consents.get(consentKey(subject, clientId, resource)))),
    consentCovers: (subject, clientId, resource, scopes) =>
      Effect.sync(() => covers(consents.get(consentKey(subject, clientId, resource)), scopes)),
    revokeConsent: (subject, clientId, resource) =>
      Effect.sync(() => {
        let removed = 0
        for (const [key, c] of consents) {
          if (
            c.subject === subject &&
            c.client_id === clientId &&
            (resource === undefined || c.resource === resource)
          ) {
            consents.delete(key)
            removed++
          }
        }
        return removed
      }),
    listConsents: (subject) =>
      Effect.sync(() =>
        [...consents.values()]
          .filter((c) => c.subject === subject)
          .sort((a, b) =>
            a.client_id < b.client_id
              ? -1
              : a.client_id > b.client_id
                ? 1
                : a.resource < b.resource
                  ? -1
                  : a.resource > b.resource
                    ? 1
                    : 0,
          ),
      ),
    rememberJti: (clientId, jti, expiresAt) =>
      Effect.sync(() => {
        const key = JSON.stringify([clientId, jti])
        if (assertionJtis.has(key)) return false
        assertionJtis.set(key, expiresAt)
        return true
      }),
    purgeExpired: (now) =>
      Effect.sync(() => {
        let removed = 0
        const drop = <K, V>(map: Map<K, V>, expired: (v: V) => boolean) => {
          for (const [k, v] of map) {
            if (expired(v)) {
              map.delete(k)
              removed++
            }
          }
        }
        drop(codes, (c) => c.record.expires_at <= now)
        drop(accessTokens, (t) => t.expires_at <= now)
        drop(revokedAccess, (exp) => exp <= now)
        drop(assertionJtis, (exp) => exp <= now)
        drop(refresh, (r) => {
          const f = families.get(r.family_id)
          return (r.expires_at !== undefined && r.expires_at <= now) || f === undefined || f.revoked_at !== undefined
        })
        const familiesInUse = new Set([...refresh.values()].map((r) => r.family_id))
        drop(families, (f) => f.revoked_at !== undefined)
        for (const id of families.keys()) {
          if (!familiesInUse.has(id)) {
            families.delete(id)
            removed++
          }
        }
        const grantsInUse = new Set([
          ...[...codes.values()].map((c) => c.record.grant_id),
          ...[...accessTokens.values()].map((t) => t.grant_id),
          ...[...families.values()].map((f) => f.grant_id),
        ])
        drop(grants, (g) => !grantsInUse.has(g.grant.grant_id))
        return removed
      }),
  }
}

export const makeKeyStore = (): KeyStore["Service"] => {
  const keys = new Map<string, SigningKey>()
  return {
    add: (key) =>
      atomically(() => {
        if (keys.has(key.kid)) return Effect.fail(new KeyAlreadyExists({ kid: key.kid }))
        const record = structuredClone(defined(key))
        keys.set(key.kid, record)
        return Effect.succeed(record)
      }),
    get: (kid) =>
      atomically(() => {
        const k = keys.get(kid)
        return k === undefined ? Effect.fail(new KeyNotFound({ kid })) : Effect.succeed(k)
      }),
    list: () => Effect.sync(() => [...keys.values()].sort(byAge)),
    published: (now) =>
      Effect.sync(() => [...keys.values()].filter((k) => k.retires_at === undefined || k.retires_at > now).sort(byAge)),
    current: (now) =>
      atomically(() => {
        const k = pickCurrent(keys.values(), now)
        return k === undefined ? Effect.fail(new NoSigningKey()) : Effect.succeed(k)
      }),
    retire: (kid, retiresAt) =>
      atomically(() => {
        const k = keys.get(kid)
        if (k === undefined) return Effect.fail(new KeyNotFound({ kid }))
        const record: SigningKey = { ...k, status: "retired", retires_at: retiresAt }
        keys.set(kid, record)
        return Effect.succeed(record)
      }),
    purgeExpired: (now) =>
      Effect.sync(() => {
        let removed = 0
        for (const [kid, k] of keys) {
          if (k.retires_at !== undefined && k.retires_at <= now) {
            keys.delete(kid)
            removed++
          }
        }
        return removed
      }),
  }
}
