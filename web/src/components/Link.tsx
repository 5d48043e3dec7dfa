// An in-application link: a real href (open in a new tab, copy, share) that navigates without a reload.
import type { ReactNode } from 'react';
import { navigate } from '../router';

export function Link({ to, children }: { to: string; children: ReactNode }) {
  return (
    <a
      href={to}
      onClick={(e) => {
        if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
        e.preventDefault();
        navigate(to);
      }}
    >
      {children}
    </a>
  );
}
