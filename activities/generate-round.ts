// Generate rounds and apply (issue 16): the model writes the change a request asks for on the
// session branch; validate and plan -out check it; the validated plan is pinned — its file stored
// with its SHA-256, the commit it was made from and the state serial it saw — and apply later runs
// exactly that file, after checking that neither the branch nor the state moved since.
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import type { ComplianceResult, PinnedPlan, PlanImpact, PlannedChange } from '../shared/contracts';
import { z } from 'zod';
import { parsePlanJson } from '../shared/drift';
import { readStateResources } from './plan-reader';
import { complianceRefusal, stalePlanMessage } from '../shared/contracts';
import type { Db } from '../shared/infra/db';
import { ErrorTypes } from '../shared/errors';
import { toolPath, waitForTool } from '../shared/infra/tools.mjs';
import { diffHistory } from './diff-history';
import { runProcess } from './process';
import { toActivityFailure } from './drift-detection';
import { configResources, getJson, hooks, key, writeModelEdits, type DriftRoundDeps } from './drift-round';
import { EngineError } from './engine';
import type { FilterDecision, StateResource } from './model/port';
import { readConfigFiles, type RoundRef, type Workspace } from './workspace';

/** What `apply/started.json` records: the state serial an apply began on. */
const startedSerialSchema = z.object({ serial: z.number().nullable() });

export interface GenerateChangeOutput {
  changed: boolean;
  /** Why nothing was written: the model declined (offline: outside its set). */
  declined?: string;
  summary: string;
  files: string[];
  commit?: string;
  resultKey: string;
}

export interface ValidateChangeOutput {
  valid: boolean;
  /** The engine's diagnostic when the change does not validate (fed to the repair cycle). */
  reason?: string;
  pinned?: PinnedPlan;
  reinitialized: boolean;
}

export interface ApplyOutput {
  summary: string;
  logKey: string;
  stateSerial: number | null;
  /** True when an earlier attempt (lost with its worker) had applied the plan already. */
  resumed: boolean;
}

const generateMarker = (ref: RoundRef, cycle: number) =>
  `Kumoss-Generate: ${ref.sessionId}/${ref.roundId}/${cycle}`;

/** The managed resource instances of the state, with their values (empty without a state). */
async function stateResources(ws: Workspace): Promise<StateResource[]> {
  const file = join(ws.scratch, `state-${Date.now()}.json`);
  await ws.engine.stateJson(file, hooks());
  return readStateResources(file);
}

/** What a plan does, address by address (no-ops left out), in address order. */
export function plannedChanges(planJson: unknown): PlannedChange[] {
  const out: PlannedChange[] = [];
  for (const rc of parsePlanJson(planJson).resource_changes ?? []) {
    const a = rc.change.actions;
    const action: PlannedChange['action'] | undefined =
      a.includes('delete') && a.includes('create')
        ? 'replace'
        : a.includes('delete')
          ? 'destroy'
          : a.includes('create')
            ? 'create'
            : a.includes('update')
              ? 'update'
              : a.includes('read')
                ? 'read'
                : undefined;
    if (action) out.push({ address: rc.address, action });
  }
  return out.sort((x, y) => (x.address < y.address ? -1 : x.address > y.address ? 1 : 0));
}

/**
 * The impact banner: counts by action, every address with its action, the targets the plan was
 * made with, and what else in the root would change but is not in the plan (`whole`: the changes
 * of a plan of the whole root).
 */
export function planImpact(
  planJson: unknown,
  opts: { targets?: string[] | null; whole?: PlannedChange[] } = {},
): PlanImpact {
  const changes = plannedChanges(planJson);
  const count = (action: PlannedChange['action']) => changes.filter((c) => c.action === action).length;
  const inPlan = new Set(changes.map((c) => c.address));
  return {
    create: count('create'),
    update: count('update'),
    replace: count('replace'),
    destroy: count('destroy'),
    destroyed: changes.filter((c) => c.action === 'destroy').map((c) => c.address),
    replaced: changes.filter((c) => c.action === 'replace').map((c) => c.address),
    changes,
    targets: opts.targets?.length ? opts.targets : null,
    not_in_plan: (opts.whole ?? []).filter((c) => !inPlan.has(c.address) && c.action !== 'read'),
  };
}

async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

export interface GenerateRoundDeps extends DriftRoundDeps {
  /** Admin overrides of compliance findings live in the metadata store. */
  db: Db;
  /** `<dir>/<cloud>/*.rego`: the compliance policies (config compliance.policies_dir). */
  policiesDir: string;
}

/** `opa eval --format json` of `data.kumoss.compliance`: the deny and warn sets, as strings. */
const opaAnswerSchema = z.looseObject({
  result: z
    .array(
      z.looseObject({
        expressions: z
          .array(
            z.looseObject({
              value: z
                .looseObject({
                  deny: z.array(z.unknown().transform(String)).optional(),
                  warn: z.array(z.unknown().transform(String)).optional(),
                })
                .optional(),
            }),
          )
          .optional(),
      }),
    )
    .optional(),
});

/** How long an audit waits for OPA still building in the background (its build's own bound). */
const OPA_BUILD_WAIT_MS = 30 * 60 * 1000;

/**
 * OPA's answer for `data.kumoss.compliance`: its deny and warn sets. The first `npm start` builds
 * OPA in the background once the system is up: an audit in those minutes waits for it, saying so.
 */
export async function evaluatePolicies(
  policyDir: string,
  planJson: string,
  wait: { signal?: AbortSignal; heartbeat?: (detail: string) => void } = {},
) {
  const { signal, heartbeat } = wait;
  await waitForTool('opa', OPA_BUILD_WAIT_MS, {
    ...(heartbeat ? { onWait: heartbeat } : {}),
    ...(signal ? { signal } : {}),
  });
  const r = await runProcess(
    toolPath('opa'),
    ['eval', '--format', 'json', '--data', policyDir, '--input', planJson, 'data.kumoss.compliance'],
    { timeoutMs: 5 * 60 * 1000, ...(signal ? { signal } : {}) },
  );
  if (r.exitCode !== 0)
    // The policies do not compile: a person must fix them; retrying changes nothing.
    throw ApplicationFailure.nonRetryable(
      `The compliance policies in ${policyDir} do not evaluate: ${r.stderr.trim().split('\n')[0] ?? r.stdout.slice(0, 300)}`,
      ErrorTypes.CompliancePolicyError,
    );
  const out = opaAnswerSchema.parse(JSON.parse(r.stdout));
  const value = out.result?.[0]?.expressions?.[0]?.value ?? {};
  return { deny: [...(value.deny ?? [])].sort(), warn: [...(value.warn ?? [])].sort() };
}

export function createGenerateRoundActivities(deps: GenerateRoundDeps) {
  const { workspaces, git, artifacts, model, catalogue, db } = deps;

  return {
    /** Generate mode: create/modify requests are accepted, drift requests declined. */
    async filterGenerateRequest(input: { ref: RoundRef; text: string }): Promise<FilterDecision> {
      return model.filterRequest({
        text: input.text,
        prompt: catalogue.targetingPolicies(),
        mode: 'generate',
      });
    },

    /** One generate cycle: the model's change written, committed and pushed (or its reason not to). */
    async generateChange(input: {
      ref: RoundRef;
      text: string;
      cycle: number;
      feedback?: string;
    }): Promise<GenerateChangeOutput> {
      const { ref, cycle } = input;
      try {
        const ws = await workspaces.get(ref);
        const resultKey = key(ref, `generate/cycle-${cycle}/result.json`);
        const marker = generateMarker(ref, cycle);
        // Every attempt starts from the branch's last commit (an earlier one may have left edits).
        await git.discardChanges(ws.dir, ['.terraform/', '.terraform.lock.hcl']);
        const found = (await git.commitsByMarker(ws.dir, [marker])).get(marker);
        if (found) {
          // This cycle already committed (a retry after a crash): report that commit.
          const previous = await getJson<GenerateChangeOutput>(artifacts, resultKey);
          await ws.git.push(ws.dir, ref.branch);
          return { ...previous, changed: true, commit: found };
        }
        const [files, resources, state] = await Promise.all([
          readConfigFiles(ws.iacDir, ws.dir),
          configResources(ws.iacDir, ws.dir),
          stateResources(ws),
        ]);
        const generation = await model.generate({
          text: input.text,
          files,
          resources,
          state,
          prompt: catalogue.compose(
            ref.cloud,
            resources.map((r) => r.type),
            input.text,
          ),
          ...(input.feedback ? { feedback: input.feedback } : {}),
        });
        const result: GenerateChangeOutput = {
          changed: false,
          summary: generation.summary,
          files: generation.edits.map((e) => e.path),
          resultKey,
          ...(generation.declined ? { declined: generation.declined } : {}),
        };
        if (generation.declined || generation.edits.length === 0) {
          await artifacts.putJson(resultKey, result);
          return {
            ...result,
            declined: generation.declined ?? 'The model proposed no change.',
          };
        }
        const { uploads, edited } = await writeModelEdits(
          ws,
          artifacts,
          generation.edits,
          new Map(files.map((f) => [f.path, f.content])),
          key(ref, `generate/cycle-${cycle}/changes`),
        );
        // The answer is stored before the commit exists: a retry that finds the commit reads it.
        await Promise.all([...uploads, artifacts.putJson(resultKey, result)]);
        const message = `Generate: ${generation.summary || input.text}\n\nRound ${ref.roundId}, cycle ${cycle}.\n\n${marker}`;
        const commit = await git.commitAll(ws.dir, message, edited);
        const done = { ...result, changed: commit.created, commit: commit.sha };
        const [adopted] = await Promise.all([
          ws.git.pushCycle(ws.dir, ref.branch, marker),
          artifacts.putJson(resultKey, done),
        ]);
        // An earlier attempt's push of this cycle landed after all: its commit is the cycle's.
        const sha = adopted ?? commit.sha;
        const diff = await git.run(['show', '--format=', '--no-color', sha], ws.dir);
        await artifacts.putText(key(ref, `generate/cycle-${cycle}/changes.diff`), diff, 'text/x-diff');
        if (adopted) return { ...done, changed: true, commit: adopted };
        return done;
      } catch (err) {
        throw toActivityFailure(err);
      }
    },

    /**
     * validate and plan -out on the branch head; a valid plan is stored and described as the plan
     * to pin: its SHA-256, the commit, the state serial it saw, its impact.
     */
    async validateChange(input: {
      ref: RoundRef;
      cycle: number;
      /** The branch's commit before this round's edits: the plan targets what they touch. */
      base?: string;
      /** Addresses to plan exactly (a revert: the code unchanged, these addresses brought back to it). */
      targets?: string[];
    }): Promise<ValidateChangeOutput> {
      const { ref, cycle } = input;
      try {
        const ws = await workspaces.get(ref);
        const h = hooks();
        // A pinned plan holds exactly what was asked: the chosen addresses, or the resources the
        // round's edits touch (Terraform adds what they depend on). An edit that touches no
        // resource block (an output, a provider setting) plans the whole root.
        const targets =
          input.targets ??
          (input.base
            ? [...(await diffHistory(git, ws.dir, input.base, ref.iacPath)).resources.keys()].sort()
            : []);
        const planFile = join(ws.scratch, `${ref.roundId}-generate-${cycle}.tfplan`);
        let plan;
        try {
          plan = await ws.engine.validateAndPlan({ out: planFile, targets }, h);
        } catch (err) {
          if (err instanceof EngineError && err.permanent)
            return { valid: false, reason: err.message, reinitialized: false };
          throw err;
        }
        const jsonFile = `${planFile}.json`;
        const [commit, version] = await Promise.all([
          git.head(ws.dir),
          ws.engine.stateVersion(h),
          ws.engine.showJson(planFile, jsonFile, h),
        ]);
        // The whole root planned beside it: what else would change, listed and never applied.
        let whole: PlannedChange[] = [];
        if (targets.length > 0) {
          const wholeFile = join(ws.scratch, `${ref.roundId}-generate-${cycle}-whole.tfplan`);
          await ws.engine.plan({ out: wholeFile }, h);
          await ws.engine.showJson(wholeFile, `${wholeFile}.json`, h);
          whole = plannedChanges(JSON.parse(readFileSync(`${wholeFile}.json`, 'utf8')));
        }
        const impact = planImpact(JSON.parse(readFileSync(jsonFile, 'utf8')), { targets, whole });
        const planKey = key(ref, `generate/cycle-${cycle}/plan.tfplan`);
        const [sha256] = await Promise.all([
          sha256File(planFile),
          artifacts.putFile(planKey, planFile),
          artifacts.putText(key(ref, `generate/cycle-${cycle}/plan.txt`), plan.output),
          artifacts.putFile(key(ref, `generate/cycle-${cycle}/plan.json`), jsonFile, 'application/json'),
        ]);
        return {
          valid: true,
          reinitialized: plan.reinitialized,
          pinned: {
            round_id: ref.roundId,
            key: planKey,
            sha256,
            commit,
            state_serial: version?.serial ?? null,
            state_lineage: version?.lineage ?? null,
            impact,
          },
        };
      } catch (err) {
        throw toActivityFailure(err);
      }
    },

    /** Takes the round's commits back (a change that never validated leaves the branch as it was). */
    async revertGenerated(input: { ref: RoundRef; baseCommit: string }): Promise<{ head: string }> {
      const { ref } = input;
      const ws = await workspaces.get(ref);
      const head = await git.head(ws.dir);
      if (head !== input.baseCommit) {
        await git.run(['revert', '--no-edit', '--no-commit', `${input.baseCommit}..HEAD`], ws.dir);
        await git.commitAll(
          ws.dir,
          `Revert round ${ref.roundId}: its change did not validate\n\nKumoss-Generate-Revert: ${ref.sessionId}/${ref.roundId}`,
        );
        await ws.git.push(ws.dir, ref.branch);
      }
      return { head: await git.head(ws.dir) };
    },

    /**
     * The compliance audit: OPA evaluates the cloud's policies (`policies/<cloud>/`) on the pinned
     * plan's `show -json`; the audit report is an artifact. A cloud without policies passes, and says so.
     */
    async auditPlan(input: { ref: RoundRef; pinned: PinnedPlan }): Promise<ComplianceResult> {
      const { ref, pinned } = input;
      const reportKey = key(ref, 'compliance-report.json');
      const dir = join(deps.policiesDir, ref.cloud);
      const hasPolicies =
        existsSync(dir) && readdirSync(dir).some((f) => f.endsWith('.rego') && !f.endsWith('_test.rego'));
      if (!hasPolicies) {
        const result: ComplianceResult = {
          passed: true,
          deny: [],
          warn: [],
          report_key: reportKey,
          policies: null,
        };
        await artifacts.putJson(reportKey, {
          ...result,
          note: `No compliance policies for ${ref.cloud} (${dir}).`,
        });
        return result;
      }
      const ws = await workspaces.get(ref);
      const planJson = join(ws.scratch, `${ref.roundId}-audit.json`);
      await artifacts.download(pinned.key.replace(/plan\.tfplan$/, 'plan.json'), planJson);
      const { deny, warn } = await evaluatePolicies(dir, planJson, hooks());
      const result: ComplianceResult = {
        passed: deny.length === 0,
        deny,
        warn,
        report_key: reportKey,
        policies: relative(dirname(deps.policiesDir), dir) || dir,
      };
      await artifacts.putJson(reportKey, { ...result, plan: pinned.key, sha256: pinned.sha256 });
      return result;
    },

    /** The generate report: the request, the change, the pinned plan and its impact. */
    async writeGenerateReport(input: {
      ref: RoundRef;
      text: string;
      summary: string;
      files: string[];
      repairs: number;
      pinned: PinnedPlan;
      revert?: string[];
    }): Promise<{ reportKey: string }> {
      const reportKey = key(input.ref, 'generate-report.json');
      await artifacts.putJson(reportKey, {
        request: input.text,
        ...(input.revert ? { revert: input.revert } : {}),
        summary: input.summary,
        files: input.files,
        repair_cycles: input.repairs,
        pinned_plan: input.pinned,
        impact: input.pinned.impact,
      });
      return { reportKey };
    },

    /**
     * Applies exactly the pinned plan file. Refused when the branch or the state moved since it was
     * planned. Applied at most once: the state serial tells a retry whether an earlier attempt (one
     * lost with its worker) already applied it — then the engine is asked whether anything is left,
     * instead of applying again.
     */
    async applyPinnedPlan(input: { ref: RoundRef; pinned: PinnedPlan }): Promise<ApplyOutput> {
      const { ref, pinned } = input;
      try {
        const ws = await workspaces.get(ref);
        const h = hooks();
        const head = await git.head(ws.dir);
        if (head !== pinned.commit)
          throw ApplicationFailure.nonRetryable(
            stalePlanMessage(
              `the session branch moved from ${pinned.commit.slice(0, 12)} to ${head.slice(0, 12)} since it was planned`,
            ),
            ErrorTypes.StalePlan,
          );
        const compliance = pinned.compliance;
        let override: { reason: string; by: string | null } | undefined;
        if (compliance && !compliance.passed) {
          const row = await db
            .selectFrom('sessions')
            .select('compliance_override')
            .where('session_id', '=', ref.sessionId)
            .executeTakeFirst();
          const o = row?.compliance_override;
          if (!o || o.round_id !== pinned.round_id)
            throw ApplicationFailure.nonRetryable(
              complianceRefusal(compliance.deny),
              ErrorTypes.ComplianceViolation,
            );
          override = { reason: o.reason, by: o.by };
        }
        const startedKey = key(ref, 'apply/started.json');
        const logKey = key(ref, 'apply/apply.log');
        const version = await ws.engine.stateVersion(h);
        const serial = version?.serial ?? null;
        if (version && pinned.state_lineage && version.lineage !== pinned.state_lineage)
          throw ApplicationFailure.nonRetryable(
            stalePlanMessage('the state was replaced (another lineage) since it was planned'),
            ErrorTypes.StalePlan,
          );
        if (serial !== pinned.state_serial) {
          const started = await artifacts
            .getText(startedKey)
            .then((t) => startedSerialSchema.parse(JSON.parse(t)))
            .catch(() => undefined);
          if (!started)
            throw ApplicationFailure.nonRetryable(
              stalePlanMessage(
                `the state moved from serial ${pinned.state_serial ?? 'none'} to ${serial ?? 'none'} since it was planned`,
              ),
              ErrorTypes.StalePlan,
            );
          // An earlier attempt of this apply ran and wrote the state: never apply twice. What is left?
          const check = join(ws.scratch, `${ref.roundId}-apply-check.tfplan`);
          const left = await ws.engine.plan({ out: check }, h);
          if (left.hasChanges)
            throw ApplicationFailure.nonRetryable(
              `The apply was interrupted part-way (the state moved from serial ${pinned.state_serial ?? 'none'} to ${serial ?? 'none'}); what is left is not applied blind: run a new generate round.`,
              ErrorTypes.ApplyInterrupted,
            );
          await artifacts.putText(
            logKey,
            `An earlier attempt applied the plan (state serial ${pinned.state_serial ?? 'none'} → ${serial ?? 'none'}); a fresh plan shows no change left.\n`,
          );
          return {
            summary: `Applied the pinned plan of round ${pinned.round_id} (finished by an earlier attempt).`,
            logKey,
            stateSerial: serial,
            resumed: true,
          };
        }
        const planFile = join(ws.scratch, `${ref.roundId}-pinned.tfplan`);
        await artifacts.download(pinned.key, planFile);
        if ((await sha256File(planFile)) !== pinned.sha256)
          throw ApplicationFailure.nonRetryable(
            'The pinned plan file does not match its SHA-256: it was changed after review; run a new generate round.',
            ErrorTypes.PlanTampered,
          );
        // Written before the engine touches the state: a retry that finds the serial moved knows it
        // was this apply, not someone else.
        await artifacts.putJson(startedKey, { serial: pinned.state_serial, at: new Date().toISOString() });
        const applied = await ws.engine.applyPlan(planFile, h);
        const log = `${override ? `Compliance findings overridden by an admin: ${override.reason}\n\n` : ''}${applied.output}`;
        await artifacts.putText(logKey, log);
        if (!applied.ok) {
          // The log travels with the failure: the failed round still shows what the engine said.
          throw ApplicationFailure.create({
            message: `terraform apply failed: ${applied.error ?? 'see the apply log'}`,
            type: ErrorTypes.ApplyFailed,
            nonRetryable: true,
            details: [{ log_key: logKey }],
          });
        }
        // The proof: a fresh plan of the addresses the plan targeted shows nothing left to do.
        const targets = pinned.impact.targets ?? [];
        let proof = '';
        if (targets.length > 0) {
          const fresh = await ws.engine.plan(
            { out: join(ws.scratch, `${ref.roundId}-apply-proof.tfplan`), targets },
            h,
          );
          proof = fresh.hasChanges
            ? ` A fresh plan of ${targets.join(', ')} still shows changes: see the apply log.`
            : ` A fresh plan of ${targets.join(', ')} shows no change.`;
          await artifacts.putText(
            logKey,
            `${log}\n\n# A fresh plan of ${targets.join(', ')}\n\n${fresh.output}`,
          );
        }
        const after = await ws.engine.stateVersion(h);
        const { create, update, replace, destroy } = pinned.impact;
        return {
          summary: `Applied the pinned plan of round ${pinned.round_id}: ${create} to create, ${update} to update, ${replace} to replace, ${destroy} to destroy.${proof}`,
          logKey,
          stateSerial: after?.serial ?? null,
          resumed: false,
        };
      } catch (err) {
        throw toActivityFailure(err);
      }
    },
  };
}

export type GenerateRoundActivities = ReturnType<typeof createGenerateRoundActivities>;
