import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { NOTES_LIMITS, NoteRefused, Notes, type NotesLimits } from "../src/index.js"
import { obtainToken, type Stack, startStack } from "./support/stack.js"

const small: NotesLimits = { titleLength: 5, textLength: 10, notesPerSubject: 3, subjects: 2, characters: 40 }

const refusal = (f: () => unknown): string => {
  try {
    f()
  } catch (error) {
    expect(error).toBeInstanceOf(NoteRefused)
    return (error as Error).message
  }
  throw new Error("not refused")
}

describe("Notes stays within its limits", () => {
  it("holds at most notesPerSubject notes in a notebook after more writes, and takes a write again once one is deleted", () => {
    const notes = new Notes(small)
    for (let i = 0; i < small.notesPerSubject; i++) notes.write("alice", { title: `t${i}`, text: "x" })
    for (let i = 0; i < 5; i++) {
      expect(refusal(() => notes.write("alice", { title: "more", text: "x" }))).toBe(
        "Not saved: a notebook holds at most 3 notes; delete one first.",
      )
    }
    expect(notes.list("alice")).toHaveLength(small.notesPerSubject)
    // Replacing a note adds none.
    const first = notes.list("alice")[0]!
    expect(notes.write("alice", { id: first.id, title: "new", text: "y" }).id).toBe(first.id)
    expect(notes.delete("alice", first.id)).toBe(true)
    expect(notes.write("alice", { title: "again", text: "z" }).title).toBe("again")
    expect(notes.list("alice")).toHaveLength(small.notesPerSubject)
  })

  it("holds at most `subjects` notebooks after writes of more subjects, and none for a subject whose notes are all deleted", () => {
    const notes = new Notes(small)
    const subjects = ["-leading-dash", "", "alice", "bob", "carol"]
    const written = new Map<string, string>()
    for (const subject of subjects) {
      try {
        written.set(subject, notes.write(subject, { title: "t", text: "x" }).id)
      } catch (error) {
        expect((error as Error).message).toBe("Not saved: the notes server holds as many notebooks as it can.")
      }
    }
    expect(notes.subjects).toBe(small.subjects)
    expect([...written.keys()]).toEqual(["-leading-dash", ""])
    // A notebook emptied by deletes is gone, so a new subject can write.
    expect(notes.delete("-leading-dash", written.get("-leading-dash")!)).toBe(true)
    expect(notes.subjects).toBe(1)
    expect(notes.write("carol", { title: "t", text: "x" }).title).toBe("t")
    expect(notes.subjects).toBe(2)
  })

  it("leaves nothing behind after many subjects write and delete in turn", () => {
    const notes = new Notes()
    for (let i = 0; i < NOTES_LIMITS.subjects * 3; i++) {
      const subject = `subject-${i}`
      const { id } = notes.write(subject, { title: "t", text: "x".repeat(100) })
      expect(notes.delete(subject, id)).toBe(true)
    }
    expect(notes.subjects).toBe(0)
    expect(notes.characters).toBe(0)
  })

  it("holds at most `characters` characters in all, counting a replaced note once", () => {
    const notes = new Notes({ ...small, subjects: 10 })
    const a = notes.write("a", { title: "12345", text: "1234567890" })
    notes.write("b", { title: "12345", text: "1234567890" })
    expect(notes.characters).toBe(30)
    expect(refusal(() => notes.write("c", { title: "12345", text: "1234567890" }))).toBe(
      "Not saved: the notes server holds as much text as it can.",
    )
    // Exactly at the limit is still taken: 30 + 10 = 40.
    notes.write("c", { title: "12345", text: "12345" })
    expect(notes.characters).toBe(small.characters)
    // A replacement counts only what it adds: 15 replaced by 15 fits, by 16 would not.
    expect(refusal(() => notes.write("a", { id: a.id, title: "123456", text: "1234567890" }))).toBe(
      "Not saved: a title has at most 5 characters.",
    )
    expect(refusal(() => notes.write("a", { id: a.id, title: "12345", text: "12345678901" }))).toBe(
      "Not saved: a note's text has at most 10 characters.",
    )
    expect(notes.write("a", { id: a.id, title: "abcde", text: "abcdefghij" }).text).toBe("abcdefghij")
    expect(notes.characters).toBe(small.characters)
    expect(notes.delete("a", a.id)).toBe(true)
    expect(notes.characters).toBe(25)
  })

  it("refuses to replace a note that does not exist, whatever the ID, and adds nothing", () => {
    const notes = new Notes(small)
    const { id } = notes.write("alice", { title: "t", text: "x" })
    for (const madeUp of ["-1", "", "0", `${id}0`, "x".repeat(10_000)]) {
      expect(refusal(() => notes.write("alice", { id: madeUp, title: "t", text: "x" }))).toBe(
        `Not saved: no note #${madeUp} to replace.`,
      )
    }
    // Another subject's note is not there to replace either.
    expect(refusal(() => notes.write("bob", { id, title: "t", text: "x" }))).toBe(
      `Not saved: no note #${id} to replace.`,
    )
    expect(notes.list("alice").map((n) => n.id)).toEqual([id])
    expect(notes.subjects).toBe(1)
    expect(notes.characters).toBe(2)
  })
})

describe("write_note on the running server", () => {
  let s: Stack
  let client: Client
  beforeAll(async () => {
    s = await startStack()
    const token = await obtainToken(s.as.issuer, s.mcp.url, "notes:read notes:write")
    client = new Client({ name: "test-client", version: "1.0.0" })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(s.mcp.url), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    )
  })
  afterAll(async () => {
    await client.close()
    await s.close()
  })

  const write = async (args: Record<string, string>) => {
    const result = (await client.callTool({ name: "write_note", arguments: args })) as {
      content: ReadonlyArray<{ text?: string }>
      isError?: boolean
    }
    return { text: result.content[0]?.text, isError: result.isError === true }
  }

  it("answers a tool error naming the limit once the caller's notebook is full, or a note is too long", async () => {
    for (let i = 0; i < NOTES_LIMITS.notesPerSubject; i++) {
      expect(await write({ title: `note ${i}`, text: "x" })).toEqual({ text: `Saved note #${i + 1}.`, isError: false })
    }
    expect(await write({ title: "one more", text: "x" })).toEqual({
      text: "Not saved: a notebook holds at most 100 notes; delete one first.",
      isError: true,
    })
    expect(await write({ id: "1", title: "t".repeat(201), text: "x" })).toEqual({
      text: "Not saved: a title has at most 200 characters.",
      isError: true,
    })
    expect(await write({ id: "-1", title: "t", text: "x" })).toEqual({
      text: "Not saved: no note #-1 to replace.",
      isError: true,
    })
  })
})
