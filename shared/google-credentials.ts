// A Google credential an organization stores in a cloud connection is someone else's input: before
// the worker uses it, its URLs must be Google's (or the configured Google endpoint's) and its subject
// token must come from a file — never from a URL (the worker would fetch it: a request to anywhere)
// or a command (the worker would run it). A file's contents then go only to Google's token service.
// Pure: the API checks the shape at creation, the worker checks the whole before each use.

/** Google's own token and impersonation services. */
export const GOOGLE_AUTH_ORIGINS = [
  'https://sts.googleapis.com',
  'https://oauth2.googleapis.com',
  'https://iamcredentials.googleapis.com',
];

const origin = (url: unknown): string | undefined => {
  if (typeof url !== 'string') return undefined;
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
};

/**
 * Why `credential` may not be used, or undefined when it may. `allowedOrigins`: where its token
 * URLs may point (the worker: Google's own and runners.gcp.endpoint_url's origin); absent, only its
 * shape is checked (the API, which does not know the workers' endpoints).
 */
export function googleCredentialProblem(credential: unknown, allowedOrigins?: string[]): string | undefined {
  if (typeof credential !== 'object' || credential === null) return 'is not a JSON object';
  const c = credential as Record<string, unknown>;
  const urlProblem = (field: string): string | undefined => {
    if (c[field] === undefined || !allowedOrigins) return undefined;
    const o = origin(c[field]);
    return o && allowedOrigins.includes(o) ? undefined : `${field} must be on ${allowedOrigins.join(', ')}`;
  };
  if (c.type === 'service_account') {
    if (typeof c.client_email !== 'string' || typeof c.private_key !== 'string')
      return 'a service_account key needs client_email and private_key';
    return urlProblem('token_uri');
  }
  if (c.type === 'external_account') {
    const source = c.credential_source as Record<string, unknown> | undefined;
    if (!source || typeof source.file !== 'string')
      return 'an external_account credential must read its subject token from a file (credential_source.file)';
    if ('url' in source || 'executable' in source)
      return 'an external_account credential may not fetch its subject token from a URL or a command';
    if (typeof c.audience !== 'string') return 'an external_account credential needs an audience';
    return (
      urlProblem('token_url') ??
      urlProblem('service_account_impersonation_url') ??
      urlProblem('token_info_url')
    );
  }
  return 'must be a service_account key or an external_account configuration';
}
