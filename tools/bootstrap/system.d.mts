// Types of system.mjs for the TypeScript tests that import it (tools/testing/test/bootstrap-system.test.ts).

export declare const APT_LOCK_WAIT_SECONDS: number

export interface SystemPackage {
  readonly name: string
  readonly why: string
  readonly probe: string
  readonly present: () => boolean
}

export declare const SYSTEM_PACKAGES: ReadonlyArray<SystemPackage>
export declare const missingSystemPackages: () => SystemPackage[]
export declare const hasAptGet: () => boolean

export type SystemPackagesPlan =
  | { readonly action: "none" }
  | { readonly action: "stop"; readonly message: string }
  | {
      readonly action: "install"
      readonly notice: string
      readonly env: Readonly<Record<string, string>>
      readonly commands: ReadonlyArray<ReadonlyArray<string>>
    }

export declare const planSystemPackages: (options: {
  readonly missing: ReadonlyArray<SystemPackage>
  readonly root: boolean
  readonly apt: boolean
}) => SystemPackagesPlan
