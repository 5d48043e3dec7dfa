// The IaC engine client: terraform or tofu, chosen by config, run as a process with argument
// arrays. One client per background run; it remembers whether `init` ran (init is submitted at
// most once per round) and re-runs init when the engine's output asks for it (a remediation added
// a provider or a module). The scope id reaches every call as TF_VAR_kumoss_scope_id: a root that
// declares `variable "kumoss_scope_id"` sees it, one that does not is unaffected.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { z } from 'zod';
import { inSpan } from '../shared/infra/tracing';
import type { EngineSlots } from './engine-slots';
import type { RunCredentials } from './cloud-credentials';
import type { ManagedRoot, ManagedState } from './managed-state';
import { ProcessError, runProcess, type RunResult } from './process';
import { WORKER_CLOUD_CREDENTIALS } from './cloud-credentials';
import { logger } from '../shared/infra/logger';
import { EgressGate, endpointsOfEnv, mergeRules, refusedDials, type EgressRules } from './egress';
import { checkoutOf, gitMetadataOf, SANDBOX_HOME, SandboxUnavailable, type EngineSandbox } from './sandbox';
import { stateVersionOf } from './plan-reader';
import { providersStillBuilding, waitForTool } from '../shared/infra/tools.mjs';

export type EngineBinary = 'terraform' | 'tofu';

export interface EngineOptions {
  /** terraform or tofu */
  kind: EngineBinary;
  /** Path of the binary. */
  binary: string;
  /** CLI config file that installs providers from the filesystem mirror. */
  cliConfigFile: string;
  /** Root module directory (the checked-out IaC path). */
  workdir: string;
  scopeId: string;
  timeoutMs?: number;
  /** Extra environment (cloud credentials); never logged. */
  env?: NodeJS.ProcessEnv;
  /**
   * The engine's and providers' Go heap limit in MiB, with no collection below it (GOGC=off,
   * GOMEMLIMIT; engine.go_memory_limit_mib); absent or 0: Go's default collector.
   */
  goMemoryLimitMib?: number;
  /** Called after every engine process (metrics, benchmarks). */
  onCall?: (call: EngineCall) => void;
  /** The worker's engine slots: a process starts only in a free one (activities/engine-slots.ts). */
  slots?: EngineSlots;
  /**
   * Kumoss-managed state (activities/managed-state.ts): a root that declares no backend keeps its
   * state in the object store under its state project id, one engine call at a time.
   */
  managedState?: ManagedState;
  /** The root's state project id (shared/infra/db/sessions.ts: stateProjectId); with managedState. */
  stateProjectId?: string;
  /**
   * The engine's sandbox (activities/sandbox.ts); without one, or with `engine.sandbox: off`, the
   * engine runs as the worker does.
   */
  sandbox?: EngineSandbox;
  /**
   * The run's own cloud credentials (activities/cloud-credentials.ts): when it answers some, they
   * replace the worker's credential variables of `env`.
   */
  runCredentials?: () => Promise<RunCredentials | undefined>;
  /**
   * The run's own directory, the only one a sandboxed engine may write: the checkout and its plan
   * files. Default: the checkout holding `workdir` (else `workdir` itself).
   */
  runDir?: string;
}

/**
 * Engine calls (and the providers they start) run at this niceness: a plan is bulk work that can
 * wait a few milliseconds, while the worker, the API, the store and Temporal on the same cores carry
 * every status change to the people watching (docs/benchmarks.md, the SSE delay by segment).
 */
export const ENGINE_NICENESS = 10;

/**
 * The verbs that read the state to change it or to plan against it: they hold a managed state's
 * lease — but for a call that takes no lock (`-lock=false`: a read-only plan), which reads the
 * state under a grant without one.
 */
const STATE_VERBS = new Set(['plan', 'apply', 'import', 'refresh']);

export interface CallHooks {
  signal?: AbortSignal;
  heartbeat?: (detail: string) => void;
  /** The engine process was asked for (it runs beside whatever the caller does next). */
  onStart?: () => void;
}

export interface PlanOptions {
  /** The plan file to write. */
  out: string;
  targets?: string[];
  parallelism?: number;
  /**
   * false: the plan takes no state lock (`-lock=false`). For plans that are only read — a stack
   * detection's: a plan writes no state, and its plan file is never applied (a remediation plans
   * again, under the lock). A detection then neither waits for an apply's lock nor makes an apply
   * wait for its own; against a lock held, the engine would poll with a backoff from 1 s to 16 s
   * (`-lock-timeout`), the slot taken and no CPU used. Default: the lock, waited for up to 60 s.
   */
  lock?: false;
}

export interface PlanResult {
  planFile: string;
  /** True when the plan has changes (exit code 2 of -detailed-exitcode). */
  hasChanges: boolean;
  output: string;
  reinitialized: boolean;
}

export interface EngineCall {
  args: string[];
  exitCode: number;
  durationMs: number;
}

/** The engine rejected the call; `permanent` when the configuration itself is wrong. */
export class EngineError extends Error {
  override name = 'EngineError';
  constructor(
    message: string,
    readonly permanent: boolean,
    readonly output: string,
  ) {
    super(message);
  }
}

/** How long init waits for a provider still building in the background (its build's own bound). */
const PROVIDER_BUILD_WAIT_MS = 30 * 60 * 1000;

/** Output that means "run init (again)": missing providers/modules, a changed lock file. */
const NEEDS_INIT = [
  /Run "(terraform|tofu) init"/i,
  /please run "(terraform|tofu) init"/i,
  /Inconsistent dependency lock file/i,
  /Module not installed/i,
  /Missing required provider/i,
  /required provider .* is not available/i,
  /Backend initialization required/i,
  /Could not load plugin/i,
];

/** Output that no retry can fix: the configuration is wrong. */
const PERMANENT = [
  /Error: (Invalid|Unsupported|Missing required argument|Reference to undeclared|Unclosed|Argument or block definition required|Duplicate|Unterminated|Incorrect attribute value type|Invalid reference)/,
  /Error: Failed to query available provider packages/,
  /There are some problems with the configuration/,
];

export function needsInit(output: string): boolean {
  return NEEDS_INIT.some((re) => re.test(output));
}

export function isPermanentEngineFailure(output: string): boolean {
  return PERMANENT.some((re) => re.test(output));
}

/** A diagnostic as the engine's JSON output carries it (`validate -json`, `apply -json`). */
const diagnosticSchema = z.object({
  severity: z.string().optional(),
  summary: z.string().optional(),
  detail: z.string().optional(),
  address: z.string().optional(),
  range: z
    .object({ filename: z.string().optional(), start: z.object({ line: z.number().optional() }).optional() })
    .optional(),
});

/** What `validate -json` says: the engine's own structured diagnostics. */
const validateJsonSchema = z.object({
  valid: z.boolean(),
  diagnostics: z.array(diagnosticSchema).optional(),
});

/** One line of `apply -json`'s machine-readable UI. */
const applyLineSchema = z.object({
  '@message': z.string().optional(),
  type: z.string().optional(),
  diagnostic: diagnosticSchema.optional(),
});

/** `JSON.parse` checked against a schema; undefined for anything else (not JSON, another shape). */
function parseJson<T>(schema: z.ZodType<T>, text: string): T | undefined {
  try {
    const parsed = schema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** The first error diagnostic of a `validate -json` answer, as `Error: <summary> (<file> line <n>)`. */
export function firstErrorDiagnostic(json: string): string | undefined {
  const parsed = parseJson(validateJsonSchema, json);
  if (!parsed || parsed.valid) return undefined;
  const d = parsed.diagnostics?.find((x) => x.severity === 'error');
  if (!d) return undefined;
  const where = d.range?.filename ? ` (${d.range.filename} line ${d.range.start?.line ?? 0})` : '';
  return `Error: ${d.summary ?? ''}${where}`;
}

export class EngineClient {
  private initialized = false;
  private initCount = 0;
  private managedRoot?: Promise<ManagedRoot | undefined>;
  readonly calls: EngineCall[] = [];

  constructor(private readonly opts: EngineOptions) {}

  get initRuns(): number {
    return this.initCount;
  }

  private sandboxed(): EngineSandbox | undefined {
    const s = this.opts.sandbox;
    return s && s.mode !== 'off' ? s : undefined;
  }

  /**
   * The engine's environment. Sandboxed, it is all the process has: a search path, an empty private
   * home, the run's cloud settings and the engine's own variables — nothing of the worker's.
   */
  private async env(extra: Record<string, string> = {}): Promise<Record<string, string>> {
    const sandboxed = Boolean(this.sandboxed());
    const run = await this.runCredentials();
    this.missingCredentials = run?.missing;
    // The cloud settings given (an endpoint, a region), never a credential: a run's credentials
    // are its own connection's.
    const cloud: Record<string, string> = {};
    for (const [k, v] of Object.entries(this.opts.env ?? {}))
      if (v !== undefined && !WORKER_CLOUD_CREDENTIALS.test(k)) cloud[k] = v;
    const env: NodeJS.ProcessEnv = {
      PATH: sandboxed ? '/usr/local/bin:/usr/bin:/bin' : process.env.PATH,
      HOME: sandboxed ? SANDBOX_HOME : process.env.HOME,
      ...cloud,
      ...run?.env,
      ...extra,
      TF_CLI_CONFIG_FILE: this.opts.cliConfigFile,
      TF_IN_AUTOMATION: '1',
      TF_INPUT: '0',
      CHECKPOINT_DISABLE: '1',
      TF_VAR_kumoss_scope_id: this.opts.scopeId,
      // Inherited by the providers too: no collection until a process's heap nears the limit.
      ...(this.opts.goMemoryLimitMib ? { GOGC: 'off', GOMEMLIMIT: `${this.opts.goMemoryLimitMib}MiB` } : {}),
      // Sandboxed, a provider's plugin socket lives in the process's private /tmp, which only the
      // run's own processes reach (and they already hold everything the provider holds): the
      // engine talks to its providers without the per-start certificates and mutual TLS handshake
      // (about half of a small plan's CPU). Unsandboxed, the socket is in the machine's /tmp: TLS stays.
      ...(sandboxed ? { TF_DISABLE_PLUGIN_TLS: '1' } : {}),
    };
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(env)) if (v !== undefined) out[k] = v;
    return out;
  }

  /** Why the last engine process had no cloud credentials (no connection for the run's cloud). */
  private missingCredentials?: string;

  /** An engine failure, with why the run had no cloud credentials when that is so. */
  private engineError(message: string, permanent: boolean, output: string): EngineError {
    const why = [
      ...(this.missingCredentials ? [this.missingCredentials] : []),
      ...(this.egressRefused.length > 0
        ? [
            `the engine's network refused ${this.egressRefused.join(', ')}: not a destination of this run (engine.egress_allow names more)`,
          ]
        : []),
    ];
    return new EngineError(why.length ? `${message} (${why.join('; ')})` : message, permanent, output);
  }

  private credentials?: Promise<RunCredentials | undefined>;
  private credentialsExpireAt = 0;

  /** The run's own cloud credentials (activities/cloud-credentials.ts), renewed before they expire. */
  private async runCredentials(): Promise<RunCredentials | undefined> {
    if (!this.opts.runCredentials) return undefined;
    if (!this.credentials || this.credentialsExpireAt - Date.now() < 5 * 60_000) {
      this.credentials = this.opts.runCredentials();
      void this.credentials.then(
        (c) => (this.credentialsExpireAt = c?.expiresAt ?? Number.POSITIVE_INFINITY),
        () => (this.credentials = undefined),
      );
      this.credentialsExpireAt = Number.POSITIVE_INFINITY;
    }
    return this.credentials;
  }

  /** This root's managed state, when Kumoss manages it (decided once per client). */
  managed(): Promise<ManagedRoot | undefined> {
    const { managedState, stateProjectId } = this.opts;
    if (!managedState || !stateProjectId) return Promise.resolve(undefined);
    this.managedRoot ??= managedState.forRoot(this.opts.workdir, stateProjectId);
    return this.managedRoot;
  }

  private async run(
    args: string[],
    hooks: CallHooks = {},
    stdoutFile?: string,
    io: { stdin?: string; timeoutMs?: number; writable?: string[] } = {},
  ): Promise<RunResult> {
    const verb = args[0] ?? '';
    const managed = await this.managed();
    if (managed && verb !== 'fmt') {
      managed.ensureOverride();
      // The state is always the store's: a checkout initialized for another backend address (another
      // worker's state server) or for the S3 backend of older runs is re-pointed, never migrated.
      const call = verb === 'init' ? [...args, '-reconfigure'] : args;
      if (STATE_VERBS.has(verb) && !args.includes('-lock=false'))
        return managed.hold(`${this.opts.kind} ${verb}`, hooks, (lease) =>
          managed.withGrant(lease, (env) =>
            this.exec(call, { ...hooks, signal: lease.signal }, stdoutFile, { ...io, env }),
          ),
        );
      return managed.withGrant(undefined, (env) => this.exec(call, hooks, stdoutFile, { ...io, env }));
    }
    return this.exec(args, hooks, stdoutFile, io);
  }

  /**
   * The program and arguments that run the engine with `args`: inside the sandbox when it is on,
   * writing the run's directory and the checkout it plans in — but that checkout's `.git` — and
   * `writable` (a call's own scratch directory).
   */
  private commandLine(
    args: string[],
    env: Record<string, string>,
    writable: string[] = [],
    gate?: EgressGate,
  ): { command: string; args: string[]; fd3?: string } {
    // `npm start` builds only the configured engine; a run that asks for the other one says so.
    if (!existsSync(this.opts.binary))
      throw new EngineError(
        `${this.opts.kind} is not installed here (${this.opts.binary}); \`npm run setup\` builds it`,
        true,
        '',
      );
    const sandbox = this.sandboxed();
    if (!sandbox) return { command: this.opts.binary, args };
    try {
      sandbox.assertReady();
    } catch (err) {
      if (err instanceof SandboxUnavailable) throw new EngineError(err.message, true, '');
      throw err;
    }
    const checkout = checkoutOf(this.opts.workdir);
    return sandbox.wrap(this.opts.binary, args, {
      writable: [...(this.opts.runDir ? [this.opts.runDir] : []), checkout ?? this.opts.workdir, ...writable],
      protect: checkout ? gitMetadataOf(checkout, this.opts.runDir) : [],
      cwd: this.opts.workdir,
      env,
      ...(gate ? { egress: { dir: gate.dir, listeners: gate.listeners } } : {}),
    });
  }

  /**
   * What this run's engine may reach: its own endpoints (its state server, its cloud's configured
   * endpoint), its cloud's API domains when it holds that cloud's credentials, and what the
   * configuration allows every run.
   */
  private async egressRules(env: Record<string, string>, sandbox: EngineSandbox): Promise<EgressRules> {
    const run = await this.runCredentials();
    return mergeRules(sandbox.egressAllowed(), {
      endpoints: endpointsOfEnv(env),
      domains: run?.domains ?? [],
    });
  }

  /** What the engine's network refused in the last process (the run's log and its error say it). */
  private egressRefused: string[] = [];

  private async exec(
    args: string[],
    hooks: CallHooks,
    stdoutFile: string | undefined,
    io: { stdin?: string; timeoutMs?: number; env?: Record<string, string>; writable?: string[] },
  ): Promise<RunResult> {
    const verb = args[0] ?? '';
    const baseEnv = await this.env(io.env);
    const sandbox = this.sandboxed();
    this.egressRefused = [];
    const gate = sandbox?.isolatesNetwork
      ? await EgressGate.open(await this.egressRules(baseEnv, sandbox))
      : undefined;
    try {
      const r = await this.execIn(verb, args, hooks, stdoutFile, io, gate, baseEnv);
      if (gate) {
        const refused = gate.describe(refusedDials(`${r.stderr}\n${r.stdout}`));
        if (refused.length > 0) {
          this.egressRefused = refused;
          logger.warn(
            { engine: this.opts.kind, verb, refused, workdir: this.opts.workdir },
            "the engine's network refused destinations that are not this run's",
          );
          r.stderr = `${r.stderr}\n${refused.map((d) => `Kumoss egress refused ${d}`).join('\n')}\n`;
        }
      }
      return r;
    } finally {
      await gate?.close();
    }
  }

  private async execIn(
    verb: string,
    args: string[],
    hooks: CallHooks,
    stdoutFile: string | undefined,
    io: { stdin?: string; timeoutMs?: number; writable?: string[] },
    gate: EgressGate | undefined,
    baseEnv: Record<string, string>,
  ): Promise<RunResult> {
    const env = gate ? { ...baseEnv, ...gate.proxyEnv() } : baseEnv;
    const cmd = this.commandLine(args, env, io.writable, gate);
    const start = () =>
      inSpan(
        `${this.opts.kind} ${verb}`,
        { 'kumoss.engine': this.opts.kind, 'kumoss.engine.verb': verb },
        (span) => {
          const running = runProcess(cmd.command, cmd.args, {
            cwd: this.opts.workdir,
            // bubblewrap itself gets the search path only; the engine's environment is set inside.
            env: this.sandboxed() ? { PATH: process.env.PATH } : env,
            timeoutMs: io.timeoutMs ?? this.opts.timeoutMs ?? 30 * 60 * 1000,
            signal: hooks.signal,
            stdoutFile,
            ...(cmd.fd3 !== undefined ? { fd3: cmd.fd3 } : {}),
            niceness: ENGINE_NICENESS,
            ...(io.stdin !== undefined ? { stdin: io.stdin } : {}),
            onHeartbeat: (ms) =>
              hooks.heartbeat?.(`${this.opts.kind} ${verb} running for ${Math.round(ms / 1000)}s`),
          });
          hooks.onStart?.();
          return running.then((r) => {
            span.setAttribute('process.exit.code', r.exitCode);
            return r;
          });
        },
      );
    const slots = this.opts.slots;
    try {
      const r = slots
        ? await slots.run(start, {
            ...(hooks.signal ? { signal: hooks.signal } : {}),
            onWait: () =>
              hooks.heartbeat?.(
                `${this.opts.kind} ${verb} waiting for an engine slot (${slots.running} of ${slots.size} busy)`,
              ),
          })
        : await start();
      const call = { args, exitCode: r.exitCode, durationMs: r.durationMs };
      this.calls.push(call);
      this.opts.onCall?.(call);
      return r;
    } catch (err) {
      if (err instanceof ProcessError && err.reason === 'spawn') {
        throw new EngineError(
          `${this.opts.kind} is not runnable at ${this.opts.binary}: ${err.message}`,
          true,
          '',
        );
      }
      throw err;
    }
  }

  /**
   * A failed validate or plan, classified by the engine's `validate -json` diagnostics: errors in
   * the configuration are permanent (no retry fixes them); a configuration that validates failed
   * for another reason (a provider, the network, a lock) and is retried.
   */
  private async failClassified(
    verb: string,
    r: RunResult,
    hooks: CallHooks,
    validated?: RunResult,
  ): Promise<never> {
    const output = `${r.stderr}\n${r.stdout}`.trim();
    const v =
      verb === 'validate' ? r : (validated ?? (await this.run(['validate', '-json', '-no-color'], hooks)));
    const diagnostic = firstErrorDiagnostic(v.stdout);
    if (diagnostic) throw this.engineError(`${this.opts.kind} ${verb} failed: ${diagnostic}`, true, output);
    const match = /Error: (.*)/.exec(output);
    throw this.engineError(
      `${this.opts.kind} ${verb} failed: ${match ? `Error: ${match[1]}` : `exit code ${r.exitCode}`}`,
      false,
      output,
    );
  }

  private fail(verb: string, r: RunResult): never {
    const output = `${r.stderr}\n${r.stdout}`.trim();
    const match = /Error: (.*)(?:\n+\s*on (\S+) line (\d+))?/.exec(output);
    const firstError = match
      ? `Error: ${match[1]}${match[2] ? ` (${match[2]} line ${match[3]})` : ''}`
      : `exit code ${r.exitCode}`;
    throw this.engineError(
      `${this.opts.kind} ${verb} failed: ${firstError}`,
      isPermanentEngineFailure(output),
      output,
    );
  }

  async init(hooks: CallHooks = {}): Promise<string> {
    const args = ['init', '-input=false', '-no-color'];
    let r = await this.run(args, hooks);
    // A provider the root needs may still be building in the background (the first `npm start`
    // builds the providers after the system is up): wait for it, then init again.
    const building = r.exitCode === 0 ? [] : providersStillBuilding(`${r.stderr}\n${r.stdout}`);
    if (building.length > 0) {
      for (const name of building)
        await waitForTool(name, PROVIDER_BUILD_WAIT_MS, {
          ...(hooks.heartbeat ? { onWait: hooks.heartbeat } : {}),
          ...(hooks.signal ? { signal: hooks.signal } : {}),
        });
      r = await this.run(args, hooks);
    }
    this.initCount += 1;
    if (r.exitCode !== 0) this.fail('init', r);
    this.initialized = true;
    return r.stdout;
  }

  /**
   * Takes the working directory's `.terraform/` as initialized (a warm stack workspace whose last
   * plan succeeded): the next call skips init, and runs it when the engine asks for it.
   */
  assumeInitialized(): void {
    this.initialized = true;
  }

  /** Runs init unless it already ran for this client. */
  async ensureInit(hooks: CallHooks = {}): Promise<boolean> {
    if (this.initialized) return false;
    await this.init(hooks);
    return true;
  }

  private static readonly VALIDATE = ['validate', '-json', '-no-color'];

  private planArgs(opts: PlanOptions): string[] {
    const args = [
      'plan',
      '-input=false',
      '-no-color',
      opts.lock === false ? '-lock=false' : '-lock-timeout=60s',
      '-detailed-exitcode',
      `-out=${opts.out}`,
    ];
    if (opts.parallelism) args.push(`-parallelism=${opts.parallelism}`);
    for (const t of opts.targets ?? []) args.push(`-target=${t}`);
    return args;
  }

  /**
   * Runs `args`, and when the engine asks for init, runs init once and the call again; a failure
   * is answered by `failed` (default: classified by the engine's diagnostics).
   */
  private async withReinit(
    verb: string,
    args: string[],
    ok: (code: number) => boolean,
    hooks: CallHooks,
    failed?: (r: RunResult) => Promise<never>,
  ) {
    await this.ensureInit(hooks);
    let r = await this.run(args, hooks);
    let reinitialized = false;
    if (!ok(r.exitCode) && needsInit(`${r.stderr}\n${r.stdout}`)) {
      await this.init(hooks);
      reinitialized = true;
      r = await this.run(args, hooks);
    }
    if (!ok(r.exitCode)) {
      if (failed) await failed(r);
      if (verb === 'validate' || verb === 'plan') await this.failClassified(verb, r, hooks);
      this.fail(verb, r);
    }
    return { r, reinitialized };
  }

  async validate(hooks: CallHooks = {}): Promise<{ valid: boolean; output: string; reinitialized: boolean }> {
    const { r, reinitialized } = await this.withReinit(
      'validate',
      EngineClient.VALIDATE,
      (c) => c === 0,
      hooks,
    );
    return { valid: true, output: r.stdout, reinitialized };
  }

  async plan(
    opts: PlanOptions,
    hooks: CallHooks = {},
    failed?: (r: RunResult) => Promise<never>,
  ): Promise<PlanResult> {
    const { r, reinitialized } = await this.withReinit(
      'plan',
      this.planArgs(opts),
      (c) => c === 0 || c === 2,
      hooks,
      failed,
    );
    return { planFile: opts.out, hasChanges: r.exitCode === 2, output: r.stdout, reinitialized };
  }

  /**
   * The seed's validate, then plan -out — with both engine processes running at once (neither
   * writes what the other reads: validate reads the configuration and `.terraform/`, plan takes the
   * state lock and writes its plan file). The answer is the serial one's: a configuration that
   * does not validate fails with validate's diagnostic, whatever the plan said; a plan that fails on
   * a configuration that validates is retried. When either asks for init, init runs once (never
   * beside another engine process of this directory) and both run again.
   */
  async validateAndPlan(
    opts: { out: string; targets?: string[] },
    hooks: CallHooks = {},
  ): Promise<PlanResult & { validateOutput: string }> {
    await this.ensureInit(hooks);
    const planArgs = this.planArgs(opts);
    const both = () => Promise.all([this.run(EngineClient.VALIDATE, hooks), this.run(planArgs, hooks)]);
    let [v, p] = await both();
    let reinitialized = false;
    const planOk = (c: number) => c === 0 || c === 2;
    if (
      (v.exitCode !== 0 && needsInit(`${v.stderr}\n${v.stdout}`)) ||
      (!planOk(p.exitCode) && needsInit(`${p.stderr}\n${p.stdout}`))
    ) {
      await this.init(hooks);
      reinitialized = true;
      [v, p] = await both();
    }
    if (v.exitCode !== 0) await this.failClassified('validate', v, hooks);
    if (!planOk(p.exitCode)) await this.failClassified('plan', p, hooks, v);
    return {
      planFile: opts.out,
      hasChanges: p.exitCode === 2,
      output: p.stdout,
      validateOutput: v.stdout,
      reinitialized,
    };
  }

  /**
   * A plan that validates what it plans: `terraform plan` validates the whole configuration before
   * planning (the local backend's validation walk runs for every plan, `-target` or not), so a
   * separate `validate` process beside it repeats that work — and on two cores takes CPU from the
   * plan. `validate -json` runs only when the plan fails, and its diagnostic is the answer, as a
   * serial validate-then-plan would give it.
   */
  async planValidated(
    opts: { out: string; targets?: string[]; lock?: false },
    hooks: CallHooks = {},
  ): Promise<PlanResult> {
    return this.plan(opts, hooks, async (r) => {
      const v = await this.run(EngineClient.VALIDATE, hooks);
      if (v.exitCode !== 0) await this.failClassified('validate', v, hooks);
      return this.failClassified('plan', r, hooks, v);
    });
  }

  /** `show -json` of a saved plan, written to `outFile` (plans can be large: they go to object
   * storage by key, never through workflow history). */
  async showJson(planFile: string, outFile: string, hooks: CallHooks = {}): Promise<void> {
    const r = await this.run(['show', '-json', '-no-color', planFile], hooks, outFile);
    if (r.exitCode !== 0) this.fail('show', r);
  }

  /** `show -json` of the current state, written to `outFile` (init first). */
  async stateJson(outFile: string, hooks: CallHooks = {}): Promise<void> {
    await this.ensureInit(hooks);
    const r = await this.run(['show', '-json', '-no-color'], hooks, outFile);
    if (r.exitCode !== 0) this.fail('show', r);
  }

  /** The state's serial and lineage (`state pull`); null when there is no state yet. */
  async stateVersion(hooks: CallHooks = {}): Promise<{ serial: number; lineage: string } | null> {
    await this.ensureInit(hooks);
    const r = await this.run(['state', 'pull'], hooks);
    if (r.exitCode !== 0) this.fail('state pull', r);
    if (!r.stdout.trim()) return null;
    return stateVersionOf(r.stdout);
  }

  /**
   * Applies exactly the saved plan `planFile` (the engine itself refuses it if the state moved),
   * with `-json`: the log is the engine's own messages, line by line, and a failure is its first
   * error diagnostic (summary, detail, resource) — not a line picked out of the text.
   */
  async applyPlan(
    planFile: string,
    hooks: CallHooks = {},
  ): Promise<{ ok: boolean; output: string; error?: string }> {
    await this.ensureInit(hooks);
    const r = await this.run(
      ['apply', '-input=false', '-no-color', '-json', '-lock-timeout=60s', planFile],
      hooks,
    );
    const lines: string[] = [];
    let error: string | undefined;
    for (const raw of r.stdout.split('\n')) {
      if (!raw.trim()) continue;
      const m = parseJson(applyLineSchema, raw);
      if (!m) {
        lines.push(raw);
        continue;
      }
      if (m.type === 'version') continue;
      const d = m.diagnostic;
      if (d) {
        lines.push(
          `${d.severity === 'error' ? 'Error' : 'Warning'}: ${d.summary ?? ''}${d.detail ? `\n  ${d.detail}` : ''}`,
        );
        if (d.severity === 'error' && error === undefined)
          error = `${d.address ? `${d.address}: ` : ''}${d.summary ?? ''}${d.detail ? ` — ${d.detail}` : ''}`;
      } else if (m['@message']) lines.push(m['@message']);
    }
    if (r.stderr.trim()) lines.push(r.stderr.trim());
    return { ok: r.exitCode === 0, output: `${lines.join('\n')}\n`, ...(error ? { error } : {}) };
  }

  /**
   * The canonical formatting of several files' texts in one engine process (`fmt` of a scratch
   * directory inside the run's own directory): one process start instead of one per text. When
   * any text does not parse, fmt refuses them all and each is formatted on its own (`fmt -`);
   * `undefined` for a text fmt rejects.
   */
  async fmtMany(
    texts: { text: string; tfvars?: boolean }[],
    hooks: CallHooks = {},
  ): Promise<(string | undefined)[]> {
    if (texts.length === 0) return [];
    // Outside the checkout (no `git add` can pick the files up), writable by this call alone.
    const dir = mkdtempSync(join(tmpdir(), 'kumoss-fmt-'));
    try {
      const names = texts.map((t, i) => `f${i}.${t.tfvars ? 'tfvars' : 'tf'}`);
      texts.forEach((t, i) => writeFileSync(join(dir, names[i] as string), t.text));
      const r = await this.run(['fmt', '-no-color', '-list=false', dir], hooks, undefined, {
        timeoutMs: 60_000,
        writable: [dir],
      });
      if (r.exitCode === 0) return names.map((n) => readFileSync(join(dir, n), 'utf8'));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    return Promise.all(texts.map((t) => this.fmt(t.text, hooks).catch(() => undefined)));
  }

  /** `fmt -` on a file's text: the canonical formatting (no init needed). */
  async fmt(text: string, hooks: CallHooks = {}): Promise<string> {
    const r = await this.run(['fmt', '-no-color', '-'], hooks, undefined, { stdin: text, timeoutMs: 60_000 });
    if (r.exitCode !== 0) this.fail('fmt', r);
    return r.stdout;
  }

  async apply(opts: { parallelism?: number } = {}, hooks: CallHooks = {}): Promise<string> {
    const args = ['apply', '-input=false', '-no-color', '-auto-approve', '-lock-timeout=60s'];
    if (opts.parallelism) args.push(`-parallelism=${opts.parallelism}`);
    const { r } = await this.withReinit('apply', args, (c) => c === 0, hooks);
    return r.stdout;
  }
}
