/**
 * The protected resource over Web `Request`/`Response`: the pipeline's adapter for Web requests, `authenticate`, and
 * `protect`, which serves the metadata and CORS preflights and guards a handler, limiting the body it reads.
 */
import { Body, PayloadTooLarge } from "@keyway/http"
import type { AuthResult, InboundRequest, Outcome, ProtectedHandler } from "../ProtectedResource.js"
import { type Refusals, toResponse } from "./challenge.js"
import type { Config } from "./config.js"
import type { Cors } from "./cors.js"
import type { MetadataServer } from "./metadata.js"
import type { Pipeline } from "./pipeline.js"

// A Web request as the check sees it. A class, so the per-request object carries no closures; Content-Type, Origin
// and Content-Length are read only when a check needs them, and the body is read from a clone at most once.
class WebInbound implements InboundRequest {
  #body: Promise<string> | undefined
  constructor(
    readonly request: Request,
    readonly url: string,
    readonly method: string,
    readonly authorization: string | null,
    readonly limit: number,
  ) {}
  get contentType(): string | null {
    return this.request.headers.get("content-type")
  }
  get contentLength(): string | null {
    return this.request.headers.get("content-length")
  }
  get origin(): string | null {
    return this.request.headers.get("origin")
  }
  header(name: string): string | null {
    return this.request.headers.get(name)
  }
  readBody(): Promise<string> {
    this.#body ??= this.request.body === null ? Promise.resolve("") : Body.readText(this.request.clone(), this.limit)
    return this.#body
  }
}

export interface WebFace {
  readonly authenticate: (request: Request, scopes?: ReadonlyArray<string>) => Promise<AuthResult>
  readonly protect: (
    handler: ProtectedHandler,
    scopes?: ReadonlyArray<string>,
  ) => (request: Request) => Promise<Response>
}

export const makeWebFace = (
  config: Config,
  pipeline: Pipeline,
  refusals: Refusals,
  cors: Cors,
  serveMetadata: MetadataServer,
): WebFace => {
  const { check } = pipeline

  const fromRequest = (request: Request, url: string = request.url): InboundRequest =>
    new WebInbound(request, url, request.method, request.headers.get("authorization"), config.maxBodyBytes)

  const authenticate = async (request: Request, scopes?: ReadonlyArray<string>): Promise<AuthResult> => {
    const outcome = await check(fromRequest(request), scopes)
    return outcome.ok ? outcome : { ok: false, response: toResponse(outcome.rejection) }
  }

  const protect = (handler: ProtectedHandler, scopes?: ReadonlyArray<string>) => {
    const tooLarge = (request: Request) => toResponse(refusals.tooLarge(request.headers.get("origin")))
    const finish = (request: Request, outcome: Outcome): Response | Promise<Response> => {
      if (!outcome.ok) return toResponse(outcome.rejection)
      // The handler reads the body itself: a declared length over the limit is refused now, and a chunked body that
      // grows past it fails its reader and is answered 413 whatever the handler made of that.
      let exceeded = false
      let limited: Request
      try {
        limited =
          request.body === null
            ? request
            : Body.limitRequest(request, config.maxBodyBytes, () => {
                exceeded = true
              })
      } catch (error) {
        if (error instanceof PayloadTooLarge) return tooLarge(request)
        throw error
      }
      const answered = handler(limited, outcome)
      const response =
        limited === request
          ? answered
          : Promise.resolve(answered).then(
              (r) => (exceeded ? tooLarge(request) : r),
              (error: unknown) => {
                if (exceeded) return tooLarge(request)
                throw error
              },
            )
      if (config.cors === undefined) return response
      return response instanceof Promise
        ? response.then((r) => cors.withCors(request, r))
        : cors.withCors(request, response)
    }
    return (request: Request): Promise<Response> => {
      const url = request.url
      const metadata = serveMetadata(request, url)
      if (metadata !== undefined) return Promise.resolve(metadata)
      const pre = cors.preflight(request)
      if (pre !== undefined) return Promise.resolve(pre)
      try {
        const outcome = check(fromRequest(request, url), scopes)
        return Promise.resolve(
          outcome instanceof Promise ? outcome.then((o) => finish(request, o)) : finish(request, outcome),
        )
      } catch (error) {
        return Promise.reject(error)
      }
    }
  }

  return { authenticate, protect }
}
