// Repository URLs and webhook endpoints a request names are checked where they enter: a private,
// loopback or link-local target the configuration does not allow is a 400 naming the field
// (shared/network-targets.ts).
import { refusedTarget, type TargetPolicy } from '../shared/network-targets';
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
