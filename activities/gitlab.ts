// Merge requests on GitLab through its REST API (/api/v4), authenticated with a token
// (`PRIVATE-TOKEN`). The same contract as the GitHub and Gitea clients: opening adopts the merge
// request already open for the source branch, merging answers the merge commit of one already
// merged, and refusals are classified by HTTP status. (@gitbeaker/rest retries 429 and 502 ten
// times inside every call, which would multiply Temporal's own retries; these are four calls.)
import { forgeApi, repositoryPath, type Forge, type OpenedPullRequest } from './forge';

export interface GitLabOptions {
  /** https://gitlab.com, or a self-managed instance. */
  url: string;
  token: string;
  ca?: string | Buffer;
}

/** The project path (`group/subgroup/project`) of https://host/<path>(.git), URL-encoded as GitLab's id. */
export function gitlabProject(repositoryUrl: string): string {
  return encodeURIComponent(repositoryPath(repositoryUrl, 'GitLab').join('/'));
}

interface MergeRequest {
  iid: number;
  web_url: string;
  state: 'opened' | 'closed' | 'merged' | 'locked';
  merge_commit_sha: string | null;
}

export class GitLabMergeRequests implements Forge {
  private readonly call: ReturnType<typeof forgeApi>;

  constructor(opts: GitLabOptions) {
    this.call = forgeApi({
      forge: 'GitLab',
      base: `${opts.url.replace(/\/$/, '')}/api/v4`,
      headers: { 'private-token': opts.token },
      ...(opts.ca ? { ca: opts.ca } : {}),
    });
  }

  async defaultBranch(repositoryUrl: string): Promise<string> {
    const id = gitlabProject(repositoryUrl);
    return ((await this.call(`/projects/${id}`, 'read the project')) as { default_branch: string })
      .default_branch;
  }

  async open(pr: {
    repositoryUrl: string;
    head: string;
    base: string;
    title: string;
    body: string;
  }): Promise<OpenedPullRequest> {
    const id = gitlabProject(pr.repositoryUrl);
    const view = (m: MergeRequest, adopted: boolean): OpenedPullRequest => ({
      number: m.iid,
      url: m.web_url,
      state: m.state === 'merged' ? 'merged' : m.state === 'opened' ? 'open' : 'closed',
      adopted,
    });
    const existing = (await this.call(
      `/projects/${id}/merge_requests?state=opened&source_branch=${encodeURIComponent(pr.head)}&target_branch=${encodeURIComponent(pr.base)}`,
      'list merge requests',
    )) as MergeRequest[];
    if (existing[0]) return view(existing[0], true);
    const created = (await this.call(
      `/projects/${id}/merge_requests`,
      `open a merge request from ${pr.head}`,
      {
        method: 'POST',
        body: { source_branch: pr.head, target_branch: pr.base, title: pr.title, description: pr.body },
      },
    )) as MergeRequest;
    return view(created, false);
  }

  async merge(pr: { repositoryUrl: string; number: number; message: string }): Promise<{ commit: string }> {
    const id = gitlabProject(pr.repositoryUrl);
    const show = async () =>
      (await this.call(
        `/projects/${id}/merge_requests/${pr.number}`,
        `read merge request !${pr.number}`,
      )) as MergeRequest;
    const before = await show();
    if (before.state === 'merged' && before.merge_commit_sha) return { commit: before.merge_commit_sha };
    const merged = (await this.call(
      `/projects/${id}/merge_requests/${pr.number}/merge`,
      `merge merge request !${pr.number}`,
      {
        method: 'PUT',
        body: { merge_commit_message: pr.message },
      },
    )) as MergeRequest;
    if (merged.state !== 'merged' || !merged.merge_commit_sha) {
      throw new Error(`GitLab accepted the merge of !${pr.number} but does not report it merged yet`);
    }
    return { commit: merged.merge_commit_sha };
  }
}
