// Which credential git gets for a repository (issue 26 item 1). A run talks to one repository of
// one organization; its git client carries at most one token, for that repository's origin:
// the organization's own credential for the host (its git connection, sealed in the metadata store
// and opened here for the call), else the operator's token for that host (GIT_TOKEN for the
// configured GitHub/GitLab hosts, GITEA_TOKEN for Gitea) when the organization has connected it
// and is one the operator's tokens serve (security.operator_git_credentials_for). A host the
// organization has not connected gets nothing, nor does any other origin.
import type { Db } from '../shared/infra/db';
import { gitConnectionFor, openGitCredential, repositoryOrigin } from '../shared/infra/db/git-connections';
import { sessionOrganization } from '../shared/infra/db/sessions';
import type { SecretBox } from '../shared/infra/secret-box';
import { ApplicationFailure } from '@temporalio/activity';
import { ErrorTypes } from '../shared/errors';
import { checkTarget, type TargetPolicy } from '../shared/infra/network-targets';
import type { GitClient } from './git';

export interface GitAccessDeps {
  /** The settings every client takes (CA bundle, author, timeout); its own tokens are not used. */
  git: GitClient;
  /** The operator's tokens by origin (worker/deps.ts gitHostTokens). */
  operatorTokens: Record<string, string>;
  /** Organizations (names; `*`: all) the operator's tokens serve; default: `default` only. */
  operatorOrganizations?: string[];
  /** The metadata store: connections, and sessions' organizations. */
  db?: Db;
  /** KUMOSS_SECRETS_KEY's box; absent: sealed credentials cannot be opened (the call fails). */
  box?: SecretBox;
  /**
   * Which private targets a repository may be on (security.private_targets_allowed): checked again
   * at every clone and fetch — a name may resolve elsewhere since the API let it in — and git
   * connects to the address checked. Absent: no check (the tests' own clients).
   */
  targets?: TargetPolicy;
}

export class GitAccess {
  /** A client with no credential at all: local plumbing (commit, log, show, revert). */
  readonly local: GitClient;

  constructor(private readonly deps: GitAccessDeps) {
    this.local = deps.git.withHostTokens({});
  }

  /** The token a run of `organization_uuid` (none: an operator's run) sends to the URL's origin. */
  async tokenFor(repositoryUrl: string, organization_uuid: string | undefined): Promise<string | undefined> {
    const origin = repositoryOrigin(repositoryUrl);
    if (!origin) return undefined;
    if (organization_uuid === undefined) return this.deps.operatorTokens[origin];
    if (!this.deps.db) return undefined;
    const connection = await gitConnectionFor(this.deps.db, organization_uuid, repositoryUrl);
    if (!connection) return undefined;
    if (connection.credential_sealed) {
      if (!this.deps.box)
        throw new Error(
          `the git connection ${origin} has a stored credential, but this worker has no KUMOSS_SECRETS_KEY to open it`,
        );
      return openGitCredential(this.deps.box, organization_uuid, connection);
    }
    return (await this.mayUseOperatorTokens(organization_uuid))
      ? this.deps.operatorTokens[origin]
      : undefined;
  }

  /** True when the operator's git and forge tokens serve this organization's runs. */
  async mayUseOperatorTokens(organization_uuid: string): Promise<boolean> {
    const allowed = this.deps.operatorOrganizations ?? ['default'];
    if (allowed.includes('*')) return true;
    if (!this.deps.db) return false;
    const row = await this.deps.db
      .selectFrom('organizations')
      .select('name')
      .where('organization_uuid', '=', organization_uuid)
      .executeTakeFirst();
    return row !== undefined && allowed.includes(row.name);
  }

  /** The git client of one repository for a run of `organization_uuid` (none: an operator's). */
  async forRepository(repositoryUrl: string, organization_uuid: string | undefined): Promise<GitClient> {
    const pinned = await this.checked(repositoryUrl);
    const token = await this.tokenFor(repositoryUrl, organization_uuid);
    const origin = repositoryOrigin(repositoryUrl);
    return this.deps.git.withHostTokens(token && origin ? { [origin]: token } : {}, pinned);
  }

  /** The address git must connect to for `repositoryUrl`; throws when the target is refused. */
  private async checked(repositoryUrl: string): Promise<string[]> {
    if (!this.deps.targets) return [];
    const check = await checkTarget(repositoryUrl, this.deps.targets);
    if (check.refused !== undefined)
      throw ApplicationFailure.nonRetryable(
        `Repository ${repositoryUrl} is refused: ${check.refused}.`,
        ErrorTypes.TargetRefused,
      );
    if (!check.address) return [];
    const url = new URL(repositoryUrl);
    const port = url.port || (url.protocol === 'https:' ? '443' : '80');
    const ip = check.address.family === 6 ? `[${check.address.address}]` : check.address.address;
    return [`${url.hostname}:${port}:${ip}`];
  }

  /** The git client of a session's repository: its organization's credential. */
  async forSession(sessionId: string, repositoryUrl: string): Promise<GitClient> {
    return this.forRepository(repositoryUrl, await this.sessionOrganization(sessionId));
  }

  /**
   * The organization of a session. A session the store does not know (a workflow started by hand
   * for a test) is an operator's run.
   */
  async sessionOrganization(sessionId: string): Promise<string | undefined> {
    return this.deps.db ? sessionOrganization(this.deps.db, sessionId) : undefined;
  }
}
