// What a view shows for a query: loading, the error in words, an empty state, or the data.
import type { UseQueryResult } from '@tanstack/react-query';
import type { ReactNode } from 'react';

export function QueryState<T>({
  query,
  loading,
  empty,
  children,
}: {
  query: UseQueryResult<T>;
  loading: string;
  /** Shown instead of the data when it is an empty list. */
  empty?: string;
  children: (data: T) => ReactNode;
}) {
  if (query.isPending) return <p role="status">{loading}</p>;
  if (query.isError)
    return (
      <p className="error" role="alert">
        {query.error.message}
      </p>
    );
  if (empty !== undefined && Array.isArray(query.data) && query.data.length === 0)
    return <p className="empty">{empty}</p>;
  return <>{children(query.data)}</>;
}
