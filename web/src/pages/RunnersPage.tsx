// Runner groups (seed 002), one view per path:
//   /runners                          connections and groups (runners/Overview.tsx)
//   /runners/<group>                  a group: its environment, detection, executions (runners/GroupView.tsx)
//   /runners/<group>/runs/<workflow>  one execution, live (runners/RunView.tsx)
import type { Me } from '../api/client';
import { GroupView } from './runners/GroupView';
import { Overview } from './runners/Overview';
import { RunView } from './runners/RunView';

export function RunnersPage({ me, path }: { me: Me; path: string }) {
  const run = /^\/runners\/([0-9a-f-]{36})\/runs\/([A-Za-z0-9._-]+)$/.exec(path);
  if (run?.[1] && run[2]) return <RunView groupId={run[1]} workflowId={run[2]} me={me} />;
  const group = /^\/runners\/([0-9a-f-]{36})$/.exec(path);
  if (group?.[1]) return <GroupView groupId={group[1]} me={me} />;
  return <Overview me={me} />;
}
