// A part of a view that throws while rendering shows what went wrong instead of taking the whole
// application down with it.
import { Component, type ReactNode } from 'react';

export class ErrorBoundary extends Component<{ what: string; children: ReactNode }, { error: Error | null }> {
  override state: { error: Error | null } = { error: null };

  static getDerivedStateFromError(error: Error) {
    return { error };
  }

  override render() {
    if (this.state.error)
      return (
        <p className="error" role="alert">
          The {this.props.what} could not be shown: {this.state.error.message}
        </p>
      );
    return this.props.children;
  }
}
