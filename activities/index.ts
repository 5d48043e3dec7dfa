// All activities, built from their clients (createActivities(deps)); workflows import the type only.
import { createDriftDetectionActivities, type DriftDetectionDeps } from './drift-detection';
import { createDriftRoundActivities, type DriftRoundDeps } from './drift-round';
import type { GitHubPullRequests } from './github';
import { createPullRequestActivities } from './pull-requests';

export type ActivityDeps = DriftDetectionDeps & DriftRoundDeps & { github?: GitHubPullRequests };

export function createActivities(deps: ActivityDeps) {
  return {
    ...createDriftDetectionActivities(deps),
    ...createDriftRoundActivities(deps),
    ...createPullRequestActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
