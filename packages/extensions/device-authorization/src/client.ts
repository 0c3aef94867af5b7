/**
 * The client part of the device authorization grant.
 *
 * @module
 */
export {}
