// The real clients the activities get, built from configuration.
import { createActivities, type Activities } from '../activities';
import { ArtifactStore, createS3Client } from '../activities/artifacts';
import { GitClient } from '../activities/git';
import { gitTrustBundle, type KumossConfig } from '../shared/config';
import { cliConfigPath, toolPath } from '../scripts/tools.mjs';

export function buildActivities(config: KumossConfig): { activities: Activities; artifacts: ArtifactStore } {
  const artifacts = new ArtifactStore(createS3Client(config.storage), config.storage.bucket);
  const git = new GitClient({ caFile: gitTrustBundle(config), token: process.env.GIT_TOKEN });
  const activities = createActivities({
    engine: {
      kind: config.engine.binary,
      binary: toolPath(config.engine.binary),
      cliConfigFile: cliConfigPath(),
      timeoutMs: config.engine.timeout_seconds * 1000,
    },
    git,
    artifacts,
  });
  return { activities, artifacts };
}
