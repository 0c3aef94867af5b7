/** Where each expected text first appears after the previous one; -1 when missing. */
export const positions = (text: string, needles: ReadonlyArray<string>): Array<number> => {
  let from = 0
  return needles.map((needle) => {
    const at = text.indexOf(needle, from)
    if (at >= 0) from = at + needle.length
    return at
  })
}
