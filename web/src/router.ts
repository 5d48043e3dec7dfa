// Readable URLs for every view (a session's page can be shared): the path is the state.
import { useSyncExternalStore } from 'react';

const listeners = new Set<() => void>();
window.addEventListener('popstate', () => listeners.forEach((l) => l()));

export function navigate(path: string): void {
  window.history.pushState(null, '', path);
  listeners.forEach((l) => l());
}

/** The path and query of the current view (`/new?cloud=aws`). */
export function usePath(): string {
  return useSyncExternalStore(
    (l) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    () => window.location.pathname + window.location.search,
  );
}
