// The seven runner resources: for each, how to detect drift (read-only calls only), how to repair
// it and how to undo a repair that created it. Resources a repair creates carry the tag/label
// `kumoss-repair=<workflow id>`, so a retried repair step knows it created them already.
import {
  CreateLogGroupCommand,
  DeleteLogGroupCommand,
  DescribeLogGroupsCommand,
  ListTagsLogGroupCommand,
  PutRetentionPolicyCommand,
} from '@aws-sdk/client-cloudwatch-logs';
import {
  CreateClusterCommand,
  DeleteClusterCommand,
  DeregisterTaskDefinitionCommand,
  DescribeClustersCommand,
  DescribeTaskDefinitionCommand,
  RegisterTaskDefinitionCommand,
  UpdateClusterCommand,
  type TaskDefinition,
} from '@aws-sdk/client-ecs';
import { DescribeSecretCommand, RestoreSecretCommand } from '@aws-sdk/client-secrets-manager';
import type { CloudConnection } from '../../shared/infra/db/runners';
import type {
  DetectorResult,
  PlannedAction,
  RunnerEnvironment,
  RunnerResource,
} from '../../shared/runner-contracts';
import { differences } from '../../shared/runner-plan';
import { awsFailure, gcpFailure, isAwsNotFound, type AwsClients, type GcpClient } from './clouds';

export const REPAIR_TAG = 'kumoss-repair';

export interface ResourceContext {
  environment: RunnerEnvironment;
  connection: CloudConnection;
  aws: () => AwsClients;
  gcp: () => GcpClient;
  /** The repair's workflow id (the tag value of what it creates). */
  repairId: string;
}

export interface ResourceHandler {
  detect(ctx: ResourceContext): Promise<DetectorResult>;
  repair(ctx: ResourceContext, action: PlannedAction): Promise<Record<string, unknown>>;
  /** Undoes a repair whose output said `created: true`. */
  compensate?(ctx: ResourceContext, output: Record<string, unknown>): Promise<Record<string, unknown>>;
}

/** Runs a cloud call, turning its error into a Temporal failure (permanent for a 4xx). */
const translated =
  (toFailure: (err: unknown, what: string) => Error) =>
  async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      throw toFailure(err, what);
    }
  };
const aws = translated(awsFailure);
const gcp = translated(gcpFailure);

function envOf<K extends RunnerEnvironment['backend_type']>(
  ctx: ResourceContext,
  ...kinds: K[]
): Extract<RunnerEnvironment, { backend_type: K }> {
  if (!(kinds as string[]).includes(ctx.environment.backend_type)) {
    throw new Error(`resource handler called for backend ${ctx.environment.backend_type}`);
  }
  return ctx.environment as Extract<RunnerEnvironment, { backend_type: K }>;
}

function result(
  resource: RunnerResource,
  target: string,
  found: boolean,
  diffs: ReturnType<typeof differences>,
  driftAction: PlannedAction['action'] = 'update',
): DetectorResult {
  if (!found) return { resource, status: 'missing', action: 'create', target, differences: [] };
  if (diffs.length) return { resource, status: 'drifted', action: driftAction, target, differences: diffs };
  return { resource, status: 'in_sync', target };
}

// ---- AWS ------------------------------------------------------------------------------------

async function describeCluster(ctx: ResourceContext, name: string) {
  const out = await aws(`ECS DescribeClusters ${name}`, () =>
    ctx.aws().ecs.send(new DescribeClustersCommand({ clusters: [name], include: ['SETTINGS', 'TAGS'] })),
  );
  const cluster = out.clusters?.find((c) => c.clusterName === name && c.status !== 'INACTIVE');
  return cluster;
}

const ecsCluster: ResourceHandler = {
  async detect(ctx) {
    const want = envOf(ctx, 'aws_ecs').ecs_cluster;
    const cluster = await describeCluster(ctx, want.name);
    const insights = cluster?.settings?.find((s) => s.name === 'containerInsights')?.value ?? 'disabled';
    return result(
      'ecs_cluster',
      want.name,
      !!cluster,
      differences({ container_insights: want.container_insights }, { container_insights: insights }),
    );
  },
  async repair(ctx) {
    const want = envOf(ctx, 'aws_ecs').ecs_cluster;
    const settings = [{ name: 'containerInsights' as const, value: want.container_insights }];
    const cluster = await describeCluster(ctx, want.name);
    if (cluster) {
      const ours = cluster.tags?.some((t) => t.key === REPAIR_TAG && t.value === ctx.repairId) ?? false;
      await aws(`ECS UpdateCluster ${want.name}`, () =>
        ctx.aws().ecs.send(new UpdateClusterCommand({ cluster: want.name, settings })),
      );
      return { status: 'repaired', target: want.name, created: ours, cluster_arn: cluster.clusterArn };
    }
    const out = await aws(`ECS CreateCluster ${want.name}`, () =>
      ctx.aws().ecs.send(
        new CreateClusterCommand({
          clusterName: want.name,
          settings,
          tags: [{ key: REPAIR_TAG, value: ctx.repairId }],
        }),
      ),
    );
    return { status: 'repaired', target: want.name, created: true, cluster_arn: out.cluster?.clusterArn };
  },
  async compensate(ctx, output) {
    const name = String(output.target);
    await aws(`ECS DeleteCluster ${name}`, () =>
      ctx.aws().ecs.send(new DeleteClusterCommand({ cluster: name })),
    );
    return { status: 'deleted', target: name };
  },
};

async function describeLogGroup(ctx: ResourceContext, name: string) {
  const out = await aws(`CloudWatch Logs DescribeLogGroups ${name}`, () =>
    ctx.aws().logs.send(new DescribeLogGroupsCommand({ logGroupNamePrefix: name })),
  );
  return out.logGroups?.find((g) => g.logGroupName === name);
}

const logGroup: ResourceHandler = {
  async detect(ctx) {
    const want = envOf(ctx, 'aws_ecs').log_group;
    const group = await describeLogGroup(ctx, want.name);
    return result(
      'log_group',
      want.name,
      !!group,
      differences(
        { retention_days: want.retention_days },
        { retention_days: group?.retentionInDays ?? null },
      ),
    );
  },
  async repair(ctx) {
    const want = envOf(ctx, 'aws_ecs').log_group;
    let created = false;
    const group = await describeLogGroup(ctx, want.name);
    if (!group) {
      await aws(`CloudWatch Logs CreateLogGroup ${want.name}`, () =>
        ctx
          .aws()
          .logs.send(
            new CreateLogGroupCommand({ logGroupName: want.name, tags: { [REPAIR_TAG]: ctx.repairId } }),
          ),
      );
      created = true;
    } else {
      const tags = await aws(`CloudWatch Logs ListTagsLogGroup ${want.name}`, () =>
        ctx.aws().logs.send(new ListTagsLogGroupCommand({ logGroupName: want.name })),
      );
      created = tags.tags?.[REPAIR_TAG] === ctx.repairId;
    }
    if (want.retention_days !== undefined) {
      await aws(`CloudWatch Logs PutRetentionPolicy ${want.name}`, () =>
        ctx
          .aws()
          .logs.send(
            new PutRetentionPolicyCommand({ logGroupName: want.name, retentionInDays: want.retention_days }),
          ),
      );
    }
    return { status: 'repaired', target: want.name, created };
  },
  async compensate(ctx, output) {
    const name = String(output.target);
    await aws(`CloudWatch Logs DeleteLogGroup ${name}`, () =>
      ctx.aws().logs.send(new DeleteLogGroupCommand({ logGroupName: name })),
    );
    return { status: 'deleted', target: name };
  },
};

async function describeTaskDefinition(ctx: ResourceContext, family: string) {
  try {
    const out = await ctx
      .aws()
      .ecs.send(new DescribeTaskDefinitionCommand({ taskDefinition: family, include: ['TAGS'] }));
    return out.taskDefinition?.status === 'INACTIVE'
      ? undefined
      : { def: out.taskDefinition, tags: out.tags ?? [] };
  } catch (err) {
    // ECS answers ClientException "Unable to describe task definition." for an unknown family.
    const e = err as { name?: string; message?: string };
    if (
      isAwsNotFound(err) ||
      (e.name === 'ClientException' && /unable to describe|not found|does not exist/i.test(e.message ?? ''))
    ) {
      return undefined;
    }
    throw awsFailure(err, `ECS DescribeTaskDefinition ${family}`);
  }
}

function taskShape(def: TaskDefinition | undefined, containerName: string) {
  const c = def?.containerDefinitions?.find((x) => x.name === containerName);
  return {
    image: c?.image ?? null,
    cpu: def?.cpu ?? null,
    memory: def?.memory ?? null,
    log_group: c?.logConfiguration?.options?.['awslogs-group'] ?? null,
  };
}

const taskDefinition: ResourceHandler = {
  async detect(ctx) {
    const env = envOf(ctx, 'aws_ecs');
    const want = env.task_definition;
    const found = await describeTaskDefinition(ctx, want.family);
    return result(
      'task_definition',
      want.family,
      !!found,
      differences(
        { image: want.image, cpu: want.cpu, memory: want.memory, log_group: env.log_group.name },
        taskShape(found?.def, want.container_name),
      ),
    );
  },
  async repair(ctx) {
    const env = envOf(ctx, 'aws_ecs');
    const want = env.task_definition;
    const existing = await describeTaskDefinition(ctx, want.family);
    if (existing && existing.tags.some((t) => t.key === REPAIR_TAG && t.value === ctx.repairId)) {
      const shape = taskShape(existing.def, want.container_name);
      if (
        !differences(
          { image: want.image, cpu: want.cpu, memory: want.memory, log_group: env.log_group.name },
          shape,
        ).length
      ) {
        return { status: 'repaired', target: want.family, created: true, revision: existing.def?.revision };
      }
    }
    let secretArn: string | undefined;
    if (env.pull_secret) {
      const secret = await aws(`Secrets Manager DescribeSecret ${env.pull_secret.name}`, () =>
        ctx.aws().secrets.send(new DescribeSecretCommand({ SecretId: env.pull_secret?.name })),
      );
      secretArn = secret.ARN;
    }
    const out = await aws(`ECS RegisterTaskDefinition ${want.family}`, () =>
      ctx.aws().ecs.send(
        new RegisterTaskDefinitionCommand({
          family: want.family,
          cpu: want.cpu,
          memory: want.memory,
          networkMode: 'awsvpc',
          requiresCompatibilities: ['FARGATE'],
          containerDefinitions: [
            {
              name: want.container_name,
              image: want.image,
              essential: true,
              logConfiguration: {
                logDriver: 'awslogs',
                options: {
                  'awslogs-group': env.log_group.name,
                  'awslogs-region': ctx.connection.region,
                  'awslogs-stream-prefix': 'runner',
                },
              },
              ...(secretArn ? { repositoryCredentials: { credentialsParameter: secretArn } } : {}),
            },
          ],
          tags: [{ key: REPAIR_TAG, value: ctx.repairId }],
        }),
      ),
    );
    // A new revision is created either way; undoing it deregisters that revision.
    return { status: 'repaired', target: want.family, created: true, revision: out.taskDefinition?.revision };
  },
  async compensate(ctx, output) {
    const ref = `${String(output.target)}:${String(output.revision)}`;
    await aws(`ECS DeregisterTaskDefinition ${ref}`, () =>
      ctx.aws().ecs.send(new DeregisterTaskDefinitionCommand({ taskDefinition: ref })),
    );
    return { status: 'deregistered', target: ref };
  },
};

const pullSecret: ResourceHandler = {
  async detect(ctx) {
    const want = envOf(ctx, 'aws_ecs').pull_secret;
    if (!want)
      return {
        resource: 'pull_secret',
        status: 'skipped',
        reason: 'The runner group uses no registry pull secret.',
      };
    try {
      const secret = await ctx.aws().secrets.send(new DescribeSecretCommand({ SecretId: want.name }));
      if (secret.DeletedDate) {
        return {
          resource: 'pull_secret',
          status: 'drifted',
          action: 'restore',
          target: want.name,
          differences: [{ field: 'scheduled_for_deletion', expected: false, actual: true }],
        };
      }
      return { resource: 'pull_secret', status: 'in_sync', target: want.name };
    } catch (err) {
      if (!isAwsNotFound(err)) throw awsFailure(err, `Secrets Manager DescribeSecret ${want.name}`);
      // Kumoss never holds registry credentials: a missing pull secret needs a person.
      return {
        resource: 'pull_secret',
        status: 'blocked',
        target: want.name,
        reason: `Secret ${want.name} does not exist; store the registry credentials in it (Kumoss never holds them).`,
      };
    }
  },
  async repair(ctx, action) {
    if (action.action !== 'restore') throw new Error(`pull_secret cannot be ${action.action}d by Kumoss`);
    await aws(`Secrets Manager RestoreSecret ${action.target}`, () =>
      ctx.aws().secrets.send(new RestoreSecretCommand({ SecretId: action.target })),
    );
    return { status: 'repaired', target: action.target, created: false };
  },
};

// ---- GCP ------------------------------------------------------------------------------------

function project(ctx: ResourceContext): string {
  return ctx.connection.project_id ?? '';
}

const serviceAccount: ResourceHandler = {
  async detect(ctx) {
    const want = envOf(ctx, 'gce', 'cloud_run').service_account;
    const email = ctx.gcp().serviceAccountEmail(project(ctx), want.account_id);
    const sa = await gcp(`IAM get ${email}`, () => ctx.gcp().getServiceAccount(project(ctx), email));
    if (sa?.disabled) {
      return {
        resource: 'gce_service_account',
        status: 'drifted',
        action: 'enable',
        target: email,
        differences: [{ field: 'disabled', expected: false, actual: true }],
      };
    }
    return result(
      'gce_service_account',
      email,
      !!sa,
      differences({ display_name: want.display_name || undefined }, { display_name: sa?.displayName ?? '' }),
    );
  },
  async repair(ctx, action) {
    const want = envOf(ctx, 'gce', 'cloud_run').service_account;
    const p = project(ctx);
    const email = ctx.gcp().serviceAccountEmail(p, want.account_id);
    const sa = await gcp(`IAM get ${email}`, () => ctx.gcp().getServiceAccount(p, email));
    if (!sa) {
      await gcp(`IAM create ${email}`, () =>
        ctx.gcp().createServiceAccount(p, want.account_id, {
          displayName: want.display_name,
          description: `${REPAIR_TAG}=${ctx.repairId}`,
        }),
      );
      return { status: 'repaired', target: email, created: true };
    }
    if (sa.disabled) await gcp(`IAM enable ${email}`, () => ctx.gcp().enableServiceAccount(p, email));
    if (want.display_name && sa.displayName !== want.display_name) {
      await gcp(`IAM patch ${email}`, () => ctx.gcp().patchServiceAccount(p, email, want.display_name));
    }
    return {
      status: 'repaired',
      target: email,
      action: action.action,
      created: sa.description === `${REPAIR_TAG}=${ctx.repairId}`,
    };
  },
  async compensate(ctx, output) {
    const email = String(output.target);
    await gcp(`IAM delete ${email}`, () => ctx.gcp().deleteServiceAccount(project(ctx), email));
    return { status: 'deleted', target: email };
  },
};

function templateShape(t: Awaited<ReturnType<GcpClient['getInstanceTemplate']>>) {
  return {
    machine_type: t?.properties.machineType ?? null,
    source_image: t?.properties.disks?.find((d) => d.boot)?.initializeParams?.sourceImage ?? null,
    service_account: t?.properties.serviceAccounts?.[0]?.email ?? null,
  };
}

const instanceTemplate: ResourceHandler = {
  async detect(ctx) {
    const env = envOf(ctx, 'gce');
    const want = env.instance_template;
    const t = await gcp(`Compute get instance template ${want.name}`, () =>
      ctx.gcp().getInstanceTemplate(project(ctx), want.name),
    );
    // Instance templates are immutable: drift means replace.
    return result(
      'gce_instance_template',
      want.name,
      !!t,
      differences(
        {
          machine_type: want.machine_type,
          source_image: want.source_image,
          service_account: ctx.gcp().serviceAccountEmail(project(ctx), env.service_account.account_id),
        },
        templateShape(t),
      ),
      'replace',
    );
  },
  async repair(ctx, action) {
    const env = envOf(ctx, 'gce');
    const want = env.instance_template;
    const p = project(ctx);
    const existing = await gcp(`Compute get instance template ${want.name}`, () =>
      ctx.gcp().getInstanceTemplate(p, want.name),
    );
    if (existing?.properties.labels?.[REPAIR_TAG] === labelValue(ctx.repairId)) {
      return { status: 'repaired', target: want.name, created: action.action === 'create' };
    }
    if (existing)
      await gcp(`Compute delete instance template ${want.name}`, () =>
        ctx.gcp().deleteInstanceTemplate(p, want.name),
      );
    await gcp(`Compute insert instance template ${want.name}`, () =>
      ctx.gcp().insertInstanceTemplate(p, {
        name: want.name,
        properties: {
          machineType: want.machine_type,
          disks: [{ boot: true, initializeParams: { sourceImage: want.source_image } }],
          serviceAccounts: [
            {
              email: ctx.gcp().serviceAccountEmail(p, env.service_account.account_id),
              scopes: ['https://www.googleapis.com/auth/cloud-platform'],
            },
          ],
          labels: { [REPAIR_TAG]: labelValue(ctx.repairId) },
        },
      }),
    );
    // Only a template that did not exist before is undone by deleting it.
    return { status: 'repaired', target: want.name, created: !existing, replaced: !!existing };
  },
  async compensate(ctx, output) {
    const name = String(output.target);
    await gcp(`Compute delete instance template ${name}`, () =>
      ctx.gcp().deleteInstanceTemplate(project(ctx), name),
    );
    return { status: 'deleted', target: name };
  },
};

/** GCP label values: lower case letters, digits, _ and -, at most 63 characters. */
export function labelValue(id: string): string {
  return id
    .toLowerCase()
    .replace(/[^a-z0-9_-]/g, '-')
    .slice(-63);
}

function jobSpec(ctx: ResourceContext) {
  const env = envOf(ctx, 'cloud_run');
  return {
    labels: { [REPAIR_TAG]: labelValue(ctx.repairId) },
    template: {
      template: {
        containers: [{ image: env.cloud_run_job.image }],
        serviceAccount: ctx.gcp().serviceAccountEmail(project(ctx), env.service_account.account_id),
      },
    },
  };
}

const cloudRunJob: ResourceHandler = {
  async detect(ctx) {
    const env = envOf(ctx, 'cloud_run');
    const want = env.cloud_run_job;
    const job = await gcp(`Cloud Run get job ${want.name}`, () =>
      ctx.gcp().getJob(project(ctx), ctx.connection.region, want.name),
    );
    return result(
      'cloud_run_job',
      want.name,
      !!job,
      differences(
        {
          image: want.image,
          service_account: ctx.gcp().serviceAccountEmail(project(ctx), env.service_account.account_id),
        },
        {
          image: job?.template.template.containers[0]?.image ?? null,
          service_account: job?.template.template.serviceAccount ?? null,
        },
      ),
    );
  },
  async repair(ctx) {
    const want = envOf(ctx, 'cloud_run').cloud_run_job;
    const p = project(ctx);
    const region = ctx.connection.region;
    const job = await gcp(`Cloud Run get job ${want.name}`, () => ctx.gcp().getJob(p, region, want.name));
    if (!job) {
      await gcp(`Cloud Run create job ${want.name}`, () =>
        ctx.gcp().createJob(p, region, want.name, jobSpec(ctx)),
      );
      return { status: 'repaired', target: want.name, created: true };
    }
    const ours = job.labels?.[REPAIR_TAG] === labelValue(ctx.repairId);
    await gcp(`Cloud Run update job ${want.name}`, () =>
      ctx.gcp().patchJob(p, region, want.name, {
        ...jobSpec(ctx),
        labels: { ...job.labels, ...(ours ? jobSpec(ctx).labels : {}) },
      }),
    );
    return { status: 'repaired', target: want.name, created: ours };
  },
  async compensate(ctx, output) {
    const name = String(output.target);
    await gcp(`Cloud Run delete job ${name}`, () =>
      ctx.gcp().deleteJob(project(ctx), ctx.connection.region, name),
    );
    return { status: 'deleted', target: name };
  },
};

export const RESOURCE_HANDLERS: Record<RunnerResource, ResourceHandler> = {
  ecs_cluster: ecsCluster,
  log_group: logGroup,
  task_definition: taskDefinition,
  pull_secret: pullSecret,
  gce_service_account: serviceAccount,
  gce_instance_template: instanceTemplate,
  cloud_run_job: cloudRunJob,
};
