/**
 * The notes the demo tools work on: kept in memory, one notebook per token subject, so a user only ever sees their
 * own notes. Bounded: every caller with a token could otherwise grow the process without end.
 *
 * @module
 */

/** One note. */
export interface Note {
  readonly id: string
  readonly title: string
  readonly text: string
  /** When it was last written, ISO 8601. */
  readonly updatedAt: string
}

/** What {@link Notes} holds at most. */
export interface NotesLimits {
  /** Characters of a note's title. */
  readonly titleLength: number
  /** Characters of a note's text. */
  readonly textLength: number
  /** Notes in one subject's notebook. */
  readonly notesPerSubject: number
  /** Subjects holding at least one note. */
  readonly subjects: number
  /** Characters of every title and text together. */
  readonly characters: number
}

/**
 * The limits of the notes server: about 16 MB of text at most (two bytes per character at worst), of which one
 * subject may hold about 1 MB.
 */
export const NOTES_LIMITS: NotesLimits = {
  titleLength: 200,
  textLength: 10_000,
  notesPerSubject: 100,
  subjects: 1_000,
  characters: 8_000_000,
}

/** A write {@link Notes} refuses; the tool answers with its message. */
export class NoteRefused extends Error {
  override readonly name = "NoteRefused"
}

/** Notebooks of every subject, in memory, within {@link NotesLimits}. */
export class Notes {
  readonly #books = new Map<string, Map<string, Note>>()
  readonly #limits: NotesLimits
  #characters = 0
  #next = 1

  constructor(limits: NotesLimits = NOTES_LIMITS) {
    this.#limits = limits
  }

  /** Subjects holding at least one note. */
  get subjects(): number {
    return this.#books.size
  }

  /** Characters of every title and text held. */
  get characters(): number {
    return this.#characters
  }

  /** The subject's notes, oldest first. */
  list(subject: string): ReadonlyArray<Note> {
    return [...(this.#books.get(subject)?.values() ?? [])]
  }

  /** One of the subject's notes; undefined when the subject has no note with that ID. */
  read(subject: string, id: string): Note | undefined {
    return this.#books.get(subject)?.get(id)
  }

  /**
   * Creates a note, or replaces the subject's note with the given ID; throws {@link NoteRefused} when there is no such
   * note (IDs are given out here only, so a made-up one can neither grow the notebook nor collide with a later note),
   * or when the note, the subject's notebook or the server would go over its {@link NotesLimits}.
   */
  write(subject: string, note: { readonly id?: string; readonly title: string; readonly text: string }): Note {
    const limits = this.#limits
    if (note.title.length > limits.titleLength) {
      throw new NoteRefused(`Not saved: a title has at most ${limits.titleLength} characters.`)
    }
    if (note.text.length > limits.textLength) {
      throw new NoteRefused(`Not saved: a note's text has at most ${limits.textLength} characters.`)
    }
    const book = this.#books.get(subject)
    const replaced = note.id === undefined ? undefined : book?.get(note.id)
    if (note.id !== undefined && replaced === undefined) {
      throw new NoteRefused(`Not saved: no note #${note.id} to replace.`)
    }
    if (replaced === undefined) {
      if (book === undefined && this.#books.size >= limits.subjects) {
        throw new NoteRefused("Not saved: the notes server holds as many notebooks as it can.")
      }
      if ((book?.size ?? 0) >= limits.notesPerSubject) {
        throw new NoteRefused(`Not saved: a notebook holds at most ${limits.notesPerSubject} notes; delete one first.`)
      }
    }
    const added = note.title.length + note.text.length - (replaced === undefined ? 0 : size(replaced))
    if (this.#characters + added > limits.characters) {
      throw new NoteRefused("Not saved: the notes server holds as much text as it can.")
    }
    const id = replaced?.id ?? String(this.#next++)
    const written: Note = { id, title: note.title, text: note.text, updatedAt: new Date().toISOString() }
    if (book === undefined) this.#books.set(subject, new Map([[id, written]]))
    else book.set(id, written)
    this.#characters += added
    return written
  }

  /** Deletes one of the subject's notes; false when there was none with that ID. */
  delete(subject: string, id: string): boolean {
    const book = this.#books.get(subject)
    const note = book?.get(id)
    if (book === undefined || note === undefined) return false
    book.delete(id)
    this.#characters -= size(note)
    // An empty notebook goes, so that subjects without notes hold nothing.
    if (book.size === 0) this.#books.delete(subject)
    return true
  }
}

const size = (note: Note): number => note.title.length + note.text.length
