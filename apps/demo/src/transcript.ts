/**
 * The printed transcript: sections, numbered steps, indented detail lines and JSON, every line scrubbed of the
 * secrets the {@link Redactor} knows; plus a progress indicator on stderr that never mixes with the transcript.
 *
 * @module
 */
import type { Redactor } from "./redact.js"

/** Where text goes. */
export type Write = (text: string) => void

/**
 * A progress indicator: a spinner line on a terminal, plain "… label" lines otherwise (so logs and CI show progress
 * too), silent when disabled.
 */
export class Progress {
  private static readonly FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]
  private label: string | undefined
  private frame = 0
  private timer: ReturnType<typeof setInterval> | undefined
  private drawn = false

  constructor(
    private readonly write: Write,
    private readonly mode: "spinner" | "lines" | "off",
  ) {}

  /** Shows what is happening now. */
  update(label: string): void {
    if (this.mode === "off" || label === this.label) return
    this.label = label
    if (this.mode === "lines") {
      this.write(`… ${label}\n`)
      return
    }
    this.draw()
    if (this.timer === undefined) {
      this.timer = setInterval(() => {
        this.frame = (this.frame + 1) % Progress.FRAMES.length
        this.draw()
      }, 80)
      this.timer.unref()
    }
  }

  /** Runs a write to the same terminal with the spinner line out of the way. */
  around(write: () => void): void {
    if (this.drawn) {
      this.write("\r\u001b[2K")
      this.drawn = false
    }
    write()
    if (this.mode === "spinner" && this.timer !== undefined) this.draw()
  }

  /** Removes the indicator. */
  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer)
    this.timer = undefined
    if (this.drawn) this.write("\r\u001b[2K")
    this.drawn = false
    this.label = undefined
  }

  private draw(): void {
    if (this.label === undefined) return
    this.write(`\r\u001b[2K${Progress.FRAMES[this.frame]} ${this.label}`)
    this.drawn = true
  }
}

/** Options of a {@link Transcript}. */
export interface TranscriptOptions {
  readonly write: Write
  readonly redactor: Redactor
  readonly progress?: Progress
  /** ANSI bold and dim (off when the output is not a terminal or NO_COLOR is set). */
  readonly color?: boolean
}

/** JSON with objects one member per line and short arrays of scalars on one line, cut after `maxLines` lines. */
export const formatJson = (value: unknown, maxLines = 40): ReadonlyArray<string> => {
  const lines: Array<string> = []
  const scalar = (v: unknown) => JSON.stringify(v) ?? "null"
  const walk = (v: unknown, indent: string, prefix: string, suffix: string): void => {
    if (Array.isArray(v)) {
      if (v.every((item) => typeof item !== "object" || item === null)) {
        const inline = `[${v.map(scalar).join(", ")}]`
        if (indent.length + prefix.length + inline.length <= 130) {
          lines.push(`${indent}${prefix}${inline}${suffix}`)
          return
        }
      }
      lines.push(`${indent}${prefix}[`)
      v.forEach((item, i) => {
        walk(item, `${indent}  `, "", i < v.length - 1 ? "," : "")
      })
      lines.push(`${indent}]${suffix}`)
      return
    }
    if (typeof v === "object" && v !== null) {
      const entries = Object.entries(v)
      if (entries.length === 0) {
        lines.push(`${indent}${prefix}{}${suffix}`)
        return
      }
      lines.push(`${indent}${prefix}{`)
      entries.forEach(([key, member], i) => {
        walk(member, `${indent}  `, `${JSON.stringify(key)}: `, i < entries.length - 1 ? "," : "")
      })
      lines.push(`${indent}}${suffix}`)
      return
    }
    lines.push(`${indent}${prefix}${scalar(v)}${suffix}`)
  }
  walk(value, "", "", "")
  if (lines.length <= maxLines) return lines
  const kept = lines.slice(0, maxLines - 1)
  return [...kept, `… (${lines.length - kept.length} more lines)`]
}

/** The transcript printer. */
export class Transcript {
  private steps = 0
  private readonly bold: (s: string) => string
  private readonly dim: (s: string) => string
  /** Free-form grouping key of the current step; a section resets it. */
  current: string | undefined

  constructor(private readonly options: TranscriptOptions) {
    const color = options.color === true
    this.bold = color ? (s) => `\u001b[1m${s}\u001b[22m` : (s) => s
    this.dim = color ? (s) => `\u001b[2m${s}\u001b[22m` : (s) => s
  }

  /** How many numbered steps were printed. */
  get stepCount(): number {
    return this.steps
  }

  private emit(lines: ReadonlyArray<string>): void {
    const text = `${lines.map((line) => this.options.redactor.scrub(line)).join("\n")}\n`
    const write = () => this.options.write(text)
    if (this.options.progress === undefined) write()
    else this.options.progress.around(write)
  }

  /** A title line for the whole run. */
  title(text: string): void {
    this.emit([this.bold(text)])
  }

  /** A section of the flow (connect, step-up, refresh...): ends the current step. */
  section(title: string): void {
    this.current = undefined
    this.emit(["", this.bold(`── ${title} ${"─".repeat(Math.max(3, 72 - title.length))}`)])
  }

  /** Opens a numbered step (unless `key` names the step already open) and returns its number. */
  step(title: string, key: string = title): number {
    if (this.current === key) return this.steps
    this.current = key
    this.steps += 1
    this.emit(["", this.bold(`${String(this.steps).padStart(2)}. ${title}`)])
    return this.steps
  }

  /** Detail lines under the current step. */
  lines(lines: ReadonlyArray<string>, indent = 4): void {
    const pad = " ".repeat(indent)
    this.emit(lines.map((line) => (line === "" ? "" : `${pad}${line}`)))
  }

  /** One detail line. */
  line(text: string, indent = 4): void {
    this.lines([text], indent)
  }

  /** A dimmed side note (what the servers logged, explanations). */
  note(text: string, indent = 4): void {
    this.lines([this.dim(text)], indent)
  }

  /** Pretty-printed, trimmed JSON under the current step. */
  json(value: unknown, indent = 6, maxLines = 40): void {
    this.lines(formatJson(value, maxLines), indent)
  }

  /** Aligned `name  value` rows. */
  table(rows: ReadonlyArray<readonly [string, string]>, indent = 6): void {
    const width = Math.max(0, ...rows.map(([name]) => name.length))
    this.lines(
      rows.map(([name, value]) => `${name.padEnd(width)}  ${value}`),
      indent,
    )
  }

  /** Plain text outside any step (banner, summary). */
  plain(text: string): void {
    this.emit([text])
  }
}
