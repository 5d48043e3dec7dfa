// Repository URLs and webhook endpoints a request names are checked where they enter: a private,
// loopback or link-local target the configuration does not allow is a 400 naming the field
// (shared/infra/network-targets.ts). A repository URL must also be on one of the caller's organization's
// git connections (shared/infra/db/git-connections.ts).
import type { Db } from '../shared/infra/db';
import { gitConnectionFor } from '../shared/infra/db/git-connections';
import { refusedTarget, type TargetPolicy } from '../shared/infra/network-targets';
import { HttpError } from './errors';

export async function requireAllowedTarget(
  policy: TargetPolicy | undefined,
  field: string,
  url: string,
): Promise<void> {
  if (!policy) return;
  const why = await refusedTarget(url, policy);
  if (why) throw new HttpError(400, 'invalid_request', `${field}: ${why}`);
}

/** 400 naming the field unless the URL's origin is a git connection of the organization. */
export async function requireConnectedRepository(
  db: Db,
  organization_uuid: string,
  field: string,
  url: string,
): Promise<void> {
  if (await gitConnectionFor(db, organization_uuid, url)) return;
  let origin = url;
  try {
    origin = new URL(url).origin;
  } catch {
    // The schema already refused a URL that does not parse.
  }
  throw new HttpError(
    400,
    'invalid_request',
    `${field}: ${origin} is not a git connection of your organization; an admin registers it with POST /api/v1/admin/connections/git`,
  );
}
