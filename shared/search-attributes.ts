// Search attributes Kumoss sets (registered by the worker and the API at start-up, and in
// temporal-dev.yaml for the dev server), so that
// `temporal workflow list --query "KumossSessionId='s-1'"` finds a session's runs. Sandbox-safe.
import { defineSearchAttributeKey, SearchAttributeType, type SearchAttributePair } from '@temporalio/common';
import type { DriftRoundInput } from './contracts';

export const KumossSessionId = defineSearchAttributeKey('KumossSessionId', SearchAttributeType.KEYWORD);
export const KumossRoundId = defineSearchAttributeKey('KumossRoundId', SearchAttributeType.KEYWORD);
export const KumossMode = defineSearchAttributeKey('KumossMode', SearchAttributeType.KEYWORD);
export const KumossCloud = defineSearchAttributeKey('KumossCloud', SearchAttributeType.KEYWORD);
export const KumossOutcome = defineSearchAttributeKey('KumossOutcome', SearchAttributeType.KEYWORD);
export const KumossRunnerGroup = defineSearchAttributeKey('KumossRunnerGroup', SearchAttributeType.KEYWORD);
export const KumossOrganization = defineSearchAttributeKey('KumossOrganization', SearchAttributeType.KEYWORD);
export const KumossPlanStatus = defineSearchAttributeKey('KumossPlanStatus', SearchAttributeType.KEYWORD);
export const KumossStack = defineSearchAttributeKey('KumossStack', SearchAttributeType.KEYWORD);

/** Every custom search attribute Kumoss sets: registered at start-up (shared/infra/temporal-setup.ts). */
export const KUMOSS_SEARCH_ATTRIBUTES = [
  KumossSessionId,
  KumossRoundId,
  KumossMode,
  KumossCloud,
  KumossOutcome,
  KumossRunnerGroup,
  KumossOrganization,
  KumossPlanStatus,
  KumossStack,
] as const;

/** The attributes a drift round is started with. */
export function driftRoundSearchAttributes(input: DriftRoundInput): SearchAttributePair[] {
  return [
    { key: KumossSessionId, value: input.session_id },
    { key: KumossRoundId, value: input.round_id },
    { key: KumossMode, value: input.mode },
    { key: KumossCloud, value: input.cloud },
  ];
}
