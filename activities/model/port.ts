// The model port: what a drift round asks of a language model. Two providers implement it — the
// deterministic offline one (the default, no key) and Anthropic's Messages API.
import type { DriftOperation } from '../../shared/drift';

export interface FilterDecision {
  accepted: boolean;
  reason: string;
}

export interface ConfigResource {
  address: string;
  type: string;
  name: string;
  file: string;
  /** The block's source text. */
  source: string;
  /** What people call it: cloud id, ARN, Name tag, name (from the state). */
  identifiers?: string[];
}

export interface TargetSelection {
  targets: string[];
  reason: string;
}

export interface SourceFile {
  path: string;
  content: string;
}

export interface Unremediable {
  address: string;
  attributes: string[];
  reason: string;
}

export interface Remediation {
  /** Files to write, whole (paths relative to the IaC root). */
  edits: SourceFile[];
  /** Drift the provider could not fix; reported as unreconciled, never faked. */
  unremediable: Unremediable[];
}

/** A resource instance as the state holds it (`show -json` of the state). */
export interface StateResource {
  address: string;
  type: string;
  values: Record<string, unknown>;
}

/** What the model wrote for a generate request: whole files, or why it declined. */
export interface Generation {
  /** Files to write, whole (paths relative to the IaC root). */
  edits: SourceFile[];
  /** Set when the model will not (or, offline, cannot) carry out the request. */
  declined?: string;
  /** One sentence on the change, for the report. */
  summary: string;
}

export interface GenerateInput {
  text: string;
  /** The root module's .tf and .tfvars files and those of the local modules it calls. */
  files: SourceFile[];
  resources: ConfigResource[];
  state: StateResource[];
  prompt: string;
  /** A repair cycle: the engine's diagnostic for the change written before (now in `files`). */
  feedback?: string;
}

export interface ReportFacts {
  mode: 'partial' | 'full';
  request: string;
  remediated: string[];
  unreconciled: Unremediable[];
  whitelisted: { address: string; rule_id: string }[];
  outcome: string;
}

export interface PullRequestFacts {
  session_id: string;
  repository_url: string;
  head: string;
  base: string;
  rounds: { round_id: string; kind: string; text?: string; outcome?: string; summary?: string }[];
}

export interface PullRequestText {
  title: string;
  description: string;
}

export interface ModelProvider {
  readonly name: string;
  /**
   * Drift mode (the default): accept requests to resolve or scope drift, decline create/modify
   * requests. Generate mode, its mirror: accept create/modify requests, decline drift ones.
   */
  filterRequest(input: {
    text: string;
    prompt: string;
    mode?: 'drift' | 'generate';
  }): Promise<FilterDecision>;
  /** The code change a generate request asks for (a repair cycle passes the engine's diagnostic). */
  generate(input: GenerateInput): Promise<Generation>;
  /** Terraform -target addresses for the request. */
  selectTargets(input: {
    text: string;
    resources: ConfigResource[];
    prompt: string;
  }): Promise<TargetSelection>;
  /** Code changes that reconcile the code with reality for one group of operations. */
  remediate(input: {
    operations: DriftOperation[];
    /** The root module's .tf and .tfvars files and those of the local modules it calls (paths
     * relative to the root module; a module outside it starts with `../`). */
    files: SourceFile[];
    prompt: string;
    /** Every operation of the iteration (to see whether all instances of a block drifted alike). */
    related?: DriftOperation[];
  }): Promise<Remediation>;
  /** The report's summary. */
  summarize(input: ReportFacts): Promise<string>;
  /** Title and description of the session's pull request (the small model). */
  pullRequest(input: PullRequestFacts): Promise<PullRequestText>;
}

export const OPERATION_MISMATCH =
  'Operation mismatch: drift remediation resolves drift on existing resources; this request asks to create or modify infrastructure.';
