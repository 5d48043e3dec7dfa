// A generate round (issue 16) as a Temporal workflow: started → filtering → generating →
// validating → report, ending completed (a plan pinned), uncompleted (declined, or no valid change
// within the repair cycles: the branch is put back) or failed. The filter runs in generate mode,
// the mirror of drift mode. Apply runs later, in its own round (workflows/apply-round.ts).
import {
  ApplicationFailure,
  isCancellation,
  proxyActivities,
  setCurrentDetails,
  type RetryPolicy,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import {
  generateRoundInputSchema,
  type GenerateRoundInput,
  type GenerateRoundResult,
  notInPlanLine,
  type PinnedPlan,
} from '../shared/workflow-inputs';
import { parseRoundInput, roundFailureReason, roundRecorder, roundRefOf } from './round-recorder';
import { ErrorTypes } from '../shared/errors';

const retry: RetryPolicy = {
  initialInterval: '2s',
  backoffCoefficient: 2,
  maximumInterval: '1 minute',
  maximumAttempts: 5,
};

export async function generateRound(rawInput: GenerateRoundInput): Promise<GenerateRoundResult> {
  const input = parseRoundInput(generateRoundInputSchema, rawInput, 'generate round');
  const heartbeatTimeout = `${input.heartbeat_timeout_seconds}s` as const;
  const light = proxyActivities<Activities>({ startToCloseTimeout: '10 minutes', heartbeatTimeout, retry });
  const engine = proxyActivities<Activities>({ startToCloseTimeout: '45 minutes', heartbeatTimeout, retry });
  const rec = roundRecorder(input.session_id, input.round_id);
  const base = { session_id: input.session_id, round_id: input.round_id, repairs: 0 };
  const end = (r: GenerateRoundResult): GenerateRoundResult => {
    rec.status(r.status, r.reason ?? r.summary ?? r.status);
    return r;
  };
  try {
    const ref = roundRefOf(input);
    setCurrentDetails(`Preparing a generate round on ${input.repository_url}`);
    const prepared = await light.prepareRound({ ref, text: input.text });
    rec.artifact(prepared.promptKey);
    const start = prepared.head ?? prepared.baseCommit;
    let roundRef = { ...ref, ...(prepared.head ? { head: prepared.head } : {}) };

    let pinned: PinnedPlan | undefined;
    let summary = '';
    let files: string[] = [];
    let repairs = 0;
    if (input.revert?.length) {
      // A revert: the cloud follows the code. No filter and no model — the code stays as it is; the
      // plan of the unchanged code targets exactly the chosen addresses.
      const addresses = input.revert;
      rec.status('validating', `Revert: planning the unchanged code for ${addresses.join(', ')}`);
      const val = await engine.validateChange({ ref: roundRef, cycle: 1, targets: addresses });
      if (!val.valid || !val.pinned)
        return end({
          ...base,
          status: 'uncompleted',
          reason: `The code does not plan: ${val.reason ?? 'no reason given'}; nothing to revert to.`,
        });
      if (val.pinned.impact.changes.length === 0)
        return end({
          ...base,
          status: 'uncompleted',
          reason: `Nothing to revert: the cloud already matches the code for ${addresses.join(', ')}.`,
        });
      pinned = val.pinned;
      summary = `Revert in the cloud: ${addresses.join(', ')} back to what the code declares; the code is unchanged.`;
    } else {
      rec.status('filtering', 'Filtering the request (generate mode)');
      const decision = await light.filterGenerateRequest({ ref: roundRef, text: input.text });
      if (!decision.accepted) return end({ ...base, status: 'uncompleted', reason: decision.reason });

      // Generate, then validate; a change that does not validate goes back to the model with the
      // engine's diagnostic, at most max_repair_cycles times.
      let feedback: string | undefined;
      let committed = false;
      const putBack = async (): Promise<void> => {
        if (!committed || !start) return;
        const { head } = await light.revertGenerated({ ref: roundRef, baseCommit: start });
        roundRef = { ...roundRef, head };
      };
      for (let cycle = 1; !pinned; cycle++) {
        rec.status('generating', `Cycle ${cycle}: writing the change${feedback ? ' (repair)' : ''}`);
        const gen = await engine.generateChange({
          ref: roundRef,
          text: input.text,
          cycle,
          ...(feedback ? { feedback } : {}),
        });
        if (!gen.changed) {
          await putBack();
          return end({
            ...base,
            repairs,
            status: 'uncompleted',
            reason: gen.declined ?? 'The model proposed no change.',
          });
        }
        committed = true;
        if (gen.commit) roundRef = { ...roundRef, head: gen.commit };
        summary = gen.summary;
        files = gen.files;
        rec.status('validating', `Cycle ${cycle}: validate and plan -out`);
        const val = await engine.validateChange({ ref: roundRef, cycle, ...(start ? { base: start } : {}) });
        if (val.valid && val.pinned) {
          pinned = val.pinned;
          break;
        }
        if (repairs >= input.max_repair_cycles) {
          await putBack();
          return end({
            ...base,
            repairs,
            status: 'uncompleted',
            reason: `The change did not validate after ${repairs} repair cycle(s): ${val.reason ?? 'no reason given'}; it was reverted.`,
          });
        }
        repairs += 1;
        feedback = val.reason;
      }
    }
    rec.artifact(pinned.key);
    // The compliance audit of the plan (OPA, policies/<cloud>/): deny-level findings block apply.
    setCurrentDetails('Auditing the plan against the compliance policies');
    const compliance = await light.auditPlan({ ref: roundRef, pinned });
    pinned = { ...pinned, compliance };
    rec.artifact(compliance.report_key);
    rec.status('report', 'Writing the generate report');
    const report = await light.writeGenerateReport({
      ref: roundRef,
      text: input.text,
      summary,
      files,
      repairs,
      pinned,
      ...(input.revert?.length ? { revert: input.revert } : {}),
    });
    rec.artifact(report.reportKey, 'report');
    const { create, update, replace, destroy } = pinned.impact;
    const outside = notInPlanLine(pinned.impact);
    return end({
      ...base,
      repairs,
      status: 'completed',
      summary: `${summary} Plan pinned: ${create} to create, ${update} to update, ${replace} to replace, ${destroy} to destroy.${outside ? ` ${outside}` : ''} Compliance: ${
        compliance.passed
          ? `passed${compliance.warn.length ? ` with ${compliance.warn.length} warning(s)` : ''}`
          : `${compliance.deny.length} deny-level finding(s) — apply is blocked`
      }.`,
      report_key: report.reportKey,
      pinned_plan: pinned,
    });
  } catch (err) {
    if (isCancellation(err)) throw err;
    rec.status('failed');
    const reason = roundFailureReason(err);
    setCurrentDetails(`Failed: ${reason}`);
    throw ApplicationFailure.nonRetryable(`Generate round failed: ${reason}`, ErrorTypes.GenerateRoundFailed);
  } finally {
    await rec.flushed();
  }
}
