export { NOTE_SCOPES, type Stack, startStack, USER } from "./stack.js"
