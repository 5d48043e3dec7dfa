// What a worker's identity says about it beyond `pid@host`: the engine sandbox's state
// (`sandbox=bubblewrap|off|unavailable`). The worker sets it (worker/worker.ts); the API's /health
// reads it from the task queue's pollers (api/checks.ts).
export const SANDBOX_IDENTITY_KEY = 'sandbox';

/** The sandbox state a poller's identity names, or undefined for a worker that names none. */
export function sandboxOfIdentity(identity: string): string | undefined {
  const m = new RegExp(`(?:^|\\s)${SANDBOX_IDENTITY_KEY}=(\\S+)`).exec(identity);
  return m?.[1];
}
