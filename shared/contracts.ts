// zod contracts shared by the API, the workflows and the OpenAPI document; what the workflows
// themselves parse lives in shared/workflow-inputs.ts and is re-exported here. Sandbox-safe.
import { z } from 'zod';
import { CLOUDS } from './drift-exceptions';
import {
  idSchema,
  pinnedPlanSchema,
  ROUND_STATUSES,
  type PinnedPlan,
  type RoundStatus,
} from './workflow-inputs';

export * from './workflow-inputs';

export interface ApplyRoundResult {
  session_id: string;
  round_id: string;
  status: Extract<RoundStatus, 'completed'>;
  summary: string;
  log_key: string;
  /** The state serial after the apply. */
  state_serial: number | null;
}

/** The generate filter's answer to a request that asks to resolve drift. */
export const GENERATE_MISMATCH =
  'Operation mismatch: generate creates or modifies infrastructure; this request asks to resolve drift. Use POST /api/v1/drift/partial or POST /api/v1/drift/full.';

/** Why apply refuses a pinned plan that no longer matches the branch or the state. */
export const stalePlanMessage = (why: string): string =>
  `The pinned plan is stale: ${why}; run a new generate round.`;

/** One thing that happened in a round, in order: a status change, an artifact, the report. */
export interface RoundEvent {
  /** 1, 2, … within the round: with the round's place in the session, the SSE event id. */
  seq: number;
  type: 'status' | 'artifact' | 'report';
  status?: RoundStatus;
  key?: string;
  iteration?: number;
  at: string;
}

export interface RoundProgress {
  status: RoundStatus;
  iteration: number;
  max_iterations: number;
  operations: number;
  groups: number;
  artifacts: string[];
  /** Append-only and bounded (a few per iteration): what server-sent events relay. */
  events: RoundEvent[];
}

// ---------------------------------------------------------------------------------------------
// HTTP API v1 requests (one schema for the API, the workflow input and the OpenAPI document).

/** Usernames that are really credentials: GitHub and GitLab token formats and token users. */
const TOKEN_USERNAME =
  /^(gh[pousr]_[A-Za-z0-9_]{10,}|github_pat_[A-Za-z0-9_]{10,}|glpat-[A-Za-z0-9_-]{10,}|gl(dt|ptt|rt|soat|ft)-[A-Za-z0-9_-]{10,}|x-access-token|x-oauth-basic|x-token-auth|oauth2|gitlab-ci-token|[A-Fa-f0-9]{40})$/;

/** True when an address or URL points at this machine's loopback (an embedded component). */
export function isLoopback(addressOrUrl: string): boolean {
  const host = addressOrUrl.includes('://') ? new URL(addressOrUrl).hostname : addressOrUrl.split(':')[0];
  return host === '127.0.0.1' || host === 'localhost' || host === '[::1]' || host === '::1';
}

/** Longest repository URL accepted: real forge URLs are far shorter; a longer one can only fail later. */
export const MAX_REPOSITORY_URL = 2048;

export const repositoryUrlSchema = z
  .string()
  .max(MAX_REPOSITORY_URL, `must be at most ${MAX_REPOSITORY_URL} characters`)
  .superRefine((value, ctx) => {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be an absolute https:// URL' });
      return;
    }
    if (url.protocol !== 'https:') ctx.addIssue({ code: 'custom', message: 'must use https://' });
    if (url.password) ctx.addIssue({ code: 'custom', message: 'must not carry a password or token' });
    if (url.username && TOKEN_USERNAME.test(decodeURIComponent(url.username))) {
      ctx.addIssue({ code: 'custom', message: 'must not carry a token as its username' });
    }
    if (url.search || url.hash)
      ctx.addIssue({ code: 'custom', message: 'must not have a query or fragment' });
    if (url.pathname === '/' || url.pathname === '')
      ctx.addIssue({ code: 'custom', message: 'must name a repository' });
  });

/** A git connection an admin registers (`POST /api/v1/admin/connections/git`). */
export const gitConnectionSchema = z
  .object({
    /** The host's origin, `https://host[:port]`: repository URLs on it match. */
    origin: z
      .string()
      .max(MAX_REPOSITORY_URL)
      .superRefine((value, ctx) => {
        let url: URL;
        try {
          url = new URL(value);
        } catch {
          ctx.addIssue({ code: 'custom', message: 'must be an https:// origin such as https://github.com' });
          return;
        }
        if (url.protocol !== 'https:') ctx.addIssue({ code: 'custom', message: 'must use https://' });
        if (url.username || url.password)
          ctx.addIssue({ code: 'custom', message: 'must not carry a user name or password' });
        if ((url.pathname !== '/' && url.pathname !== '') || url.search || url.hash)
          ctx.addIssue({ code: 'custom', message: 'must be an origin only (scheme, host, port), no path' });
      })
      .transform((value) => new URL(value).origin),
    kind: z.enum(['github', 'gitlab', 'gitea', 'git']).default('git'),
    /** The organization's token for the host: stored sealed, never returned. */
    credential: z
      .string()
      .min(1, 'must not be empty')
      .max(4096)
      .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces')
      .optional(),
  })
  .strict();
export type GitConnectionSpec = z.infer<typeof gitConnectionSchema>;

export const iacPathSchema = z
  .string()
  .max(512)
  .superRefine((value, ctx) => {
    if (value.startsWith('/') || /^[A-Za-z]:/.test(value)) {
      ctx.addIssue({ code: 'custom', message: 'must be relative to the repository root' });
    }
    if (value.split(/[\\/]/).some((part) => part === '..')) {
      ctx.addIssue({ code: 'custom', message: 'must stay inside the repository (no ..)' });
    }
    if (/[\0\n\r]/.test(value))
      ctx.addIssue({ code: 'custom', message: 'must not contain control characters' });
  });

const requestText = z.string().trim().min(1, 'must not be empty').max(10_000);

export const firstRequestSchema = z
  .object({
    repository_url: repositoryUrlSchema,
    cloud: z.enum(CLOUDS),
    scope_id: z.string().trim().min(1, 'is required').max(256),
    iac_path: iacPathSchema.optional(),
    text: requestText,
  })
  .strict();

export const followUpRequestSchema = z
  .object({
    session_id: idSchema,
    text: requestText,
  })
  .strict();

/** A drift request: the first of a session, or a follow-up that carries only session_id and text. */
export const driftRequestSchema = z.union([followUpRequestSchema, firstRequestSchema]);
export type DriftRequest = z.infer<typeof driftRequestSchema>;

export const acceptedSchema = z.object({
  session_id: z.string(),
  round_id: z.string(),
  /** Whether the operation starts; false when the session refused it (nothing else changes). */
  accepted: z.boolean(),
  /** SessionBusy, SessionFinished or NothingToPropose, when refused. */
  refusal: z.string().optional(),
  /** The seed's line, when refused: `Session <id> already has an operation in flight.` … */
  reason: z.string().optional(),
});

// ---------------------------------------------------------------------------------------------
// Sessions (seed 001): one conversation about one Terraform root.

export const SESSION_STATUSES = ['ACTIVE', 'FAILED', 'MERGED'] as const;
export type SessionStatus = (typeof SESSION_STATUSES)[number];

export type OperationKind = 'partial' | 'full' | 'generate' | 'apply' | 'pull_request' | 'merge';

/** Where a session's pull request lives: a forge (GitHub, GitLab, Gitea), or the bare git host (a reviewed branch merge). */
export type PullRequestProvider = 'github' | 'gitlab' | 'gitea' | 'git_host';

export interface SessionOperation {
  round_id: string;
  kind: OperationKind;
  text?: string;
  actor_uuid?: string;
  /** A partial round's resource addresses chosen beforehand (drift inbox items), instead of the model's. */
  targets?: string[];
  /** A generate round that reverts these addresses in the cloud (the code unchanged, no model). */
  revert?: string[];
  /** For an apply: the approval the caller saw recorded for the pinned plan (its hash, and who). */
  approval?: { sha256: string; by: string };
  /** For a merge: which pull request, on which host (`local` is what sessions before 0.2 recorded). */
  pull_request?: { provider: PullRequestProvider | 'local'; number: number | null };
}

/** What the session answers an operation it accepted (a refused one fails the update instead). */
export interface OperationAnswer {
  accepted: true;
  round_id: string;
}

/** A session's pull request as the forge (or the git host) answered it. */
export const pullRequestRecordSchema = z.object({
  session_id: z.string(),
  provider: z.enum(['github', 'gitlab', 'gitea', 'git_host', 'local']),
  /** The forge's number; null for a branch merge on the embedded git host. */
  number: z.number().int().nullable(),
  title: z.string(),
  description: z.string(),
  head: z.string(),
  base: z.string(),
  /** The forge's page; null for a branch merge on the embedded git host. */
  url: z.string().nullable(),
  status: z.enum(['open', 'merged']),
  merge_commit: z.string().nullable(),
});
export type PullRequestRecord = z.infer<typeof pullRequestRecordSchema>;

/** A round of a session, as the session detail lists it (sessionRoundDetailSchema, below). */
export type SessionRound = z.infer<typeof sessionRoundDetailSchema>;

export interface SessionSettings {
  session_id: string;
  organization_uuid: string;
  repository_url: string;
  cloud: (typeof CLOUDS)[number];
  scope_id: string;
  iac_path: string;
  state_project_id: string;
  branch: string;
  max_drift_reports: number;
  drift_group_operations: number;
  /** Heartbeat timeout of the session's round activities (orchestration.activity_heartbeat_seconds). */
  activity_heartbeat_seconds?: number;
  /** Repair cycles of its generate rounds (orchestration.max_repair_cycles; absent: the default, 2). */
  max_repair_cycles?: number;
  /**
   * Four eyes: an apply runs only with a second person's approval of the very plan pinned at the
   * time it runs (SessionOperation.approval), checked by the session's workflow.
   */
  apply_requires_approval?: boolean;
}

export interface SessionState extends SessionSettings {
  status: SessionStatus;
  /** The object key of the plan a generate round pinned; null when none is pinned. */
  pinned_plan: string | null;
  /** That plan's hash, commit, state serial and impact (absent in sessions before generate rounds). */
  pinned?: PinnedPlan | null;
  in_flight: { round_id: string; kind: OperationKind } | null;
  /** Rounds accepted so far; their records live in the metadata store (shared/infra/db/sessions.ts). */
  round_count: number;
  /** A drift round completed with changes: the branch has something to propose. */
  has_changes: boolean;
  /** The session's pull request, once opened. */
  pull_request: { provider: PullRequestProvider; number: number | null; base: string } | null;
}

/** A second person's approval of a pinned plan (its SHA-256). */
export const planApprovalSchema = z.object({
  sha256: z.string(),
  by: z.string(),
  name: z.string(),
  at: z.string(),
});

// The session detail (`GET /api/v1/sessions/{id}`), as the OpenAPI document describes it and the
// web application reads it (its type is generated from the document: `npm run web:types`).
const sessionRoundDetailSchema = z.object({
  round_id: z.string(),
  kind: z.enum(['partial', 'full', 'generate', 'apply', 'pull_request', 'merge']),
  text: z.string().optional(),
  status: z.enum(ROUND_STATUSES),
  workflow_id: z.string().optional(),
  outcome: z.enum(['Succeeded', 'Partial', 'Failed']).optional(),
  summary: z.string().optional(),
  report_key: z.string().optional(),
  failure_reason: z.string().optional(),
  reason: z.string().optional(),
  /** The merge commit of a merge operation. */
  commit: z.string().optional(),
});
export const sessionDetailSchema = z.object({
  session_id: z.string(),
  repository_url: z.string(),
  cloud: z.enum(CLOUDS),
  scope_id: z.string(),
  iac_path: z.string(),
  /** Hash of repository URL, IaC path and scope id: where Kumoss keeps the state of a root without a backend. */
  state_project_id: z.string(),
  created_at: z.string(),
  status: z.enum(SESSION_STATUSES),
  locked: z.boolean(),
  lock_reason: z.string().nullable(),
  /** `admin` (an admin's lock) or `plan` (a pinned plan's, cleared by its apply). */
  lock_kind: z.enum(['admin', 'plan']).nullable(),
  /** The plan a generate round pinned — hash, commit, state serial — and its impact banner. */
  pinned_plan: pinnedPlanSchema.nullable(),
  /** An admin's override of the pinned plan's compliance findings, with the reason. */
  compliance_override: z
    .object({ round_id: z.string(), reason: z.string(), by: z.string().nullable(), at: z.string() })
    .nullable(),
  /**
   * A second devops or admin's approval of the pinned plan (orchestration.apply_requires_approval):
   * null when there is none for the plan pinned now.
   */
  plan_approval: planApprovalSchema.nullable(),
  /** True when this installation applies a pinned plan only once a second person approved it. */
  approval_required: z.boolean(),
  branch: z.string(),
  in_flight: z.object({ round_id: z.string(), kind: z.string() }).nullable(),
  rounds: z.array(sessionRoundDetailSchema),
  /** The pull request as recorded (GET …/pull-request answers the same). */
  pull_request: pullRequestRecordSchema.nullable(),
  /** The session's artifacts with presigned GET URLs (they expire: presign_ttl_seconds). */
  artifacts: z.array(z.object({ key: z.string(), url: z.string() })),
  /** Seconds until the first of those URLs expires: read the detail again before then. */
  artifacts_expire_in_seconds: z.number().int(),
});
export type SessionDetail = z.infer<typeof sessionDetailSchema>;

/** `GET /api/v1/sessions`'s query: a page of the organization's sessions, newest first. */
export const sessionListQuerySchema = z
  .object({
    limit: z.coerce.number().int().min(1).max(100).default(25),
    /** The `next` of the previous page: sessions created before it. */
    before: z.iso.datetime({ offset: true }).optional(),
  })
  .strict();

/** One line of the session list. */
export const sessionSummarySchema = z.object({
  session_id: z.string(),
  repository_url: z.string(),
  cloud: z.string(),
  scope_id: z.string(),
  iac_path: z.string(),
  status: z.enum(['ACTIVE', 'FAILED', 'MERGED']),
  in_flight: z.object({ round_id: z.string(), kind: z.string() }).nullable(),
  created_at: z.string(),
  /** The outcome of its latest drift round, if any. */
  last_outcome: z.string().nullable(),
});
export type SessionSummary = z.infer<typeof sessionSummarySchema>;

export const sessionListSchema = z.object({
  sessions: z.array(sessionSummarySchema),
  /** The `before` of the next page; null on the last. */
  next: z.string().nullable(),
});

/** The drift a session's latest drift round left, which a revert may name. */
export const revertableSchema = z.object({ addresses: z.array(z.string()) });

export const approvalSchema = z.object({ session_id: z.string(), plan_approval: planApprovalSchema });

const signedInUserSchema = z.object({
  name: z.string(),
  role: z.enum(['developer', 'devops', 'admin']),
  organization_uuid: z.string(),
});

/** Who is signed in, and where the web application links each run. */
export const meSchema = z.object({ user: signedInUserSchema, temporal_ui_url: z.string() });

/** A sign-in's answer: the user, and when the session cookie expires. */
export const signedInSchema = z.object({ user: signedInUserSchema, expires_at: z.string() });

// ---------------------------------------------------------------------------------------------
// The admin panel's answers (api/routes/admin.ts), as the OpenAPI document declares them.

const roleSchema = z.enum(['developer', 'devops', 'admin']);

export const adminSessionListSchema = z.object({
  sessions: z.array(
    z.object({
      session_id: z.string(),
      repository_url: z.string(),
      cloud: z.string(),
      iac_path: z.string(),
      status: z.enum(['ACTIVE', 'FAILED', 'MERGED']),
      in_flight: z.object({ round_id: z.string(), kind: z.string() }).nullable(),
      created_at: z.string(),
      updated_at: z.string(),
      /** The session's workflow id, for the Temporal Web UI. */
      workflow_id: z.string(),
    }),
  ),
});

export const adminUserListSchema = z.object({
  users: z.array(
    z.object({
      user_uuid: z.string(),
      name: z.string(),
      role: roleSchema,
      created_at: z.string(),
      /** Set when an admin revoked the token; cleared when a new one is issued. */
      revoked_at: z.string().nullable(),
    }),
  ),
});

/** A new user and its token, shown in this answer only. */
export const createdUserSchema = z.object({
  user: z.object({ user_uuid: z.string(), name: z.string(), role: roleSchema }),
  token: z.string(),
});
export const roleChangedSchema = z.object({ user_uuid: z.string(), name: z.string(), role: roleSchema });
export const tokenRevokedSchema = z.object({
  user_uuid: z.string(),
  name: z.string(),
  revoked: z.literal(true),
});
/** A new token, shown in this answer only. */
export const tokenIssuedSchema = z.object({ user_uuid: z.string(), name: z.string(), token: z.string() });

export const adminLockListSchema = z.object({
  locks: z.array(
    z.object({
      session_id: z.string(),
      locked_by: z.string().nullable(),
      reason: z.string(),
      locked_at: z.string(),
    }),
  ),
});
export const lockSetSchema = z.object({
  session_id: z.string(),
  locked: z.literal(true),
  reason: z.string(),
});
export const lockClearedSchema = z.object({ session_id: z.string(), locked: z.literal(false) });
export const complianceOverrideSchema = z.object({
  session_id: z.string(),
  compliance_override: z.object({ round_id: z.string(), reason: z.string(), by: z.string(), at: z.string() }),
});

/** A git connection as the API shows it: never its credential, only whether it has one. */
export const gitConnectionViewSchema = z.object({
  git_connection_uuid: z.string(),
  origin: z.string(),
  kind: z.string(),
  has_credential: z.boolean(),
  created_at: z.string(),
});
export const gitConnectionListSchema = z.object({ git_connections: z.array(gitConnectionViewSchema) });

// ---- The wizard's preflights and the API's health ------------------------------------------

/** `POST /api/v1/auth/authorize`: may the caller work on this repository and cloud? */
export const authorizeRequestSchema = z
  .object({
    repository_url: repositoryUrlSchema,
    cloud: z.enum(CLOUDS),
    iac_path: iacPathSchema.optional(),
    /** Accepted so the wizard can send its whole form; never forwarded. */
    scope_id: z.string().max(256).optional(),
  })
  .strict();
export const authorizeAnswerSchema = z.object({
  authorized: z.boolean(),
  /** False when no external check ran (services.authz.enabled is false). */
  checked: z.boolean(),
  reason: z.string().optional(),
});

/** `POST /api/v1/mapping`: what the mapping sidecar knows of a repository. */
export const mappingRequestSchema = z
  .object({ repository_url: repositoryUrlSchema, iac_path: iacPathSchema.optional() })
  .strict();
export const mappingAnswerSchema = z.object({
  /** The repository's cloud; null when the sidecar is unsure (or off). */
  provider: z.enum(CLOUDS).nullable(),
  scope_id: z.string().nullable(),
  checked: z.boolean(),
});

/** `GET /health`: every component the API depends on. */
export const healthSchema = z.object({
  status: z.enum(['ok', 'degraded']),
  components: z.array(
    z.object({ name: z.string(), ok: z.boolean(), detail: z.string(), latency_ms: z.number() }),
  ),
});
