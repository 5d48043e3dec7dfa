// The test machine's stand-in for the cloud's storage and remote state.
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * What stands for the cloud and for remote state on a test machine: the drift beds' `local_file`
 * targets and their local backends' state files live below it. A sandboxed engine may write it,
 * as a real one reaches its cloud and its backend over the network.
 */
export function testCloudDir(): string {
  const dir = join(tmpdir(), 'kumoss-test-cloud');
  mkdirSync(dir, { recursive: true });
  return dir;
}
