import { describe, expect, it } from 'vitest';
import { devServerArgs, loadDevServerSpec } from '../../scripts/embedded/temporal-dev';

describe('temporal-dev.yaml', () => {
  it('becomes start-dev flags: SQLite file in the data dir, search attributes, dynamic config', () => {
    const args = devServerArgs(loadDevServerSpec(), '/data');
    const joined = args.join(' ');
    expect(args.slice(0, 2)).toEqual(['server', 'start-dev']);
    expect(joined).toContain('--port 7233');
    expect(joined).toContain('--ui-port 8233');
    expect(joined).toContain('--db-filename /data/temporal.sqlite');
    expect(joined).toContain('--search-attribute KumossSessionId=Keyword');
    expect(joined).toContain('--dynamic-config-value frontend.enableUpdateWorkflowExecution=true');
  });

  it('runs headless and in memory when the harness asks', () => {
    const args = devServerArgs({ ...loadDevServerSpec(), headless: true, db_filename: undefined }, '/data');
    expect(args).toContain('--headless');
    expect(args).not.toContain('--ui-port');
    expect(args).not.toContain('--db-filename');
  });
});
