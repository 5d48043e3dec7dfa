// All activities, built from their clients (createActivities(deps)); workflows import the type only.
import { createDriftDetectionActivities, type DriftDetectionDeps } from './drift-detection';

export type ActivityDeps = DriftDetectionDeps;

export function createActivities(deps: ActivityDeps) {
  return {
    ...createDriftDetectionActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
