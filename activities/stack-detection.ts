// The activities of a stack's scheduled detection run: plan-only (no model, no branch, no commit).
// The stack is read from the registry at the start of every run (a change to it applies from the
// next run); the plan, its drift report and what the run saw go to object storage under
// stacks/<stack>/runs/<run>/; the inbox is updated in one transaction keyed by the run id.
import { join } from 'node:path';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { cloudIdsOfState, type AuditSummary, type StateResource } from '../shared/audit-events';
import { deriveDrift, type AttributeChange, type DriftOperation } from '../shared/drift';
import { activeRules, applyExceptions } from '../shared/drift-exceptions';
import { ErrorTypes } from '../shared/errors';
import type { Db } from '../shared/infra/db';
import { RegistryError } from '../shared/infra/db/runners';
import type { SessionSettings } from '../shared/contracts';
import type { SessionDefaults } from '../shared/infra/db/sessions';
import {
  claimRemediation,
  failDetectionRun,
  getStack,
  recordDetection,
  replaceStackCloudIds,
  startDetectionRun,
  type InboxChange,
} from '../shared/infra/db/stacks';
import type { ArtifactStore } from '../shared/infra/object-store';
import { subscribedEvents } from '../shared/infra/db/webhooks';
import type { WebhookEvent } from '../shared/webhook-contracts';
import { itemValue, remediationRequest, type DetectedDrift, type Stack } from '../shared/stack-contracts';
import { toActivityFailure, type EngineDeps } from './drift-detection';
import { EngineClient } from './engine';
import type { GitAccess } from './git-access';
import { GitError, type GitClient } from './git';
import { readPlanForDrift, readPlanStateResources } from './plan-reader';
import type { PromptCatalogue } from './prompt-catalogue';
import { resolveIacDir, type StackWorkspace, type StackWorkspaces } from './workspace';

export interface StackDetectionDeps {
  db: Db;
  git: GitClient;
  /** The stack's organization's credential for its repository (absent: `git` as given). */
  gitAccess?: GitAccess;
  artifacts: ArtifactStore;
  catalogue: PromptCatalogue;
  /** Engine settings by engine kind (the stack names its engine). */
  engines: Record<'terraform' | 'tofu', EngineDeps>;
  /** This worker's warm workspaces of its stacks. */
  stackWorkspaces: StackWorkspaces;
  /** What an auto-remediation session starts with (the configuration's orchestration settings). */
  sessionDefaults?: SessionDefaults;
}

const DEFAULT_SESSION: SessionDefaults = { max_drift_reports: 3, drift_group_operations: 8 };

export interface StackPlanOutput {
  drift_count: number;
  /** Drifted resources left once the exception rules are applied. */
  operation_count: number;
  whitelisted_count: number;
  plan_key: string;
  report_key: string;
  /**
   * What the run saw, item by item (an artifact: a large root's list stays out of history);
   * absent when it saw nothing (a clean run stores and reads no list).
   */
  seen_key?: string;
}

export const stackRunKey = (stackUuid: string, runId: string, name: string) =>
  `stacks/${stackUuid}/runs/${encodeURIComponent(runId)}/${name}`;

export function createStackDetectionActivities(deps: StackDetectionDeps) {
  return {
    /**
     * The stack as registered now, and the run recorded as started; null when it was deleted. With
     * it, the webhook events its organization's endpoints subscribe to now: the run announces only
     * those (an endpoint registered during a run hears from the next one).
     */
    async beginStackDetection(input: {
      stack_uuid: string;
      run_id: string;
    }): Promise<(Stack & { subscribed_events: WebhookEvent[] }) | null> {
      try {
        const stack = await getStack(deps.db, input.stack_uuid);
        const [subscribed_events] = await Promise.all([
          subscribedEvents(deps.db, stack.organization_uuid),
          startDetectionRun(deps.db, input.stack_uuid, input.run_id),
        ]);
        return { ...stack, subscribed_events };
      } catch (err) {
        if (err instanceof RegistryError && err.kind === 'not_found') return null;
        throw err;
      }
    },

    /**
     * Checkout (this worker's warm workspace of the stack, fetched; else a clone), init when needed,
     * plan -out, and show -json when the plan changes something; the drift derived, the exception
     * rules applied.
     */
    async planStack(input: {
      stack: Stack;
      run_id: string;
      today: string;
      /** An event-driven run: `-target` of these addresses. */
      targets?: string[];
    }): Promise<StackPlanOutput> {
      const { stack, run_id } = input;
      const ctx = Context.current();
      const h = { signal: ctx.cancellationSignal, heartbeat: (d: string) => ctx.heartbeat(d) };
      try {
        const git = deps.gitAccess
          ? await deps.gitAccess.forRepository(stack.repository_url, stack.organization_uuid)
          : deps.git;
        // The branch is chosen from what the fetch (or the clone) brought: no ls-remote before it.
        const chooseBranch = (remote: Map<string, string>): string => {
          // A reachable repository that lists no branch at all is retried (the engine activity's
          // attempts): a git server under load has answered so once for a repository with
          // branches. An empty repository fails after the attempts with the same message.
          if (remote.size === 0)
            throw ApplicationFailure.retryable(
              `branch ${stack.branch || '(default)'} not found in ${stack.repository_url} (it lists no branch)`,
              ErrorTypes.RepositoryNotFound,
            );
          const branch = stack.branch || (remote.has('main') ? 'main' : [...remote.keys()][0]);
          if (!branch || !remote.has(branch))
            throw ApplicationFailure.nonRetryable(
              `branch ${stack.branch || '(default)'} not found in ${stack.repository_url}`,
              ErrorTypes.RepositoryNotFound,
            );
          return branch;
        };
        const inWorkspace = async (ws: StackWorkspace): Promise<StackPlanOutput> => {
          const iacDir = resolveIacDir(ws.dir, stack.iac_path);
          const engine = new EngineClient({
            ...deps.engines[stack.engine],
            workdir: iacDir,
            runDir: ws.runDir,
            scopeId: stack.scope_id,
            ...(deps.engines[stack.engine].cloudCredentials
              ? {
                  runCredentials: () =>
                    deps.engines[stack.engine].cloudCredentials!.forRun({
                      organization_uuid: stack.organization_uuid,
                      cloud: stack.cloud,
                      run: `stack-${run_id}`,
                    }),
                }
              : {}),
            stateProjectId: stack.state_project_id,
          });
          if (ws.initialized) engine.assumeInitialized();
          const planFile = join(ws.scratch, 'plan.tfplan');
          const jsonFile = join(ws.scratch, 'plan.json');
          // Read-only: no state lock (see PlanOptions.lock).
          const plan = await engine.plan(
            { out: planFile, lock: false, ...(input.targets ? { targets: input.targets } : {}) },
            h,
          );
          ws.markInitialized();
          // A plan that changes nothing (exit code 0) has no drift to derive: every planned action
          // is a no-op, and drift counts only where the code disagrees. Its state is read from the
          // plan file itself, without the second provider start of `show -json`.
          let resources: StateResource[] = [];
          let drift: DriftOperation[] = [];
          if (plan.hasChanges) {
            await engine.showJson(planFile, jsonFile, h);
            drift = deriveDrift(await readPlanForDrift(jsonFile, (r) => resources.push(r)));
          } else resources = readPlanStateResources(planFile);
          // What the state holds by cloud id: an audit event's resources find this stack by it (a
          // targeted run saw only part of the state and leaves the index as the last whole run left it).
          if (!input.targets) await replaceStackCloudIds(deps.db, stack, cloudIdsOfState(resources));
          const rules = activeRules(deps.catalogue.driftExceptions(stack.cloud).rules, input.today);
          const { survivors, whitelisted } = applyExceptions(drift, rules);
          const seen: DetectedDrift[] = [];
          const values = (c: AttributeChange | undefined) =>
            c && c.path
              ? {
                  declared: itemValue(c.declared),
                  actual: itemValue(c.actual),
                  ...(c.note ? { note: c.note } : {}),
                }
              : {};
          for (const op of survivors) {
            const action = op.drift_actions.join(',') || op.planned_actions.join(',');
            for (const c of op.changes)
              seen.push({ address: op.address, attribute: c.path || '*', action, ...values(c) });
          }
          for (const w of whitelisted) {
            const op = drift.find((d) => d.address === w.address);
            const action = op ? op.drift_actions.join(',') || op.planned_actions.join(',') : 'update';
            for (const a of w.attributes)
              seen.push({
                address: w.address,
                attribute: a,
                action,
                rule_id: w.rule_id,
                ...values(op?.changes.find((c) => (c.path || '*') === a)),
              });
          }
          const plan_key = stackRunKey(stack.stack_uuid, run_id, 'plan.tfplan');
          const report_key = stackRunKey(stack.stack_uuid, run_id, 'drift-report.json');
          const seen_key = seen.length > 0 ? stackRunKey(stack.stack_uuid, run_id, 'seen.json') : undefined;
          await Promise.all([
            deps.artifacts.putFile(plan_key, planFile),
            ...(plan.hasChanges
              ? [
                  deps.artifacts.putFile(
                    stackRunKey(stack.stack_uuid, run_id, 'plan.json'),
                    jsonFile,
                    'application/json',
                  ),
                ]
              : []),
            deps.artifacts.putJson(report_key, {
              stack_uuid: stack.stack_uuid,
              run_id,
              drift,
              operations: survivors,
              whitelisted,
            }),
            ...(seen_key ? [deps.artifacts.putJson(seen_key, seen)] : []),
          ]);
          return {
            drift_count: drift.length,
            operation_count: survivors.length,
            whitelisted_count: whitelisted.length,
            plan_key,
            report_key,
            ...(seen_key ? { seen_key } : {}),
          };
        };
        return await deps.stackWorkspaces.hold(
          {
            stack_uuid: stack.stack_uuid,
            organization_uuid: stack.organization_uuid,
            repository_url: stack.repository_url,
            engine: deps.engines[stack.engine].binary,
          },
          { git, branch: chooseBranch },
          inWorkspace,
        );
      } catch (err) {
        if (err instanceof GitError)
          throw ApplicationFailure.nonRetryable(
            `Repository ${stack.repository_url} not reachable: ${err.message}`,
            ErrorTypes.RepositoryNotFound,
          );
        throw toActivityFailure(err);
      }
    },

    /** The inbox after this run: one transaction; a retry of a recorded run changes nothing. */
    async recordStackDetection(input: {
      stack_uuid: string;
      run_id: string;
      plan: StackPlanOutput;
      targets?: string[];
      audit?: AuditSummary;
    }): Promise<
      Omit<InboxChange, 'openedItems' | 'resolvedItems' | 'opened'> & {
        opened: DetectedDrift[];
        resolved_items: { address: string; attribute: string }[];
        opened_count: number;
      }
    > {
      const seen = input.plan.seen_key
        ? (JSON.parse(await deps.artifacts.getText(input.plan.seen_key)) as DetectedDrift[])
        : [];
      const change = await recordDetection(deps.db, {
        stack_uuid: input.stack_uuid,
        run_id: input.run_id,
        seen,
        drift_count: input.plan.drift_count,
        plan_key: input.plan.plan_key,
        report_key: input.plan.report_key,
        ...(input.targets ? { targets: input.targets } : {}),
        ...(input.audit ? { audit: input.audit } : {}),
      });
      const { openedItems, resolvedItems, opened, ...counts } = change;
      // What the webhooks announce: the alerting items opened (never a whitelisted one), and those
      // resolved; at most 500 of each travel through history (the inbox holds them all).
      return {
        ...counts,
        opened_count: opened,
        // Names only: the values stay in the inbox (and out of history).
        opened: openedItems
          .filter((d) => !d.rule_id)
          .slice(0, 500)
          .map(({ address, attribute, action }) => ({ address, attribute, action })),
        resolved_items: resolvedItems.slice(0, 500),
      };
    },

    /**
     * The session for a run's new drift items (auto-remediation `open_session`): claimed unless
     * the stack's last one is still open; the workflow starts it. Never an apply.
     */
    async openRemediationSession(input: {
      stack: Stack;
      run_id: string;
      session_id: string;
      items: DetectedDrift[];
    }): Promise<
      | { opened: true; settings: SessionSettings; text: string; targets: string[] }
      | { opened: false; reason: string; session_id?: string }
    > {
      const claim = await claimRemediation(deps.db, {
        stack_uuid: input.stack.stack_uuid,
        run_id: input.run_id,
        session_id: input.session_id,
        items: input.items,
        defaults: deps.sessionDefaults ?? DEFAULT_SESSION,
      });
      if (!claim.opened) return claim;
      return { ...claim, ...remediationRequest(input.stack.name, input.items) };
    },

    async failStackDetection(input: { run_id: string; error: string }): Promise<void> {
      await failDetectionRun(deps.db, input.run_id, input.error);
    },
  };
}

export type StackDetectionActivities = ReturnType<typeof createStackDetectionActivities>;
