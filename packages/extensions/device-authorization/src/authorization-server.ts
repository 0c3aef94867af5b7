/**
 * The authorization-server part of the device authorization grant.
 *
 * @module
 */
export {}
