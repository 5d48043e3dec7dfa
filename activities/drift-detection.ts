// Detection on a Terraform root in a repository: clone, init, plan -out, show -json, derive the
// drifted addresses. The plan and its JSON go to object storage; only keys and addresses return
// (claim check: plans never travel through workflow history).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { driftedAddresses } from '../shared/drift';
import { ErrorTypes } from '../shared/errors';
import type { ArtifactStore } from '../shared/infra/object-store';
import { EngineClient, EngineError, type EngineBinary, type EngineCall } from './engine';
import type { GitAccess } from './git-access';
import type { GitClient } from './git';
import type { EngineSlots } from './engine-slots';
import type { ManagedState } from './managed-state';
import type { EngineSandbox } from './sandbox';
import type { CloudCredentials, RunCredentials } from './cloud-credentials';
import { readPlanForDrift } from './plan-reader';
import { legacyStateProjectId } from '../shared/infra/db/sessions';

export interface EngineDeps {
  kind: EngineBinary;
  binary: string;
  cliConfigFile: string;
  timeoutMs: number;
  /** Cloud settings for the providers (endpoints, a region); credential variables are dropped. */
  env?: NodeJS.ProcessEnv;
  /**
   * Credentials of engine clients built outside a run of an organization (a test bed's own
   * applies); a run's come from `cloudCredentials`.
   */
  runCredentials?: () => Promise<RunCredentials | undefined>;
  /** EngineOptions.goMemoryLimitMib (engine.go_memory_limit_mib). */
  goMemoryLimitMib?: number;
  onCall?: (call: EngineCall) => void;
  /** The worker's engine slots, shared by both engines (engine.max_concurrent). */
  slots?: EngineSlots;
  /** Kumoss-managed state for roots that declare no backend (activities/managed-state.ts). */
  managedState?: ManagedState;
  /** The engine's sandbox (activities/sandbox.ts). */
  sandbox?: EngineSandbox;
  /** Runs' own cloud credentials from their organization's cloud connection. */
  cloudCredentials?: CloudCredentials;
}

export interface DriftDetectionDeps {
  engine: EngineDeps;
  git: GitClient;
  /** An operator's run: the operator's token for the repository's host (absent: `git` as given). */
  gitAccess?: GitAccess;
  artifacts: ArtifactStore;
}

import type { DetectDriftInput, DetectDriftOutput } from '../shared/round-contracts';
export type { DetectDriftInput, DetectDriftOutput };

function hooks() {
  const ctx = Context.current();
  return { signal: ctx.cancellationSignal, heartbeat: (d: string) => ctx.heartbeat(d) };
}

/** Translates engine failures: permanent ones must not be retried. */
export function toActivityFailure(err: unknown): unknown {
  if (err instanceof EngineError && err.permanent) {
    return ApplicationFailure.nonRetryable(
      err.message,
      ErrorTypes.EngineConfiguration,
      err.output.slice(0, 4000),
    );
  }
  return err;
}

export function createDriftDetectionActivities(deps: DriftDetectionDeps) {
  return {
    async detectDrift(input: DetectDriftInput): Promise<DetectDriftOutput> {
      const work = mkdtempSync(join(tmpdir(), 'kumoss-detect-'));
      try {
        const checkout = join(work, 'repo');
        const branch = input.branch ?? 'main';
        const git = deps.gitAccess
          ? await deps.gitAccess.forRepository(input.repositoryUrl, undefined)
          : deps.git;
        const remote = await git.remoteBranches(input.repositoryUrl);
        if (!remote.has(branch)) {
          throw ApplicationFailure.nonRetryable(
            `branch ${branch} not found in ${input.repositoryUrl}`,
            ErrorTypes.RepositoryNotFound,
          );
        }
        await git.checkout({ url: input.repositoryUrl, dir: checkout, branch });
        const engine = new EngineClient({
          ...deps.engine,
          workdir: join(checkout, input.iacPath ?? '.'),
          runDir: work,
          scopeId: input.scopeId,
          stateProjectId:
            input.stateProjectId ??
            legacyStateProjectId(input.repositoryUrl, input.iacPath ?? '', input.scopeId),
        });
        const h = hooks();
        const planFile = join(work, 'plan.tfplan');
        const jsonFile = join(work, 'plan.json');
        const plan = await engine.plan({ out: planFile, targets: input.targets }, h);
        await engine.showJson(planFile, jsonFile, h);
        const parsed = await readPlanForDrift(jsonFile);
        const planKey = `${input.artifactPrefix}/plan.tfplan`;
        const planJsonKey = `${input.artifactPrefix}/plan.json`;
        await deps.artifacts.putFile(planKey, planFile);
        await deps.artifacts.putFile(planJsonKey, jsonFile, 'application/json');
        return {
          drifted: driftedAddresses(parsed),
          hasChanges: plan.hasChanges,
          planKey,
          planJsonKey,
          terraformVersion: parsed.terraform_version,
        };
      } catch (err) {
        throw toActivityFailure(err);
      } finally {
        rmSync(work, { recursive: true, force: true });
      }
    },
  };
}
