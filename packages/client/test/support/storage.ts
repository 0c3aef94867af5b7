/** A Web Storage (`Storage`) in memory, as `localStorage` and `sessionStorage` behave within one page. */
export const memoryStorage = (): Storage & { readonly keys: () => Array<string> } => {
  const items = new Map<string, string>()
  return {
    get length() {
      return items.size
    },
    clear: () => items.clear(),
    getItem: (key) => items.get(key) ?? null,
    key: (index) => [...items.keys()][index] ?? null,
    removeItem: (key) => {
      items.delete(key)
    },
    setItem: (key, value) => {
      items.set(key, String(value))
    },
    keys: () => [...items.keys()],
  }
}
