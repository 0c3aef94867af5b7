/**
 * The notes the demo tools work on: kept in memory, one notebook per token subject, so a user only ever sees their
 * own notes.
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

/** Notebooks of every subject, in memory. */
export class Notes {
  readonly #books = new Map<string, Map<string, Note>>()
  #next = 1

  #book(subject: string): Map<string, Note> {
    let book = this.#books.get(subject)
    if (book === undefined) {
      book = new Map()
      this.#books.set(subject, book)
    }
    return book
  }

  /** The subject's notes, oldest first. */
  list(subject: string): ReadonlyArray<Note> {
    return [...(this.#books.get(subject)?.values() ?? [])]
  }

  /** One of the subject's notes; undefined when the subject has no note with that ID. */
  read(subject: string, id: string): Note | undefined {
    return this.#books.get(subject)?.get(id)
  }

  /** Creates a note, or replaces the subject's note with the given ID. */
  write(subject: string, note: { readonly id?: string; readonly title: string; readonly text: string }): Note {
    const id = note.id ?? String(this.#next++)
    const written: Note = { id, title: note.title, text: note.text, updatedAt: new Date().toISOString() }
    this.#book(subject).set(id, written)
    return written
  }

  /** Deletes one of the subject's notes; false when there was none with that ID. */
  delete(subject: string, id: string): boolean {
    return this.#books.get(subject)?.delete(id) ?? false
  }
}
