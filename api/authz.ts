// The authorization sidecar (services.authz), asked by the preflight and by every route that starts
// work on a repository — drift and generate rounds, apply, stacks and their runs, inbox remediation —
// with the cloud, the repository URL as the project and the IaC path as the environment (never the
// scope id). Disabled (the shipped default), nothing is asked and everything is authorized.
import { z } from 'zod';
import { HttpError } from './errors';
import { askSidecar } from './sidecar';

export interface AuthzConfig {
  enabled: boolean;
  url: string;
}

export interface WorkTarget {
  cloud: string;
  repository_url: string;
  iac_path: string;
}

const sidecarAnswer = z.object({ authorized: z.boolean(), reason: z.string().optional() });
export type AuthzAnswer = z.infer<typeof sidecarAnswer>;

/** The sidecar's answer for `target` (a 503 when it does not answer). */
export function askAuthz(authz: AuthzConfig, target: WorkTarget): Promise<AuthzAnswer> {
  return askSidecar({
    baseUrl: authz.url,
    path: '/authorize',
    body: { cloud: target.cloud, project: target.repository_url, environment: target.iac_path },
    schema: sidecarAnswer,
    code: 'authz_unavailable',
    name: 'authorization',
  });
}

/** Throws a 403 naming the sidecar's reason unless work on `target` is authorized. */
export async function requireAuthorized(authz: AuthzConfig | undefined, target: WorkTarget): Promise<void> {
  if (!authz?.enabled) return;
  const answer = await askAuthz(authz, target);
  if (!answer.authorized)
    throw new HttpError(
      403,
      'not_authorized',
      `The authorization service refused work on ${target.repository_url}${target.iac_path ? ` (${target.iac_path})` : ''}: ${answer.reason ?? 'no reason given'}`,
    );
}
