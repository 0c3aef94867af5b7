/**
 * Polls `check` every 20 ms of real time until it holds, for work a background round finishes on real I/O (key
 * generation, another connection's write) after the test clock moved; throws after a generous bound so a broken job
 * cannot hang the run.
 */
export const eventually = async (check: () => Promise<boolean> | boolean, what: string): Promise<void> => {
  const deadline = Date.now() + 10_000
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not reached within 10 s`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
