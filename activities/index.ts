// All activities, built from their clients (createActivities(deps)); workflows import the type only.
import { join } from 'node:path';
import { projectRoot } from '../shared/infra/config';
import { createDriftDetectionActivities, type DriftDetectionDeps } from './drift-detection';
import { createDriftRoundActivities, type DriftRoundDeps } from './drift-round';
import { createGenerateRoundActivities } from './generate-round';
import type { GitHubPullRequests } from './github';
import { createPullRequestActivities, type PullRequestDeps } from './pull-requests';
import { createSessionStoreActivities } from './session-store';
import { createStackDetectionActivities, type StackDetectionDeps } from './stack-detection';
import { createWebhookActivities } from './webhooks';
import type { TargetPolicy } from '../shared/infra/network-targets';
import { createRunnerActivities, type RunnerDeps } from './runners';

export type ActivityDeps = DriftDetectionDeps &
  DriftRoundDeps &
  Pick<StackDetectionDeps, 'engines' | 'sessionDefaults' | 'stackWorkspaces'> &
  Omit<PullRequestDeps, 'github'> & {
    github?: GitHubPullRequests;
    /** The runner DAGs' registry and cloud clients; without them the worker runs no runner DAG. */
    runners?: RunnerDeps;
    /** The compliance policies (`<dir>/<cloud>/*.rego`; default: the project's policies/). */
    policiesDir?: string;
    /** Private targets webhooks may reach (shared/infra/network-targets.ts); absent: none. */
    targets?: TargetPolicy;
  };

export function createActivities(deps: ActivityDeps) {
  const activities = {
    ...createDriftDetectionActivities(deps),
    ...createDriftRoundActivities(deps),
    ...createGenerateRoundActivities({
      ...deps,
      policiesDir: deps.policiesDir ?? join(projectRoot, 'policies'),
    }),
    ...createPullRequestActivities(deps),
    ...createSessionStoreActivities(deps),
    ...createStackDetectionActivities(deps),
    ...createWebhookActivities(deps),
  };
  // Registered under their dotted seed names (runner.drift_detect_init, …); workflows reach them
  // by name, so they stay out of the Activities type.
  if (deps.runners) Object.assign(activities, createRunnerActivities(deps.runners));
  return activities;
}

export type Activities = ReturnType<typeof createActivities>;
