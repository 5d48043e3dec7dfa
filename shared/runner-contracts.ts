// The runner registry and the runner environment drift DAG (seed 002): what a runner group's
// environment should be, the DAG's input, its state (the seed's output schema) and the plan.
// Sandbox-safe; workflows take its types (their values come from runner-inputs.ts).
import { z } from 'zod';
import { googleCredentialProblem } from './google-credentials';
import { scheduleStateSchema, stackScheduleSchema } from './stack-contracts';
import { RUNNER_WORKFLOW_TYPES, uuid, type RunnerWorkflowType } from './runner-inputs';

export * from './runner-inputs';

const name = (what: string, pattern: RegExp, hint: string) =>
  z.string().min(1, `${what} is required`).max(255).regex(pattern, `${what} ${hint}`);

export const BACKEND_TYPES = ['aws_ecs', 'gce', 'cloud_run'] as const;
export type BackendType = (typeof BACKEND_TYPES)[number];

export const CLOUD_PROVIDERS = ['aws', 'gcp', 'azure', 'oci'] as const;
export type CloudProvider = (typeof CLOUD_PROVIDERS)[number];

/** The cloud each backend runs on. */
export const BACKEND_PROVIDER: Record<BackendType, CloudProvider> = {
  aws_ecs: 'aws',
  gce: 'gcp',
  cloud_run: 'gcp',
};

// ---- Registry ------------------------------------------------------------------------------

/**
 * What each cloud's static credentials in a connection hold (stored sealed, never returned): the
 * variables the engine's provider then gets. GCP's is a Google credential file's JSON — a service
 * account key or a workload identity federation configuration — from which the worker mints a
 * short-lived access token for each run.
 */
export const CONNECTION_CREDENTIAL_FIELDS: Record<CloudProvider, readonly string[]> = {
  aws: ['access_key_id', 'secret_access_key'],
  gcp: ['credential_json'],
  azure: ['client_id', 'client_secret', 'tenant_id', 'subscription_id'],
  oci: ['tenancy_ocid', 'user_ocid', 'fingerprint', 'private_key'],
};

/**
 * A cloud connection: where a group's resources live, and where an organization's engine runs get
 * their own credentials (a role to assume, or static credentials an admin stores).
 */
export const cloudConnectionSchema = z
  .object({
    name: name('name', /^[A-Za-z0-9][A-Za-z0-9 ._-]*$/, 'may hold letters, digits, space, . _ -'),
    provider: z.enum(CLOUD_PROVIDERS),
    /** AWS region, or the GCP region of Cloud Run jobs. */
    region: name(
      'region',
      /^([a-z]{2,}(-[a-z]+)+-?\d+|[a-z]+[a-z0-9]*)$/,
      'must look like us-east-1, europe-west1 or westeurope',
    ),
    /** GCP only. */
    project_id: name('project_id', /^[a-z][a-z0-9-]{4,28}[a-z0-9]$/, 'must be a GCP project id').optional(),
    /** AWS only: the account the resources must be in (informational). */
    account_id: z
      .string()
      .regex(/^\d{12}$/, 'account_id must be 12 digits')
      .optional(),
    /**
     * AWS only: the role every engine run of the organization on this cloud assumes with the
     * worker's own identity (STS AssumeRole, a session named after the run, as long as the run):
     * the run's only cloud credentials.
     */
    role_arn: z
      .string()
      .regex(/^arn:aws[a-z-]*:iam::\d{12}:role\/[\w+=,.@/-]{1,512}$/, 'role_arn must be an IAM role ARN')
      .optional(),
    /**
     * Static credentials for the organization's engine runs on this cloud (admin only; stored
     * sealed with KUMOSS_SECRETS_KEY, never returned): the fields CONNECTION_CREDENTIAL_FIELDS names.
     */
    credentials: z.record(z.string(), z.string().min(1).max(16_384)).optional(),
  })
  .strict()
  .superRefine((c, ctx) => {
    if (c.credentials) {
      const want = CONNECTION_CREDENTIAL_FIELDS[c.provider];
      const have = Object.keys(c.credentials);
      const missing = want.filter((k) => !have.includes(k));
      const extra = have.filter((k) => !want.includes(k));
      if (missing.length || extra.length)
        ctx.addIssue({
          code: 'custom',
          path: ['credentials'],
          message: `${c.provider} credentials are ${want.join(', ')}${missing.length ? `; missing ${missing.join(', ')}` : ''}${extra.length ? `; unknown ${extra.join(', ')}` : ''}`,
        });
      if (c.provider === 'gcp' && c.credentials.credential_json) {
        let parsed: unknown;
        try {
          parsed = JSON.parse(c.credentials.credential_json);
        } catch {
          parsed = undefined;
        }
        // Its shape here; its URLs on the worker, which knows the configured Google endpoint too.
        const problem = googleCredentialProblem(parsed);
        if (problem)
          ctx.addIssue({ code: 'custom', path: ['credentials', 'credential_json'], message: problem });
      }
      if (c.role_arn)
        ctx.addIssue({
          code: 'custom',
          path: ['credentials'],
          message: 'give a role_arn or credentials, not both',
        });
    }
    if (c.provider === 'gcp' && !c.project_id) {
      ctx.addIssue({ code: 'custom', path: ['project_id'], message: 'project_id is required for gcp' });
    }
    if (c.provider === 'gcp' && c.role_arn) {
      ctx.addIssue({ code: 'custom', path: ['role_arn'], message: 'role_arn applies to aws only' });
    }
    if (c.provider === 'aws' && c.project_id) {
      ctx.addIssue({ code: 'custom', path: ['project_id'], message: 'project_id applies to gcp only' });
    }
  });
export type CloudConnectionSpec = z.infer<typeof cloudConnectionSchema>;

const awsName = (what: string) => name(what, /^[A-Za-z0-9_./#-]+$/, 'may hold letters, digits, _ . / # -');
const gcpName = (what: string) =>
  name(what, /^[a-z]([-a-z0-9]*[a-z0-9])?$/, 'must be lower case letters, digits and -');

export const ecsClusterSpec = z
  .object({
    name: awsName('ecs_cluster.name'),
    container_insights: z.enum(['enabled', 'disabled']).default('disabled'),
  })
  .strict();
export const logGroupSpec = z
  .object({ name: awsName('log_group.name'), retention_days: z.number().int().positive().optional() })
  .strict();
export const taskDefinitionSpec = z
  .object({
    family: awsName('task_definition.family'),
    container_name: awsName('task_definition.container_name').default('runner'),
    image: z.string().min(1).max(1024),
    cpu: z.string().max(6).regex(/^\d+$/, 'cpu must be CPU units, e.g. "256"').default('256'),
    memory: z.string().max(7).regex(/^\d+$/, 'memory must be MiB, e.g. "512"').default('512'),
  })
  .strict();
export const pullSecretSpec = z.object({ name: awsName('pull_secret.name') }).strict();
export const serviceAccountSpec = z
  .object({
    account_id: name(
      'service_account.account_id',
      /^[a-z]([-a-z0-9]{4,28}[a-z0-9])$/,
      'must be 6-30 lower case letters, digits, -',
    ),
    display_name: z.string().max(100).default(''),
  })
  .strict();
export const instanceTemplateSpec = z
  .object({
    name: gcpName('instance_template.name'),
    machine_type: gcpName('instance_template.machine_type'),
    source_image: z.string().min(1).max(1024),
  })
  .strict();
export const cloudRunJobSpec = z
  .object({ name: gcpName('cloud_run_job.name'), image: z.string().min(1).max(1024) })
  .strict();

/** The environment a runner group should have, by backend. */
export const runnerEnvironmentSchema = z.discriminatedUnion('backend_type', [
  z
    .object({
      backend_type: z.literal('aws_ecs'),
      ecs_cluster: ecsClusterSpec,
      log_group: logGroupSpec,
      task_definition: taskDefinitionSpec,
      pull_secret: pullSecretSpec.optional(),
    })
    .strict(),
  z
    .object({
      backend_type: z.literal('gce'),
      service_account: serviceAccountSpec,
      instance_template: instanceTemplateSpec,
    })
    .strict(),
  z
    .object({
      backend_type: z.literal('cloud_run'),
      service_account: serviceAccountSpec,
      cloud_run_job: cloudRunJobSpec,
    })
    .strict(),
]);
export type RunnerEnvironment = z.infer<typeof runnerEnvironmentSchema>;

export const runnerGroupSchema = z
  .object({
    name: name('name', /^[A-Za-z0-9][A-Za-z0-9 ._-]*$/, 'may hold letters, digits, space, . _ -'),
    cloud_connection_uuid: uuid.optional(),
    environment: runnerEnvironmentSchema,
  })
  .strict();
export type RunnerGroupSpec = z.infer<typeof runnerGroupSchema>;

// ---- The DAG -------------------------------------------------------------------------------

/** The Temporal Schedule of a runner group's periodic detection. */
export { runnerScheduleId } from './ids';

/** A runner group's periodic detection: when (as a stack's schedule), and whether it may apply. */
export const runnerScheduleSchema = z
  .object({
    schedule: stackScheduleSchema,
    /** Repairs applied by the scheduled runs: off unless the group says otherwise. */
    auto_apply: z.boolean().default(false),
  })
  .strict();

/** The seven resources the detect layer checks, in the seed's order. */
export const RUNNER_RESOURCES = [
  'ecs_cluster',
  'log_group',
  'task_definition',
  'pull_secret',
  'gce_service_account',
  'gce_instance_template',
  'cloud_run_job',
] as const;
export type RunnerResource = (typeof RUNNER_RESOURCES)[number];

/** Backends a resource belongs to; elsewhere its detector reports skipped. */
export const RESOURCE_BACKENDS: Record<RunnerResource, readonly BackendType[]> = {
  ecs_cluster: ['aws_ecs'],
  log_group: ['aws_ecs'],
  task_definition: ['aws_ecs'],
  pull_secret: ['aws_ecs'],
  gce_service_account: ['gce', 'cloud_run'],
  gce_instance_template: ['gce'],
  cloud_run_job: ['cloud_run'],
};

/** Set by the server, never by a caller: who started the run and which run it retries. */
export interface RunnerStartContext {
  actor_uuid?: string;
  retry_count?: number;
  retried_from?: string;
}

export const DETECTOR_STATUSES = ['in_sync', 'drifted', 'missing', 'skipped', 'blocked'] as const;
export type DetectorStatus = (typeof DETECTOR_STATUSES)[number];
export const REPAIR_ACTIONS = ['create', 'update', 'replace', 'restore', 'enable'] as const;
export type RepairAction = (typeof REPAIR_ACTIONS)[number];

export interface FieldDifference {
  field: string;
  expected: unknown;
  actual: unknown;
}

/** What one detector found. */
export interface DetectorResult {
  resource: RunnerResource;
  status: DetectorStatus;
  /** Set when the resource is missing or drifted and Kumoss can repair it. */
  action?: RepairAction;
  /** The resource's name / id in its cloud. */
  target?: string;
  differences?: FieldDifference[];
  /** Why a resource was skipped or is blocked. */
  reason?: string;
}

export interface PlannedAction {
  resource: RunnerResource;
  step: string;
  action: RepairAction;
  target: string;
  differences: FieldDifference[];
}

export interface BlockedResource {
  resource: RunnerResource;
  step: string;
  target: string;
  reason: string;
}

export const PLAN_STATUSES = ['clean', 'drifted', 'blocked'] as const;
export type PlanStatus = (typeof PLAN_STATUSES)[number];

export interface DriftSummary {
  checked: number;
  skipped: number;
  in_sync: number;
  drifted: number;
  blocked: number;
  resources: Partial<Record<RunnerResource, DetectorStatus>>;
}

export const DAG_STATUSES = ['running', 'completed', 'failed', 'compensated', 'compensation_failed'] as const;
export type DagStatus = (typeof DAG_STATUSES)[number];

/** The DAG's state_data: its input, its bookkeeping and each step's output under the step's name. */
export interface RunnerDagState {
  workflow_type: RunnerWorkflowType;
  runner_group_uuid: string;
  organization_uuid: string;
  runner_execution_uuid?: string;
  workflow_uuid: string;
  workflow_run_uuid: string;
  status: DagStatus;
  outcome?: string;
  initiated_at: string;
  completed_at?: string;
  failed_at?: string;
  failure_reason?: string;
  error?: string;
  error_type?: string;
  actor_uuid?: string;
  reason?: string;
  retry_count: number;
  retried_from?: string;
  failed_step?: string | null;
  failed_layer?: string | null;
  failed_at_state?: { layer_index: number; completed_steps: string[] } | null;
  compensation_trigger?: { step: string; layer: string; error: string } | null;
  comp_current_layer?: string | null;
  comp_queue?: string[] | null;
  comp_retry_count?: Record<string, number> | null;
  plan_uuid?: string;
  plan_status?: PlanStatus;
  repair_workflow_uuid?: string;
  /** Workflow id of the chained repair (GET /api/workflows/{id} takes it, or its run id). */
  repair_workflow_id?: string;
  auto_apply?: boolean;
  trace_ref?: string;
  backend_type?: BackendType;
  cloud_connection_uuid?: string;
  actions_needed?: PlannedAction[];
  blocked_resources?: BlockedResource[];
  drift_summary?: DriftSummary;
  /** Step outputs, under the step names (drift_detect_init, …, drift_finalize). */
  [step: string]: unknown;
}

/** What a step activity returns: its output, and fields it sets on the DAG state. */
export interface StepResult {
  output: Record<string, unknown>;
  fields?: Partial<RunnerDagState>;
}

export interface StepInput {
  state: RunnerDagState;
}

export interface CompensationInput {
  state: RunnerDagState;
  /** The step being compensated and its recorded output. */
  step: string;
  output: Record<string, unknown>;
}

// ---- API answers ---------------------------------------------------------------------------

/** A cloud connection as the API shows it: never its credentials, only whether it has some. */
export const cloudConnectionAnswerSchema = z.object({
  cloud_connection_uuid: z.string(),
  organization_uuid: z.string(),
  name: z.string(),
  provider: z.enum(CLOUD_PROVIDERS),
  region: z.string(),
  project_id: z.string().nullable(),
  account_id: z.string().nullable(),
  role_arn: z.string().nullable(),
  has_credentials: z.boolean(),
});
export type CloudConnectionAnswer = z.infer<typeof cloudConnectionAnswerSchema>;
export const cloudConnectionListSchema = z.object({
  cloud_connections: z.array(cloudConnectionAnswerSchema),
});

/** A runner group: the environment it should have, on its cloud connection. */
export const runnerGroupAnswerSchema = z.object({
  runner_group_uuid: z.string(),
  organization_uuid: z.string(),
  name: z.string(),
  backend_type: z.enum(BACKEND_TYPES),
  cloud_connection_uuid: z.string().nullable(),
  environment: runnerEnvironmentSchema,
});
export type RunnerGroup = z.infer<typeof runnerGroupAnswerSchema>;
export const runnerGroupListSchema = z.object({ runner_groups: z.array(runnerGroupAnswerSchema) });

/** One DAG run of a group as recorded (GET /api/v1/runner-groups/{id}/executions). */
export const runnerExecutionSchema = z.object({
  runner_execution_uuid: z.string(),
  workflow_type: z.string(),
  workflow_uuid: z.string(),
  workflow_run_uuid: z.string(),
  actor_uuid: z.string().nullable(),
  status: z.string(),
  outcome: z.string().nullable(),
  retry_count: z.number().int(),
  retried_from: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type RunnerExecution = z.infer<typeof runnerExecutionSchema>;
export const runnerExecutionListSchema = z.object({ executions: z.array(runnerExecutionSchema) });

const fieldDifferenceSchema = z.object({ field: z.string(), expected: z.unknown(), actual: z.unknown() });
const plannedActionSchema = z.object({
  resource: z.enum(RUNNER_RESOURCES),
  step: z.string(),
  action: z.enum(REPAIR_ACTIONS),
  target: z.string(),
  differences: z.array(fieldDifferenceSchema),
});
const blockedResourceSchema = z.object({
  resource: z.enum(RUNNER_RESOURCES),
  step: z.string(),
  target: z.string(),
  reason: z.string(),
});
const driftSummarySchema = z.object({
  checked: z.number().int(),
  skipped: z.number().int(),
  in_sync: z.number().int(),
  drifted: z.number().int(),
  blocked: z.number().int(),
  resources: z.partialRecord(z.enum(RUNNER_RESOURCES), z.enum(DETECTOR_STATUSES)),
});

/** A RunnerEnvironmentDriftPlan: what a detection found and what a repair would do. */
export const driftPlanAnswerSchema = z.object({
  plan_uuid: z.string(),
  organization_uuid: z.string(),
  runner_group_uuid: z.string(),
  runner_execution_uuid: z.string().nullable(),
  workflow_uuid: z.string(),
  plan_status: z.enum(PLAN_STATUSES),
  actions_needed: z.array(plannedActionSchema),
  blocked_resources: z.array(blockedResourceSchema),
  drift_summary: driftSummarySchema,
  repair_status: z.string().nullable(),
  repair_workflow_uuid: z.string().nullable(),
});
export type DriftPlanAnswer = z.infer<typeof driftPlanAnswerSchema>;

/** A runner group's periodic detection and its Temporal Schedule's state. */
export const runnerScheduleAnswerSchema = z.object({
  runner_group_uuid: z.string(),
  schedule: stackScheduleSchema,
  auto_apply: z.boolean(),
  schedule_state: scheduleStateSchema,
});
export type RunnerScheduleAnswer = z.infer<typeof runnerScheduleAnswerSchema>;

/** A run now's answer: the schedule, and the detection it started (its workflow id). */
export const runnerScheduleTriggerAnswerSchema = runnerScheduleAnswerSchema.extend({
  workflow_uuid: z
    .string()
    .describe('The started detection: its workflow id, as the executions list names it'),
});

/** `POST /api/workflows/start` (and `…/retry`): the started run's ids. */
export const workflowStartRequestSchema = z
  .object({
    workflow_type: z
      .string()
      .min(1, 'workflow_type is required')
      .max(128)
      .describe(`One of ${RUNNER_WORKFLOW_TYPES.join(', ')}.`),
    initial_data: z
      .record(z.string(), z.unknown())
      .default({})
      .describe(
        'The workflow input (runner_group_uuid; auto_apply for a detection, plan_uuid for a repair); organization_uuid is set from the caller (naming another organization is a 403).',
      ),
  })
  .strict();
export const workflowStartedSchema = z.object({
  workflow_uuid: z.string(),
  workflow_run_uuid: z.string(),
  workflow_type: z.enum(RUNNER_WORKFLOW_TYPES),
  status: z.literal('RUNNING'),
  /** The run a retry starts again from. */
  retried_from: z.string().optional(),
});

/** The DAG's state as a run reports it: seed 002's output fields, and each step's output by name. */
export const runnerDagStateSchema = z.looseObject({
  workflow_type: z.enum(RUNNER_WORKFLOW_TYPES).optional(),
  runner_group_uuid: z.string(),
  organization_uuid: z.string(),
  workflow_uuid: z.string(),
  status: z.enum(DAG_STATUSES),
  outcome: z.string().nullish(),
  failure_reason: z.string().nullish(),
  retry_count: z.number().int(),
  plan_uuid: z.string().nullish(),
  plan_status: z.enum(PLAN_STATUSES).nullish(),
  actions_needed: z.array(plannedActionSchema).nullish(),
  blocked_resources: z.array(blockedResourceSchema).nullish(),
  drift_summary: driftSummarySchema.nullish(),
  /** Workflow id of the repair a detection chained (GET /api/workflows/{id} takes it). */
  repair_workflow_id: z.string().nullish(),
});

/** `GET /api/workflows/{workflow_uuid}`: a run's status and its state (null before a worker reports it). */
export const workflowRunSchema = z.object({
  workflow_uuid: z.string(),
  workflow_run_uuid: z.string(),
  workflow_type: z.enum(RUNNER_WORKFLOW_TYPES),
  status: z.string().describe('The Temporal execution status: RUNNING, COMPLETED, FAILED, …'),
  started_at: z.string(),
  closed_at: z.string().nullable(),
  output: runnerDagStateSchema.nullable(),
});
