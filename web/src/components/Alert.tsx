// An error said in words, announced to screen readers; nothing when there is none.
export function Alert({ message }: { message: string | null | undefined }) {
  if (!message) return null;
  return (
    <p className="error" role="alert">
      {message}
    </p>
  );
}
