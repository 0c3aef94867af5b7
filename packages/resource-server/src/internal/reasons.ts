/**
 * The `error_description` sent for each reason a token is refused (RFC 6750 §3): one table for the verifiers and the
 * protected resource's own re-checks.
 */
import { InvalidToken, type InvalidTokenReason } from "../VerifiedToken.js"

/** Descriptions sent as `error_description` for each refusal reason. */
export const descriptions: Readonly<Record<InvalidTokenReason, string>> = {
  malformed: "The access token is malformed",
  expired: "The access token expired",
  "not-yet-valid": "The access token is not valid yet",
  "bad-signature": "The access token signature is invalid",
  "unknown-key": "The access token was signed with an unknown key",
  "algorithm-not-allowed": "The access token signing algorithm is not allowed",
  "wrong-type": "The access token is not of type at+jwt",
  "wrong-issuer": "The access token was issued by an untrusted issuer",
  "wrong-audience": "The access token was not issued for this resource",
  "missing-claim": "The access token lacks a required claim",
  inactive: "The access token is not active",
  rejected: "The access token was rejected",
  "delegation-refused": "Delegated access tokens (with an act claim) are not accepted by this resource",
}

/** The description sent to clients when verification is unavailable (the verifier failed closed). */
export const unavailableDescription = "The access token could not be verified"

export const invalid = (reason: InvalidTokenReason): InvalidToken =>
  new InvalidToken({ reason, description: descriptions[reason] })
