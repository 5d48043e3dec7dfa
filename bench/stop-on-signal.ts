// A benchmark stopped early (Ctrl-C, SIGTERM) takes what it started with it: the processes it
// spawned and the test stack's servers. Without this, node exits at once and leaves them running.
import type { ChildProcess } from 'node:child_process';

export function stopOnSignal(stop: () => Promise<void>, children: () => ChildProcess[] = () => []): void {
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.once(signal, () => {
      for (const child of children()) child.kill('SIGTERM');
      void stop().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
    });
}
