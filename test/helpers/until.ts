/** Polls `check` every `pollMs` until it holds; fails, naming `what`, once `timeoutMs` has passed. */
export async function until(check: () => Promise<boolean> | boolean, what: string, timeoutMs: number, pollMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((wake) => setTimeout(wake, pollMs));
  }
}
