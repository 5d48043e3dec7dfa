// Pull requests on Gitea through its REST API (/api/v1), authenticated with a token
// (`Authorization: token …`), over HTTPS with the CA bundle Kumoss trusts. The same contract as
// the GitHub client: opening adopts the pull request already open for the head branch, merging
// answers the merge commit of one already merged, and refusals are classified by HTTP status.
import { forgeApi, repositoryPath, type Forge, type OpenedPullRequest } from './forge';

export interface GiteaOptions {
  /** https://host[:port] of the Gitea server. */
  url: string;
  token: string;
  /** PEM CA bundle to trust (the embedded forge's self-signed CA); default: the system's. */
  ca?: string | Buffer;
  timeoutMs?: number;
}

/** owner and repo from https://host/<owner>/<repo>(.git) */
export function giteaRepo(repositoryUrl: string): { owner: string; repo: string } {
  const [owner = '', repo = ''] = repositoryPath(repositoryUrl, 'Gitea', 2);
  return { owner, repo };
}

interface GiteaPull {
  number: number;
  html_url: string;
  state: 'open' | 'closed';
  merged: boolean;
  merge_commit_sha: string | null;
}

export class GiteaPullRequests implements Forge {
  private readonly call: ReturnType<typeof forgeApi>;

  constructor(opts: GiteaOptions) {
    this.call = forgeApi({
      forge: 'Gitea',
      base: `${opts.url.replace(/\/$/, '')}/api/v1`,
      headers: { authorization: `token ${opts.token}` },
      ...(opts.ca ? { ca: opts.ca } : {}),
      ...(opts.timeoutMs ? { timeoutMs: opts.timeoutMs } : {}),
    });
  }

  async defaultBranch(repositoryUrl: string): Promise<string> {
    const { owner, repo } = giteaRepo(repositoryUrl);
    const r = (await this.call(`/repos/${owner}/${repo}`, `read ${owner}/${repo}`)) as {
      default_branch: string;
    };
    return r.default_branch;
  }

  /** The pull request from `head` into `base`, if there is one. */
  private async find(
    owner: string,
    repo: string,
    base: string,
    head: string,
  ): Promise<GiteaPull | undefined> {
    return (await this.call(
      `/repos/${owner}/${repo}/pulls/${encodeURIComponent(base)}/${encodeURIComponent(head)}`,
      `look up the pull request from ${head}`,
      { missing: 'undefined' },
    )) as GiteaPull | undefined;
  }

  async open(pr: {
    repositoryUrl: string;
    head: string;
    base: string;
    title: string;
    body: string;
  }): Promise<OpenedPullRequest> {
    const { owner, repo } = giteaRepo(pr.repositoryUrl);
    const view = (p: GiteaPull, adopted: boolean): OpenedPullRequest => ({
      number: p.number,
      url: p.html_url,
      state: p.merged ? 'merged' : p.state,
      adopted,
    });
    const existing = await this.find(owner, repo, pr.base, pr.head);
    if (existing) return view(existing, true);
    const created = (await this.call(`/repos/${owner}/${repo}/pulls`, `open a pull request from ${pr.head}`, {
      method: 'POST',
      body: { head: pr.head, base: pr.base, title: pr.title, body: pr.body },
    })) as GiteaPull;
    return view(created, false);
  }

  async merge(pr: { repositoryUrl: string; number: number; message: string }): Promise<{ commit: string }> {
    const { owner, repo } = giteaRepo(pr.repositoryUrl);
    const get = async () =>
      (await this.call(
        `/repos/${owner}/${repo}/pulls/${pr.number}`,
        `read pull request #${pr.number}`,
      )) as GiteaPull;
    const before = await get();
    if (before.merged && before.merge_commit_sha) return { commit: before.merge_commit_sha };
    await this.call(`/repos/${owner}/${repo}/pulls/${pr.number}/merge`, `merge pull request #${pr.number}`, {
      method: 'POST',
      body: { Do: 'merge', MergeTitleField: pr.message },
    });
    const after = await get();
    if (!after.merged || !after.merge_commit_sha) {
      throw new Error(`Gitea accepted the merge of #${pr.number} but does not report it merged yet`);
    }
    return { commit: after.merge_commit_sha };
  }
}
