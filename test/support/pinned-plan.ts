// A pinned plan as a generate round records it — one tag change on a security group — for tests
// that need a session with a plan pinned without running the round.
import type { PinnedPlan } from '../../shared/contracts';

export function testPinnedPlan(
  sessionId: string,
  sha256: string,
  extra: Partial<PinnedPlan> = {},
): PinnedPlan {
  return {
    round_id: 'r-gen',
    key: `sessions/${sessionId}/rounds/r-gen/generate/cycle-1/plan.tfplan`,
    sha256,
    commit: 'c0ffee',
    state_serial: 1,
    state_lineage: 'l',
    impact: {
      create: 0,
      update: 1,
      replace: 0,
      destroy: 0,
      destroyed: [],
      replaced: [],
      changes: [{ address: 'aws_security_group.web', action: 'update' }],
      targets: ['aws_security_group.web'],
      not_in_plan: [],
    },
    ...extra,
  };
}
