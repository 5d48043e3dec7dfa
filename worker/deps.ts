// The real clients the activities get, built from configuration.
import { join } from 'node:path';
import { createActivities, type Activities } from '../activities';
import { ArtifactStore, createS3Client } from '../activities/artifacts';
import type { EngineDeps } from '../activities/drift-detection';
import { GitClient } from '../activities/git';
import { GitHubPullRequests } from '../activities/github';
import { createModel } from '../activities/model';
import { PromptCatalogue } from '../activities/prompt-catalogue';
import { RoundWorkspaces } from '../activities/workspace';
import { dataDir, gitTrustBundle, promptsDir, type KumossConfig } from '../shared/config';
import { cliConfigPath, toolPath } from '../scripts/tools.mjs';

export function engineDeps(config: KumossConfig, kind: 'terraform' | 'tofu'): EngineDeps {
  return {
    kind,
    binary: toolPath(kind),
    cliConfigFile: cliConfigPath(),
    timeoutMs: config.engine.timeout_seconds * 1000,
  };
}

export function githubClient(config: KumossConfig, token: string): GitHubPullRequests {
  return new GitHubPullRequests({
    token,
    ...(config.services.github.api_url ? { baseUrl: config.services.github.api_url } : {}),
  });
}

export function buildActivities(config: KumossConfig): { activities: Activities; artifacts: ArtifactStore } {
  const artifacts = new ArtifactStore(createS3Client(config.storage), config.storage.bucket);
  const git = new GitClient({ caFile: gitTrustBundle(config), token: process.env.GIT_TOKEN });
  const engines = { terraform: engineDeps(config, 'terraform'), tofu: engineDeps(config, 'tofu') };
  const activities = createActivities({
    engine: engines[config.engine.binary],
    git,
    artifacts,
    model: createModel(config.model),
    catalogue: new PromptCatalogue(promptsDir(config)),
    workspaces: new RoundWorkspaces(join(dataDir(config), 'work'), git, engines, config.engine.binary),
    ...(process.env.GIT_TOKEN ? { github: githubClient(config, process.env.GIT_TOKEN) } : {}),
  });
  return { activities, artifacts };
}
