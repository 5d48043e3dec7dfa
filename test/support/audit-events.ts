// CloudTrail management events as EventBridge delivers them, for the tests: the recorded-shape
// sample (test/fixtures/audit-events/aws-authorize-security-group-ingress.json) with its own event
// id, naming a given security group, with any detail field replaced.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const sample = JSON.parse(
  readFileSync(
    join(import.meta.dirname, '..', 'fixtures', 'audit-events', 'aws-authorize-security-group-ingress.json'),
    'utf8',
  ),
) as { detail: Record<string, unknown> & { requestParameters: { groupId: string } } };

/** The sample's principal. */
export const SAMPLE_ACTOR =
  'arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Admin_0a1b2c3d4e5f6a7b/alice@example.com';

export function ingressEvent(eventID: string, groupId: string, over: Record<string, unknown> = {}) {
  const e = structuredClone(sample);
  e.detail.eventID = eventID;
  e.detail.requestParameters.groupId = groupId;
  const rules = (e.detail.responseElements as { securityGroupRuleSet?: { items: { groupId: string }[] } })
    .securityGroupRuleSet;
  for (const r of rules?.items ?? []) r.groupId = groupId;
  Object.assign(e.detail, over);
  return e;
}
