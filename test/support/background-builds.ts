// Setup builds the heaviest tools (kumoss/aws, the forge) in the background after it returns; on a
// fresh machine a test file that needs one waits for the build, which takes minutes — longer than
// a hook's usual timeout, and a wait on a condition, not a fixed time.
import { beforeAll } from 'vitest';
import { waitForTool } from '../../shared/infra/tools.mjs';

/** How long a file waits for a background build before it fails (the build's own bound). */
const BUILD_WAIT_MS = 30 * 60 * 1000;

/** Registers, before the file's own hooks, a wait for the tools it needs. */
export function needsBackgroundBuilds(...names: string[]): void {
  beforeAll(() => Promise.all(names.map((n) => waitForTool(n, BUILD_WAIT_MS))), BUILD_WAIT_MS + 60_000);
}
