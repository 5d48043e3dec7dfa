// The authorization sidecar (services.authz), asked by the preflight and by every route that starts
// or changes work on a repository — drift and generate rounds, revert, apply and its approval, pull
// requests and merges, stacks (create, change, pause, resume, trigger, backfill), inbox
// remediation, and runner groups' work (create, change, DAG starts and retries, schedules) — with
// the cloud, the repository URL (a runner group: `runner-group:<name>`) as the project and the IaC
// path (a runner group: its backend type) as the environment (never the scope id), and who asks: the organization, the user, the role and the
// operation. Disabled (the shipped default), nothing is asked and everything is authorized.
import { z } from 'zod';
import type { Request } from 'express';
import { currentUser } from './auth';
import { HttpError } from './errors';
import { askSidecar } from './sidecar';
import { BACKEND_PROVIDER, type BackendType } from '../shared/runner-contracts';

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

/** Who asks for work, as the sidecar is told. */
export interface AuthzCaller {
  organization_uuid: string;
  user_uuid: string;
  user: string;
  role: string;
  /** What is asked (`stacks.update`, `sessions.apply`, …). */
  operation: string;
}

/** The signed-in caller of `req`, asking for `operation`. */
export function callerOf(req: Request, operation: string): AuthzCaller {
  const u = currentUser(req);
  return {
    organization_uuid: u.organization_uuid,
    user_uuid: u.user_uuid,
    user: u.name,
    role: u.role,
    operation,
  };
}

/** The sidecar's answer for `target` asked by `caller` (a 503 when it does not answer). */
export function askAuthz(authz: AuthzConfig, target: WorkTarget, caller: AuthzCaller): Promise<AuthzAnswer> {
  return askSidecar({
    baseUrl: authz.url,
    path: '/authorize',
    body: {
      cloud: target.cloud,
      project: target.repository_url,
      environment: target.iac_path,
      organization: caller.organization_uuid,
      user: caller.user_uuid,
      user_name: caller.user,
      role: caller.role,
      operation: caller.operation,
    },
    schema: sidecarAnswer,
    code: 'authz_unavailable',
    name: 'authorization',
  });
}

/**
 * A runner group's work as the sidecar is told it: the group's cloud, `runner-group:<name>` as the
 * project and its backend type as the environment.
 */
export function runnerWorkTarget(group: {
  name: string;
  environment: { backend_type: BackendType };
}): WorkTarget {
  return {
    cloud: BACKEND_PROVIDER[group.environment.backend_type],
    repository_url: `runner-group:${group.name}`,
    iac_path: group.environment.backend_type,
  };
}

/** Throws a 403 naming the sidecar's reason unless `req`'s caller may do `operation` on `target`. */
export async function requireAuthorized(
  authz: AuthzConfig | undefined,
  req: Request,
  operation: string,
  target: WorkTarget,
): Promise<void> {
  if (!authz?.enabled) return;
  const answer = await askAuthz(authz, target, callerOf(req, operation));
  if (!answer.authorized)
    throw new HttpError(
      403,
      'not_authorized',
      `The authorization service refused work on ${target.repository_url}${target.iac_path ? ` (${target.iac_path})` : ''}: ${answer.reason ?? 'no reason given'}`,
    );
}
