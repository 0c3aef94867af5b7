import { Revision } from "@keyway/core"
import { stage as authorizationServer } from "./checks/authorizationServer.js"
import { stage as login } from "./checks/login.js"
import { stage as registration } from "./checks/registration.js"
import { stage as resource } from "./checks/resource.js"
import type { CheckEntry, Finding } from "./Finding.js"
import { createProbe } from "./Probe.js"
import type { DiagnoseOptions, Stage, Walk } from "./Walk.js"

/** The stages, in the order a client meets what they check. */
export const stages: ReadonlyArray<Stage> = [resource, authorizationServer, registration, login]

/** Every check the doctor may report, by ID. */
export const catalog: Readonly<Record<string, CheckEntry>> = Object.assign({}, ...stages.map((s) => s.catalog))

/** The result of a diagnosis. */
export interface Diagnosis {
  readonly target: string
  readonly revisions: ReadonlyArray<Revision.Revision>
  readonly findings: ReadonlyArray<Finding>
  /** Why the walk could not go on, when it stopped early. */
  readonly stopped?: string
}

/**
 * Diagnoses an MCP server and its authorization servers, stage by stage, for the selected revisions.
 */
export const diagnose = async (target: string, options: DiagnoseOptions = {}): Promise<Diagnosis> => {
  const walk: Walk = {
    target,
    revisions: options.revisions ?? Revision.all,
    options,
    probe: createProbe({
      ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
      ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    }),
    authorizationServers: new Map(),
  }
  const findings: Array<Finding> = []
  for (const stage of stages) {
    if (walk.stopped !== undefined) break
    findings.push(...(await stage.run(walk)))
  }
  return {
    target,
    revisions: walk.revisions,
    findings,
    ...(walk.stopped === undefined ? {} : { stopped: walk.stopped }),
  }
}
